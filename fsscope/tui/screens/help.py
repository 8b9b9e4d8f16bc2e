"""What each view shows and how to read it, written for a student meeting file-system
latency for the first time."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# fsscope — how to read it

fsscope formats a **target** (a disk, an image file, RAM, or a plain directory) with a
**recipe** (a file system plus its mkfs and mount options), runs measured **jobs** on it in a
background process, records every run, and points at what is interesting.

## Keys everywhere

| key | what it does |
|---|---|
| F2 / F3 / F4 | setup / live / runs screens |
| F5 | the Lab: a seed paper's finding, why, and r to run it and see the verdict |
| F1 | this help |
| ? | the keys of the screen in front of you (its own, its views', the focused list's, and these) |
| t | next theme (dark → light → high contrast); the command palette (ctrl+p) lists all |
| ctrl+s (or x outside a text field) | save the current screen as an SVG picture in `exports/` |
| m | write the flags of the run on screen (with their notes) as Markdown in `exports/` |
| y / s (on a table or the flags) | copy the rows shown as CSV / save them as CSV in `exports/` |
| / (on runs, flags, check items) | filter: rows not containing the text hide (Esc clears) |
| ctrl+p | command palette: every action by name |
| tab / shift+tab | next / previous field or list (a field takes what you type right after it, however fast) |
| ctrl+q | quit; with a job running it asks first (quitting cancels it; it cleans up) |

## Setup screen

1. **Target** — where to measure. *Default image* is a sparse file in fsscope's data directory,
   attached as a loop device: nothing else on the machine is touched. *RAM image* lives in
   /dev/shm. A *directory* is measured as it is (no formatting; what you get without root).
   Block devices are listed with fsscope's verdict: ✓ usable (blank, unused), ! carries data
   (you must type its name to destroy it), ✗ never (mounted, holds /, swap, in use by LVM/RAID).
2. **Recipe** — the file system and its options. The preview shows the *exact* mkfs and mount
   commands. Hygiene toggles make runs comparable: *drop caches* starts every run cold;
   *remount after populating* also clears the journal and inode caches.
3. **Jobs** — space toggles a job; the highlighted job's parameters are shown below it.
   The **probe** times one system call (creat, mkdir, …) per file, on as many files as *files*
   says, and repeats that *runs* times. The **bench** runs a throughput personality (fileserver,
   webserver, varmail) *runs* times for *seconds* each; **syncwrite** writes files with
   synchronous writes of each buffer size.

**ctrl+r** (or the Start button) starts. Jobs run one after another, each in its own process.

## Live screen

**Progress** — each job, its phase (format, populate, run k of R, …), elapsed and remaining time.
**c** cancels: the job stops, unmounts, detaches its loop device and keeps what it measured.
Press **c** again to kill it outright (fsscope still undoes what it left behind).

**Heatmap** — *each row is one run* of the probe; *each column is one file index* (the 1st,
2nd, 3rd… file the probe touched), or a bucket of neighbouring files when zoomed out. The
colour is the latency of that call on a **logarithmic** scale (legend below the map): every
step of the colour bar is the same *ratio*, so 10 µs → 100 µs looks as different as
100 µs → 1 ms. Blank cells were not measured (yet).
Keys: arrows move the cursor ╋ (its file, run and latency are shown under the map),
**+ / -** zoom, **0** fits all files on screen, **a** chooses what a bucket shows
(its max, p99, p90, median or mean — max is the default so no outlier hides).

**What makes an outlier *repeatable*?** A single slow call can be noise: an interrupt, a
flush, another process. A file index that is slow in **every run** — on a freshly made file
system each time — is slow *because of the file system's structure*: that is where a
directory changes format, an inode chunk is allocated, a B-tree splits. In the heatmap it is
a bright **vertical stripe through all rows**. Noise is a bright cell in one row only.

**A series** is repeatable outliers at a constant stride (e.g. every 64 files: XFS allocates
inodes in chunks of 64). **A level shift** is where the typical latency steps up or down and
stays there — a colour change at one column across all rows — for example when a directory
outgrows its compact in-inode format and becomes a block or B-tree directory (a
*directory-format threshold*). **Linear growth** is latency that keeps rising with the file
index (a directory searched linearly).

**Flags** — what the analysis found, as it finds it: ! outlier, ⋮ series, ↕ level shift,
↗ growth, ◆ a threshold predicted from the file system's geometry. Moving through the list
marks the flag's files in the heatmap (• cells, ▼ above the columns) and shows its **note**:
what was found, where, and why the structure causes it. **m** writes all flags with their
notes to `exports/flags-RUN.md`. Flags appear as runs finish, each judged on the runs so far
(a flag's count follows: "slow in 2/2 runs" becomes "5/5"); when the job ends, the final list
(all runs) replaces them.

**Sparklines** — per window of consecutive calls: median (p50) and p99 latency (log-scaled so
one spike does not flatten the rest), calls per second, and from the kernel's counters the
device's IOPS and MB/s and the machine's CPU use.

**Bench view** — for a *bench* job (a throughput personality run R times, each on a freshly
made file system) the heatmap gives way to the current run's **ops/s per second** (or per
Throughput-N window: **w**) drawn as bars over the **band** of the other runs (shaded from
their minimum to their maximum, ─ their mean): a run that leaves the band behaves differently
from the others. **r** picks the run drawn, **z** zooms the y axis to the data. Below: each
operation's p50/p99 latency (the last second while running, whole runs at the end) and the
**variation table**: every run's cumulative ops/s, its slowest and fastest window, and across
runs the **relative range** ((max − min) / mean) and **RSD** (standard deviation / mean);
≈ marks live estimates that the report replaces. Flags: ± variation above the threshold,
» warm-up, ≈ periodic dips, ≠ windows that disagree with the whole-run verdict.

**Sync-write view** — one row per buffer size: throughput and per-write latency as bars, the
p99, and their ratio (MB/s per ms of latency); ★ marks the size with the best ratio, past
which bigger writes cost more latency than they gain.

**Check view** — for a *check* job (the sanity check before a benchmark): one row per audit
item as a traffic light (● red bad, yellow warn, green ok; ○ unknown, with the reason), worst
first; ↑↓ select a row to read below it the **evidence** (the file and value read), the
**effect** on results and the **fix** (a command). Under it the calibration fills in: the
throughput of each short run as bars, and the runs needed for a ±precision 95 % interval
(Student-t) as estimated after each run — it settles as runs accumulate. The verdict (fit /
caution / unfit) is the first flag; its note says what to fix first.

**Variation-study view** — for a *variation* job (Cao et al., FAST'17: sampled storage-stack
configurations, R runs each), the paper's figures as text plots, filling in as each
configuration's runs are recorded. **f** cycles, or jump: **1** each run's throughput per
configuration as a range (sorted by relative range) and mean ops/s vs relative range; **2** the
same configuration under each workload; **6** the CDF of the Throughput-N relative range per
window size, per file system; **7** Throughput-N over time, each run over its maximum, and the band across runs (Fig. 5; **w**
window); **8** each run's latency CDF per op and the K-S range (**o** op); **9** K-S range vs
throughput range with the PCC and its p-value, per op; **k** the flagged configurations and, per
knob level, the mean relative range and how many are flagged (★ a level all flagged ones share).
**[ ]** pick the configuration shown beside the figure (its knobs, mkfs/mount options, notes);
picking a flag does the same. ■ ext4 ● XFS ▲ btrfs; red = above the threshold.

**Ladder view** — for a *ladder* job (the paper's Fig. 3): one row per hygiene step (baseline,
+no_lazy, +umount, +alloc), its runs' ops/s on one scale (● a run, ┼ the mean) and the relative
range; the paper's direction is each step lowering or keeping it. For alloc, one image checksum
means every run really started from the same bytes.

**Log** — every external command (mkfs, mount, losetup, umount, …) with its exit status and
time, and the job's phases.

**Aging view** — an *age* job churns files (seeded creates and deletes) until the tree looks
like an aging profile. *Fullness* is the share of the file system's capacity in use as `df`
counts it once synced (metadata and the unused tails of small files' last blocks included), drawn as a bar
of the capacity with the target marked ┃; more than 5 points off the target is called out.
The *rapid phase* only creates, up to the target fullness; the *stable phase* then creates and
deletes at that fullness. The three histograms compare the profile's file sizes, directory
depths and ages (target, dim) with the tree's (actual, bold); each has a chi-squared
**p-value**: near 1 the tree matches the profile, below 0.05 it does not (yet). The
**convergence bound** T is the number of operations after which, by the Geriatrix paper's
argument, the age distribution can match; *× capacity written* is how often the data written
equals the capacity (*allocated* with fallocate, which writes nothing). The progress bar is
the largest of the time limit used and the work done (fullness, then operations to the bound),
and never runs backwards; its line says what it is based on.

## Words you will meet in the notes

- **short-form / block / leaf / node (XFS directories)** — a small directory lives *inside* its
  inode (short-form); when it outgrows that it moves to one directory block, then to a leaf
  format with a separate hash index, then to a node format (a B-tree of leaves). Each move is
  one slow create.
- **data fork** — the part of an XFS inode that holds the file's (or directory's) data or the
  map of it; its size decides how many entries fit short-form. **bs_forkoff** is where the
  attribute fork starts inside the inode (from XFS bulkstat): the data fork ends there.
- **inode chunk / cluster** — XFS allocates inodes 64 at a time (a chunk) and reads them 32 at
  a time (a cluster): the first create in a new chunk or a never-read cluster is slow.
- **htree** — ext4's hashed directory index: a directory larger than one block becomes one, and
  its leaf blocks split as it grows.
- **leaf split (btrfs)** — btrfs keeps directory entries and inodes in a B-tree of leaves; a
  full leaf splits in two.

## Runs screen

Every job leaves a run directory (manifest, events, arrays, report). **Enter** replays a run
in the live views; **space** marks a run and **c** compares two marked runs side by side on one
colour scale, with the K-S distance (the largest gap between their latency distributions:
0 = identical, 1 = no overlap) and the ratio of their medians. **Home/End** go to the newest
or oldest run; **m** exports the highlighted run's flags; **F4** from a replay or a comparison
returns to this list.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,f1", "close", "Close")]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 96%; height: 94%; border: round $primary; background: $surface; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-scroll"):
            yield Markdown(HELP, id="help-text")

    def on_mount(self) -> None:
        self.query_one("#help-scroll").focus()

    def action_close(self) -> None:
        self.dismiss(None)
