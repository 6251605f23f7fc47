"""Per-window statistics helpers of the characterisation: sizes, sequentiality, p99, totals."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from modeling.workload import MAX_REQUEST_SIZE
from traces.chunks import TraceChunk

BURST_GAP_S = 1e-6
HIST_EDGES = np.geomspace(1e-7, 1e4, 2500)  # latency histogram for the summary p99 (~1 % bins)
# inter-arrival gap histogram per window, 10 bins a decade from 0.1 us to 1,000 s: what the
# cold-path correction (traces.predict.utilisation) needs of the gaps, whatever its time constant
GAP_EDGES = np.geomspace(1e-7, 1e3, 101)
GAP_CENTRES = np.concatenate([[0.0], np.sqrt(GAP_EDGES[1:] * GAP_EDGES[:-1]), [GAP_EDGES[-1]]])


def round_size(size: np.ndarray | float) -> np.ndarray:
    """Round mean sizes to a multiple of 512 bytes within the workload limits."""
    s = np.round(np.asarray(size, dtype=np.float64) / 512.0) * 512
    return np.clip(s, 512, MAX_REQUEST_SIZE).astype(np.int64)


def seq_flags(chunk: TraceChunk, last_end: dict[bool, int | None]) -> np.ndarray:
    """True where a request starts where the previous one of its direction ended."""
    seq = np.zeros(len(chunk), dtype=bool)
    for write in (False, True):
        idx = np.flatnonzero(chunk.is_write == write)
        if not len(idx):
            continue
        off = chunk.offset[idx]
        end = off + chunk.size[idx]
        prev = np.empty(len(idx), dtype=np.int64)
        prev[1:] = end[:-1]
        last = last_end[write]
        prev[0] = -1 if last is None else last
        seq[idx] = off == prev
        last_end[write] = int(end[-1])
    return seq


def group_p99(g: np.ndarray, lat: np.ndarray, ngroups: int) -> np.ndarray:
    """99th percentile (nearest rank) of ``lat`` per group id; NaN for groups without values."""
    out = np.full(ngroups, np.nan)
    ok = ~np.isnan(lat)
    if not ok.any():
        return out
    g, lat = g[ok], lat[ok]
    order = np.lexsort((lat, g))
    counts = np.bincount(g, minlength=ngroups)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    has = counts > 0
    rank = np.ceil(0.99 * counts[has]).astype(np.int64) - 1
    out[has] = lat[order][starts[has] + rank]
    return out


def arrival_cv2(t: np.ndarray, g: np.ndarray, ngroups: int) -> np.ndarray:
    """Squared coefficient of variation of inter-arrival times per group (NaN under 2 gaps)."""
    gap = np.diff(t)
    same = g[1:] == g[:-1]
    gg, gap = g[1:][same], gap[same]
    n = np.bincount(gg, minlength=ngroups).astype(np.float64)
    s1 = np.bincount(gg, gap, minlength=ngroups)
    s2 = np.bincount(gg, gap * gap, minlength=ngroups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s1 / n
        var = np.maximum(s2 / n - mean * mean, 0.0)
        cv2 = var / (mean * mean)
    cv2[(n < 2) | ~(mean > 0)] = np.nan
    return cv2


def gap_histogram(t: np.ndarray, g: np.ndarray, ngroups: int) -> np.ndarray:
    """Counts of inter-arrival gaps per group in :data:`GAP_EDGES` bins, (ngroups, len(GAP_CENTRES))."""
    gap = np.diff(t)
    same = g[1:] == g[:-1]
    b = np.searchsorted(GAP_EDGES, gap[same])
    nb = len(GAP_CENTRES)
    flat = np.bincount(g[1:][same] * nb + b, minlength=ngroups * nb)
    return flat.reshape(ngroups, nb)


@dataclass
class Totals:
    """Running whole-trace totals for the summary."""

    n: int = 0
    writes: int = 0
    read_bytes: int = 0
    write_bytes: int = 0
    nonseq_r: int = 0
    nonseq_w: int = 0
    lat_sum: float = 0.0
    lat_n: int = 0
    burst_sum: float = 0.0
    first_t: float | None = None
    last_t: float = 0.0
    last_done: float = 0.0
    hist: np.ndarray = field(default_factory=lambda: np.zeros(len(HIST_EDGES) + 1, np.int64))
