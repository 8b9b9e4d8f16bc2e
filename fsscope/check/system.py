"""Audit readers of machine-wide state: CPU frequency and turbo, load, memory, swap, THP,
dirty-page settings, cgroup I/O limits, periodic jobs, thermal throttling.

Each reader is a pure function of a :class:`Root` (a directory holding ``proc/``, ``sys/`` and
``etc/``; the real one is ``/``) and returns a :class:`Finding`. Tests hand them a made-up
root to produce states this machine cannot (a powersave governor, throttle counters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from fsscope.check.findings import Finding, unknown
from fsscope.format import format_bytes


@dataclass(frozen=True)
class Root:
    """Where /proc, /sys and /etc are read from (``/`` on the real machine)."""

    path: str = "/"

    def p(self, rel: str) -> Path:
        return Path(self.path) / rel.lstrip("/")

    def read(self, rel: str) -> str:
        """The file's text, stripped; OSError when it cannot be read."""
        return self.p(rel).read_text().strip()

    def glob(self, pattern: str) -> list[Path]:
        return sorted(Path(self.path).glob(pattern.lstrip("/")))

    def show(self, path: Path | str) -> str:
        """A path as the user would type it (the root prefix removed)."""
        text = str(path)
        base = str(Path(self.path))
        if not text.startswith("/"):
            return "/" + text  # already root-relative
        return "/" + text[len(base):].lstrip("/") if base != "/" and text.startswith(base) else text


REAL_ROOT = Root()


def try_read(root: Root, rel: str) -> str | None:
    try:
        return root.read(rel)
    except (OSError, UnicodeDecodeError):
        return None


def meminfo(root: Root) -> dict[str, int]:
    """/proc/meminfo in bytes (the 'kB' values times 1024)."""
    out: dict[str, int] = {}
    for line in (try_read(root, "proc/meminfo") or "").splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1]) * (1024 if len(parts) > 2 and parts[2] == "kB" else 1)
    return out


def vmstat(root: Root) -> dict[str, int]:
    out = {}
    for line in (try_read(root, "proc/vmstat") or "").splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def cpu_count(root: Root) -> int | None:
    """CPUs online, from /sys/devices/system/cpu/online ("0-3,6")."""
    text = try_read(root, "sys/devices/system/cpu/online")
    if not text:
        return None
    n = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        n += int(hi) - int(lo) + 1 if hi else 1
    return n


# ---------------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------------

def cpu_governor(root: Root) -> Finding:
    effect = ("a power-saving governor changes the clock with the load, so CPU-side costs of every "
              "syscall (and run-to-run variation) depend on what else ran just before")
    fix = "cpupower frequency-set -g performance   (or: echo performance | tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor)"
    files = root.glob("sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor")
    if not files:
        return unknown("cpu-governor", "CPU frequency governor",
                       "no /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor: no cpufreq driver "
                       "(a VM, or frequency set by firmware/host)", effect, "")
    govs = {}
    for f in files:
        try:
            govs[f.parent.parent.name] = f.read_text().strip()
        except OSError:
            govs[f.parent.parent.name] = "?"
    kinds = sorted(set(govs.values()))
    evidence = f"{root.show(files[0].parent.parent.parent)}/cpu*/cpufreq/scaling_governor = " + \
        ", ".join(f"{g} ({sum(1 for v in govs.values() if v == g)} CPUs)" for g in kinds)
    if kinds == ["performance"]:
        return Finding("cpu-governor", "ok", "CPU governor: performance on every CPU", evidence, effect, "",
                       {"governors": govs})
    return Finding("cpu-governor", "warn", f"CPU governor: {', '.join(k for k in kinds if k != 'performance')}",
                   evidence, effect, fix, {"governors": govs})


#: Where a CPU's turbo/boost is switched: (file under sys/devices/system/cpu, its value when off,
#: what the finding calls it)
TURBO_SWITCHES = (("intel_pstate/no_turbo", "1", "turbo", "(intel_pstate)"), ("cpufreq/boost", "0", "CPU boost", ""))


def turbo(root: Root) -> Finding:
    effect = ("with turbo/boost the clock depends on temperature and how many cores are busy: the same "
              "run can be faster alone than beside another job")
    for name, off, what, how in TURBO_SWITCHES:
        path = f"/sys/devices/system/cpu/{name}"
        value = try_read(root, path[1:])
        if value is not None:
            ev = f"{path} = {value}"
            if value == off:
                return Finding("turbo", "ok", f"{what} off {how}".strip(), ev, effect, "")
            return Finding("turbo", "warn", f"{what} on {how}".strip(), ev, effect, f"echo {off} > {path}")
    return unknown("turbo", "turbo/boost", "neither /sys/devices/system/cpu/intel_pstate/no_turbo nor "
                   "/sys/devices/system/cpu/cpufreq/boost exists (no intel_pstate/acpi-cpufreq: a VM?)", effect)


def load(root: Root) -> Finding:
    effect = ("other runnable tasks take CPU time and cache from the benchmark's workers and the kernel's "
              "writeback threads: throughput drops and varies with their activity")
    fix = "stop other jobs first (top -o %CPU shows them), or pin the benchmark away from them (taskset)"
    text = try_read(root, "proc/loadavg")
    ncpu = cpu_count(root)
    if not text or not ncpu:
        return unknown("load", "load", "cannot read /proc/loadavg or /sys/devices/system/cpu/online", effect, fix)
    parts = text.split()
    load1 = float(parts[0])
    running = max(0, int(parts[3].split("/")[0]) - 1)  # minus the reader itself
    ev = f"/proc/loadavg = {text} ({ncpu} CPUs: 1-min load {load1 / ncpu:.0%} of them, {running} other runnable now)"
    values = {"load1": load1, "runnable_others": running, "cpus": ncpu}
    per_cpu = max(load1, running) / ncpu
    if per_cpu >= 0.75:
        return Finding("load", "bad", f"busy machine: load {load1:.2f} on {ncpu} CPUs", ev, effect, fix, values)
    if per_cpu >= 0.25:
        return Finding("load", "warn", f"load {load1:.2f} on {ncpu} CPUs", ev, effect, fix, values)
    return Finding("load", "ok", f"idle: load {load1:.2f} on {ncpu} CPUs", ev, effect, "", values)


def thermal(root: Root, before: dict[str, int] | None = None) -> Finding:
    """Throttle counters; with ``before`` (counts at the start of the sample), their growth."""
    effect = "a throttled CPU runs slower for seconds at a time: throughput dips that no storage setting explains"
    fix = "cool the machine or lower its load; check fans/airflow; compare 'turbostat' before and after"
    counts = throttle_counts(root)
    if not counts:
        return unknown("thermal", "thermal throttling",
                       "no /sys/devices/system/cpu/cpu*/thermal_throttle/*_throttle_count (not an Intel CPU with "
                       "the therm_throt driver, or a VM)", effect)
    total = sum(counts.values())
    grown = sum(max(0, v - (before or {}).get(k, v)) for k, v in counts.items()) if before else 0
    ev = (f"/sys/devices/system/cpu/cpu*/thermal_throttle/{{core,package}}_throttle_count: total {total} "
          f"over {len(counts)} counters" + (f", +{grown} during the check" if before else ""))
    values = {"total": total, "during_check": grown}
    if grown:
        return Finding("thermal", "bad", f"CPU throttled {grown} times during the check", ev, effect, fix, values)
    if total:
        return Finding("thermal", "warn", f"CPU was throttled {total} times since boot", ev, effect, fix, values)
    return Finding("thermal", "ok", "no thermal throttling recorded", ev, effect, "", values)


def throttle_counts(root: Root) -> dict[str, int]:
    out = {}
    for f in root.glob("sys/devices/system/cpu/cpu[0-9]*/thermal_throttle/*_throttle_count"):
        try:
            out[str(f)] = int(f.read_text().strip())
        except (OSError, ValueError):
            continue
    return out


# ---------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------

DIRTY_DEFAULTS = {"dirty_background_ratio": 10, "dirty_ratio": 20, "dirty_background_bytes": 0,
                  "dirty_bytes": 0, "dirty_writeback_centisecs": 500, "dirty_expire_centisecs": 3000}


def dirty_settings(root: Root) -> Finding:
    effect = ("these set when buffered writes block and how often the flusher wakes (every "
              "dirty_writeback_centisecs, writing data older than dirty_expire_centisecs): throughput "
              "dips at that period, and results differ from machines with other settings")
    values = {}
    for name in DIRTY_DEFAULTS:
        text = try_read(root, f"proc/sys/vm/{name}")
        if text is not None and text.lstrip("-").isdigit():
            values[name] = int(text)
    if not values:
        return unknown("dirty-settings", "dirty-page settings", "cannot read /proc/sys/vm/dirty_*", effect)
    ev = "/proc/sys/vm/: " + ", ".join(f"{k} = {v}" for k, v in values.items())
    changed = {k: v for k, v in values.items() if DIRTY_DEFAULTS[k] != v}
    if values.get("dirty_writeback_centisecs") == 0:
        return Finding("dirty-settings", "warn", "periodic writeback disabled (dirty_writeback_centisecs = 0)",
                       ev, effect, "sysctl vm.dirty_writeback_centisecs=500", values)
    if changed:
        return Finding("dirty-settings", "warn", "dirty-page settings differ from the kernel defaults: "
                       + ", ".join(changed), ev, effect,
                       "sysctl " + " ".join(f"vm.{k}={DIRTY_DEFAULTS[k]}" for k in changed)
                       + "   (or report them with the results)", values)
    return Finding("dirty-settings", "ok", "dirty-page settings are the kernel defaults", ev, effect, "", values)


def dirty_pending(root: Root) -> Finding:
    effect = ("dirty data left by a previous run is written back during the next one: the benchmark pays "
              "for writes it did not make")
    mem = meminfo(root)
    if "Dirty" not in mem:
        return unknown("dirty-pending", "dirty data pending", "cannot read Dirty: in /proc/meminfo", effect, "sync")
    dirty, wb = mem["Dirty"], mem.get("Writeback", 0)
    ev = f"/proc/meminfo: Dirty = {format_bytes(dirty)}, Writeback = {format_bytes(wb)}"
    values = {"dirty_bytes": dirty, "writeback_bytes": wb}
    pending = dirty + wb
    if pending >= 256 << 20:
        return Finding("dirty-pending", "bad", f"{format_bytes(pending)} of dirty data waiting for writeback",
                       ev, effect, "sync   (fsscope recipes do 'sync; drop_caches' before each run)", values)
    if pending >= 32 << 20:
        return Finding("dirty-pending", "warn", f"{format_bytes(pending)} of dirty data waiting for writeback",
                       ev, effect, "sync", values)
    return Finding("dirty-pending", "ok", f"little dirty data pending ({format_bytes(pending)})", ev, effect, "", values)


def swap(root: Root, before: dict[str, int] | None = None, seconds: float = 0.0) -> Finding:
    """Swap in use, and (with ``before``: /proc/vmstat at the start of the sample) swapping."""
    effect = ("swapping stalls the benchmark's processes and adds I/O to the swap device; swap in use means "
              "memory is short, so the page cache (and what the benchmark caches) shrinks and grows unpredictably")
    text = try_read(root, "proc/swaps")
    if text is None:
        return unknown("swap", "swap", "cannot read /proc/swaps", effect, "swapoff -a")
    used = 0
    devices = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 4:
            devices.append(parts[0])
            used += int(parts[3]) * 1024
    vm = vmstat(root)
    swappiness = try_read(root, "proc/sys/vm/swappiness")
    pages = 0
    if before is not None:
        pages = sum(vm.get(k, 0) - before.get(k, 0) for k in ("pswpin", "pswpout"))
    ev = (f"/proc/swaps: {len(devices)} device(s), {format_bytes(used)} used; /proc/sys/vm/swappiness = {swappiness}"
          + (f"; /proc/vmstat pswpin+pswpout +{pages} pages in {seconds:.1f} s" if before is not None else ""))
    values = {"devices": devices, "used_bytes": used, "swapped_pages_during_check": pages}
    if pages > 0:
        return Finding("swap", "bad", f"swapping now ({pages} pages in {seconds:.1f} s)", ev, effect,
                       "free memory (stop other jobs) or 'swapoff -a' before benchmarking", values)
    if used > 0:
        return Finding("swap", "warn", f"{format_bytes(used)} swapped out", ev, effect,
                       "swapoff -a && swapon -a   (brings it back; needs free RAM)", values)
    if not devices:
        return Finding("swap", "ok", "no swap configured", ev, effect, "", values)
    return Finding("swap", "ok", "swap configured, none in use", ev, effect, "", values)


def thp(root: Root) -> Finding:
    effect = ("with THP 'always', khugepaged and page-fault compaction run at unpredictable times and can "
              "stall the benchmark's processes")
    text = try_read(root, "sys/kernel/mm/transparent_hugepage/enabled")
    if text is None:
        return unknown("thp", "transparent huge pages",
                       "no /sys/kernel/mm/transparent_hugepage/enabled (kernel without THP)", effect)
    mode = re.search(r"\[(\w+)\]", text)
    mode_s = mode.group(1) if mode else text
    ev = f"/sys/kernel/mm/transparent_hugepage/enabled = {text}"
    if mode_s == "always":
        return Finding("thp", "warn", "transparent huge pages: always", ev, effect,
                       "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled", {"mode": mode_s})
    return Finding("thp", "ok", f"transparent huge pages: {mode_s}", ev, effect, "", {"mode": mode_s})


def memory_limit_bytes(root: Root, pid: str = "self") -> tuple[int | None, str]:
    """The memory limit of the process's cgroup (v2 memory.max or v1 memory.limit_in_bytes),
    with where it was read; None when unlimited or unreadable."""
    for cg in cgroup_dirs(root, pid):
        for name in ("memory.max", "memory.limit_in_bytes"):
            text = try_read(root, str(cg / name))
            if text and text.isdigit() and int(text) < (1 << 60):
                return int(text), f"{root.show(cg / name)} = {text}"
    return None, ""


def page_cache_fit(root: Root, dataset_bytes: int | None) -> Finding:
    effect = ("a dataset that fits in the page cache is served from RAM after its first read: the benchmark "
              "measures the cache, not the disk (Cao et al. limited RAM to 4 GiB for this)")
    fix = ("use a dataset larger than RAM, or limit the benchmark's memory ('fsscope bench --mem-limit SIZE'), "
           "or drop caches before each run and use direct I/O")
    mem = meminfo(root)
    if "MemTotal" not in mem:
        return unknown("page-cache-fit", "dataset vs page cache", "cannot read /proc/meminfo", effect, fix)
    total, avail = mem["MemTotal"], mem.get("MemAvailable", mem.get("MemFree", 0))
    limit, limit_ev = memory_limit_bytes(root)
    cache = min(avail, limit) if limit else avail
    ev = (f"/proc/meminfo: MemTotal = {format_bytes(total)}, MemAvailable = {format_bytes(avail)}"
          + (f"; {limit_ev}" if limit else ""))
    values = {"mem_total_bytes": total, "mem_available_bytes": avail, "cgroup_limit_bytes": limit,
              "dataset_bytes": dataset_bytes}
    if dataset_bytes is None:
        return Finding("page-cache-fit", "unknown", "dataset vs page cache: no --dataset given",
                       ev + f"; pass --dataset SIZE (the data your benchmark will touch) to judge it: up to "
                       f"{format_bytes(cache)} would be served from RAM", effect, fix, values)
    ev += f"; --dataset {format_bytes(dataset_bytes)}"
    if dataset_bytes <= cache:
        return Finding("page-cache-fit", "bad", f"the {format_bytes(dataset_bytes)} dataset fits in the "
                       f"{format_bytes(cache)} of RAM available for caching", ev, effect, fix, values)
    if dataset_bytes < 2 * max(total, cache):
        return Finding("page-cache-fit", "warn", f"the {format_bytes(dataset_bytes)} dataset is partly cached "
                       f"(RAM {format_bytes(total)})", ev, effect, fix, values)
    return Finding("page-cache-fit", "ok", f"the {format_bytes(dataset_bytes)} dataset is over twice RAM "
                   f"({format_bytes(total)})", ev, effect, "", values)


# ---------------------------------------------------------------------------------------------
# cgroups and periodic jobs
# ---------------------------------------------------------------------------------------------

def _mounts(root: Root, pid: str = "self") -> list[list[str]]:
    return [line.split() for line in (try_read(root, f"proc/{pid}/mountinfo") or "").splitlines()]


def cgroup_dirs(root: Root, pid: str = "self", controller: str | None = None) -> list[Path]:
    """The process's cgroup directories and their ancestors below each hierarchy's root
    (v2 unified, and v1 ``controller`` hierarchies), deepest first. Paths are root-relative."""
    text = try_read(root, f"proc/{pid}/cgroup") or ""
    wanted: list[tuple[str, str]] = []  # (hierarchy mount type/option, cgroup path)
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, ctrls, path = parts
        if ctrls == "":
            wanted.append(("cgroup2", path))
        elif controller is None or controller in ctrls.split(","):
            wanted.append((ctrls, path))
    out: list[Path] = []
    for fields in _mounts(root, pid):
        if "-" not in fields:
            continue
        sep = fields.index("-")
        fstype, mnt, opts = fields[sep + 1], fields[4], fields[-1].split(",")
        for kind, path in wanted:
            if (kind == "cgroup2" and fstype == "cgroup2") or (fstype == "cgroup" and set(kind.split(",")) <= set(opts)):
                parts = [p for p in path.split("/") if p]
                for depth in range(len(parts), 0, -1):
                    out.append(Path(mnt.lstrip("/")) / "/".join(parts[:depth]))
    return out


V1_THROTTLE = ("blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
               "blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device")


def cgroup_io_limit(root: Root, devno: str | None, pid: str = "self") -> Finding:
    """io.max (v2) or blkio.throttle.* (v1) limits on fsscope's own cgroup and its ancestors;
    ``devno`` is the target's "MAJ:MIN" (None: any device counts)."""
    effect = ("a cgroup I/O limit caps the benchmark's throughput or IOPS: you measure the limit, "
              "not the storage")
    if try_read(root, f"proc/{pid}/cgroup") is None:
        return unknown("cgroup-io-limit", "cgroup I/O limits", f"cannot read /proc/{pid}/cgroup", effect)
    dirs = cgroup_dirs(root, pid, "blkio")
    limits = []
    for cg in dirs:
        text = try_read(root, str(cg / "io.max"))
        for line in (text or "").splitlines():
            dev, *kv = line.split()
            set_ = [x for x in kv if not x.endswith("=max")]
            if set_:
                limits.append((root.show(cg / "io.max"), dev, " ".join(set_)))
        for name in V1_THROTTLE:
            for line in (try_read(root, str(cg / name)) or "").splitlines():
                dev, _, value = line.partition(" ")
                if value:
                    limits.append((root.show(cg / name), dev, value))
    where = ", ".join(dict.fromkeys(root.show(d) for d in dirs)) or "the root cgroup"
    if not limits:
        return Finding("cgroup-io-limit", "ok", "no cgroup I/O limits on fsscope's cgroup",
                       f"/proc/{pid}/cgroup → {where}: no io.max / blkio.throttle limits", effect, "")
    ev = "; ".join(f"{path}: {dev} {value}" for path, dev, value in limits)
    mine = [x for x in limits if devno is None or x[1] == devno]
    if mine:
        path = mine[0][0].rsplit("/", 1)[0]
        return Finding("cgroup-io-limit", "bad", f"an I/O limit applies to the target device ({mine[0][2]})", ev,
                       effect, f"echo '{mine[0][1]} rbps=max wbps=max riops=max wiops=max' > {path}/io.max   "
                       "(or run fsscope outside that cgroup)", {"limits": limits})
    return Finding("cgroup-io-limit", "warn", "cgroup I/O limits exist on other devices", ev, effect,
                   "none needed for this target", {"limits": limits})


# (unit or cron name pattern, what it does)
PERIODIC = (("fstrim", "discards all free space of mounted file systems (weekly)"),
            ("e2scrub", "snapshots and checks ext4 file systems on LVM"),
            ("raid-check", "reads whole md arrays"), ("mdcheck", "reads whole md arrays"),
            ("btrfs-scrub", "reads and verifies a whole btrfs"), ("btrfs-balance", "rewrites btrfs chunks"),
            ("updatedb", "walks every file system (locate database)"), ("plocate", "walks every file system"),
            ("mlocate", "walks every file system"), ("man-db", "rebuilds man caches"),
            ("apt-daily", "downloads and installs packages"), ("logrotate", "compresses logs"),
            ("dpkg-db-backup", "copies the package database"))


HEAVY = ("fstrim", "e2scrub", "raid-check", "mdcheck", "scrub", "updatedb", "locate")
UNIT_DIRS = ("etc/systemd/system", "run/systemd/system", "lib/systemd/system", "usr/lib/systemd/system")


def timer_schedule(root: Root, unit: str) -> str:
    """OnCalendar/OnBootSec/RandomizedDelaySec of a timer unit, as its file says ("" if not found)."""
    for d in UNIT_DIRS:
        text = try_read(root, f"{d}/{unit}")
        if text:
            keys = ("OnCalendar", "OnBootSec", "OnUnitActiveSec", "RandomizedDelaySec")
            return ", ".join(line.strip() for line in text.splitlines() if line.strip().startswith(keys))
    return ""


def running_comms(root: Root, names: tuple[str, ...]) -> list[str]:
    found = []
    for comm in root.glob("proc/[0-9]*/comm"):
        try:
            name = comm.read_text().strip()
        except OSError:
            continue
        if name in names:
            found.append(name)
    return sorted(set(found))


def periodic_jobs(root: Root) -> Finding:
    """Enabled timers (with their schedule) and cron jobs that do heavy I/O, and whether
    anything here would fire them (systemd running: /run/systemd/system; a cron daemon)."""
    effect = ("a timer or cron job that fires during a long benchmark adds its own I/O (fstrim can discard "
              "the whole free space at once): one run looks slow for no reason in the storage stack")
    wants = root.glob("etc/systemd/system/timers.target.wants/*.timer")
    crons = [job for d in ("etc/cron.d", "etc/cron.daily", "etc/cron.weekly", "etc/cron.hourly")
             for job in root.glob(f"{d}/*")]
    if not wants and not root.p("etc/cron.d").exists() and not root.p("etc/systemd/system").exists():
        return unknown("periodic-jobs", "periodic jobs", "no /etc/systemd/system and no /etc/cron.d to read",
                       effect)
    systemd = root.p("run/systemd/system").is_dir()
    cron = running_comms(root, ("cron", "crond", "anacron", "fcron", "busybox-crond"))
    found = []  # (name, what, fix, active)
    for unit in wants:
        for pattern, what in PERIODIC:
            if pattern in unit.name:
                when = timer_schedule(root, unit.name)
                found.append((f"timer {unit.name}" + (f" ({when})" if when else ""), what,
                              f"systemctl stop {unit.name}", systemd, unit.name))
    for job in crons:
        for pattern, what in PERIODIC:
            if pattern in job.name:
                found.append((f"cron {root.show(job)}", what, f"chmod -x {root.show(job)}   (restore afterwards)",
                              bool(cron), job.name))
    ev = (f"{len(wants)} enabled timers in /etc/systemd/system/timers.target.wants; systemd "
          + ("running (/run/systemd/system)" if systemd else "not running (no /run/systemd/system): timers do not fire")
          + "; cron daemon " + (f"running ({', '.join(cron)})" if cron else "not running: cron jobs do not fire"))
    if found:
        ev += "; " + "; ".join(f"{name}: {what}" + ("" if active else " [inactive here]")
                               for name, what, _, active, _ in found)
    heavy = [f for f in found if f[3] and any(p in f[4] for p in HEAVY)]
    values = {"jobs": [f[0] for f in found], "active_heavy": [f[4] for f in heavy], "systemd": systemd, "cron": cron}
    if heavy:
        return Finding("periodic-jobs", "warn", f"{len(heavy)} I/O-heavy periodic job(s) may fire during a long "
                       f"benchmark: {', '.join(f[4] for f in heavy)}", ev, effect,
                       "; ".join(dict.fromkeys(f[2] for f in heavy)), values)
    if found:
        idle = not any(f[3] for f in found)
        return Finding("periodic-jobs", "ok", f"{len(found)} periodic jobs configured; "
                       + ("none would fire here (neither systemd nor cron runs)" if idle else "none does heavy I/O"),
                       ev, effect, "", values)
    return Finding("periodic-jobs", "ok", "no periodic jobs of note found", ev, effect, "", values)
