"""Run-to-run and temporal performance variation (Cao et al., FAST'17), pure numpy.

Everything here is a pure function of arrays (and of plain numbers passed in, such as the
kernel's dirty-page intervals), so it can be tested with synthetic data of known answer and
re-run on stored arrays without the machine that produced them.

Vocabulary (the paper's):

- *Throughput-N*: ops/s in consecutive N-second windows of one run; *cumulative throughput*
  is Throughput-(whole run).
- *relative range* = (max - min) / mean across runs: the paper's main metric because it does
  not hide outliers the way the RSD's square root does; *RSD* = sample std (ddof=1) / mean.
- The *K-S distance* between two latency distributions is the largest vertical gap between
  their CDFs; the *K-S range* of one op across runs is the largest pairwise distance.

Latency histograms use one fixed log-bucketed grid (:data:`N_BUCKETS` buckets, HDR style with
128 sub-buckets per power of two), so histograms from different runs, windows and workers add
up exactly and a percentile read from one is within 0.4 % of the true value. Workloads record
into this grid so that memory stays bounded for long runs (see ``fsscope.workloads.personalities``).

Modules: ``grid`` (the histogram grid), ``metrics`` (throughput and latency-distribution
variation), ``stats`` (statistical tests, the configuration ladder), ``temporal`` (flags with
notes, most over time), ``report`` (the ``--json`` document). Import from them.
"""
