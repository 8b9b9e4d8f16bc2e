"""The log-bucketed latency histogram grid every workload records into (HDR style).

:data:`N_BUCKETS` buckets, 128 sub-buckets per power of two: histograms from different runs,
windows and workers add up exactly, and a percentile read from one is within 0.4 % of the
true value.
"""

from __future__ import annotations

import math

import numpy as np

SUB_BITS = 7                   # 128 sub-buckets per power of two: bucket width <= 1/128 of value
_SUB = 1 << SUB_BITS
MAX_EXP = 41                   # values >= 2**41 ns (~36.6 min) land in the last bucket
N_BUCKETS = (MAX_EXP - SUB_BITS - 1) * _SUB + 2 * _SUB   # 4480
_MAX_VALUE_NS = (1 << MAX_EXP) - 1


def bucket_index_one(latency_ns: int) -> int:
    """Bucket of one latency (pure Python, for per-call use in worker loops)."""
    if latency_ns < 0:
        latency_ns = 0
    elif latency_ns > _MAX_VALUE_NS:
        latency_ns = _MAX_VALUE_NS
    exp = latency_ns.bit_length() - (SUB_BITS + 1)
    if exp <= 0:
        return latency_ns
    return (exp << SUB_BITS) + (latency_ns >> exp)


def bucket_index(latency_ns: np.ndarray) -> np.ndarray:
    """Bucket of every latency (int64 ns array) on the shared grid: values < 256 ns are exact."""
    values = np.clip(np.asarray(latency_ns, dtype=np.int64), 0, _MAX_VALUE_NS)
    # frexp is exact for integers < 2**53: its exponent is the bit length.
    _, bit_length = np.frexp(values.astype(np.float64))
    exp = np.maximum(bit_length.astype(np.int64) - (SUB_BITS + 1), 0)
    return (exp << SUB_BITS) + (values >> exp)


def bucket_lower_ns(index: np.ndarray | int) -> np.ndarray:
    """Smallest latency that falls into each bucket."""
    idx = np.asarray(index, dtype=np.int64)
    exp = np.maximum((idx >> SUB_BITS) - 1, 0)
    return (idx - (exp << SUB_BITS)) << exp


def bucket_width_ns(index: np.ndarray | int) -> np.ndarray:
    idx = np.asarray(index, dtype=np.int64)
    return np.int64(1) << np.maximum((idx >> SUB_BITS) - 1, 0)


def bucket_mid_ns(index: np.ndarray | int) -> np.ndarray:
    """Representative value of each bucket (its midpoint): within 0.4 % of any member."""
    return bucket_lower_ns(index) + (bucket_width_ns(index) - 1) / 2.0


def latency_histogram(latency_ns: np.ndarray) -> np.ndarray:
    """Counts per bucket (int64, length :data:`N_BUCKETS`) of raw latencies."""
    idx = bucket_index(latency_ns)
    return np.bincount(idx, minlength=N_BUCKETS).astype(np.int64)


def hist_percentile_ns(hist: np.ndarray, q: float) -> float:
    """The q-th percentile (0..100, nearest rank) of a bucket histogram; nan when empty."""
    hist = np.asarray(hist)
    total = int(hist.sum())
    if total == 0:
        return math.nan
    rank = max(1, math.ceil(q / 100.0 * total))
    idx = int(np.searchsorted(np.cumsum(hist), rank))
    return float(bucket_mid_ns(idx))
