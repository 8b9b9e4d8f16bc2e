"""A ``scan`` job's report, as the scan view shows it (plain Python: replay and tests use it)."""

from __future__ import annotations

from fsscope.format import visible
from fsscope.scan.job import Report
from fsscope.tui.report_model import ReportModel


class ScanModel(ReportModel[Report]):
    kind = "scan"

    def notes_of(self, report: Report) -> list[str]:
        return ([f"not read: {visible(gap)}" for gap in report.unread]
                + [f"swapped, not followed: {visible(line)}" for line in report.swapped])

    def summary(self) -> str:
        r = self.report
        if r is None:
            # a failed scan says so: "scanning…" stayed under a row that said failed
            return f"failed: {visible(self.error)}" if self.error else "scanning… (shown when the job ends)"
        counts = ", ".join(f"{n} {k}" for k, n in sorted(r.structures.items()))
        c = r.checked
        # names are the tree owner's: control characters visible; the view shows this as text
        text = (f"{visible(r.path)} on {visible(r.summary)}\n{r.directories} directories, "
                f"{r.files} files: {counts}; checked against the file system: {c.agree} agree, "
                f"{c.disagree} differ, {c.not_checked} not checked. {r.read_only.note}.")
        if r.near_change_more:
            text += (f"\nnear a change, not listed: {sum(r.near_change_more.values())} smaller directories ("
                     + ", ".join(f"{n} → {visible(k)}" for k, n in r.near_change_more.items()) + ")")
        nearest = r.aging.nearest if r.aging else []
        if nearest:
            text += "\naging: nearest profiles " + ", ".join(f"{visible(n.profile)} ({n.distance:.2f})"
                                                          for n in nearest[:3])
        if r.free_space is not None:
            fs = r.free_space
            text += f"\nfree space: {fs.free_extent_count} free extents, largest {fs.largest_free_extent_bytes:,} B"
        elif r.free_space_error:
            text += f"\nfree space: not read: {visible(r.free_space_error)}"
        if r.swapped_count:
            text += f"\n{r.swapped_count} directories swapped during the walk, not followed: {visible(r.swapped[0])}"
        return text

    def rows(self) -> list[tuple[str, str, str, str, str, str]]:
        """(section, directory, entries, structure, next change, file system says): the
        directories near a change first, then the largest."""
        if self.report is None:
            return []
        out = []
        for section, dirs in (("near", self.report.near_change), ("largest", self.report.largest)):
            for d in dirs:
                ahead = d.creates_until_change
                nxt = f"in {ahead.creates} → {ahead.becomes}" if ahead else "-"
                said = ("agrees" if d.agrees else f"differs: {d.why or ''}" if d.agrees is False
                        else "not checked")
                structure = ("not classified" if d.structure is None
                             else d.structure + (f" depth {d.depth}" if d.depth else ""))
                out.append((section, visible(d.path), str(d.entries), structure, nxt, visible(said)))
        return out
