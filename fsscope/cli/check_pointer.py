"""What the measuring commands (bench, study variation) share with ``fsscope check``:
the one-line pointer to it when the machine-wide audit finds something bad. Its own module so
that neither command imports the other."""

from __future__ import annotations

from rich.console import Console


def bad_pointer(root=None) -> str | None:
    """One line pointing to ``fsscope check`` when the fast, machine-wide audit items (no
    target, no sampling: milliseconds) find something bad; None when they do not."""
    from fsscope.check.audit import fast_audit
    from fsscope.check.system import Root

    bad = [f for f in fast_audit(root or Root()) if f.severity == "bad"]
    if not bad:
        return None
    what = "; ".join(f"{f.id}: {f.title}" for f in bad[:3])
    return f"note: this machine has {len(bad)} bad pre-benchmark finding(s) ({what}) — run 'fsscope check' first"


def point_at_check() -> None:
    """Print the pointer on stderr when there is one. Call it only once the command line is
    known good, so that bad input stays one line."""
    pointer = bad_pointer()
    if pointer:
        Console(stderr=True, soft_wrap=True).print(pointer, style="yellow", highlight=False, markup=False)
