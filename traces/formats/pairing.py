"""Match arrival (queue/issue) events to completion events, streaming, vectorised.

An arrival matches the first later completion of the same direction at the same offset.
Arrivals whose completion has not been seen yet are held back (with everything after
them, to keep arrival order) until it arrives or ``horizon_s`` of trace time has passed;
then they are emitted with a NaN latency.  An arrival merged into another request (no
completion of its own) takes the completion of the request that covers it.
"""

from __future__ import annotations

import numpy as np

from traces.chunks import TraceChunk


def match_completions(
    arr_t: np.ndarray, arr_key: np.ndarray, cmp_t: np.ndarray, cmp_key: np.ndarray
) -> np.ndarray:
    """Latency of each arrival: first completion with equal key at or after it, else NaN.

    Both event lists must be sorted by time; keys are int64 (offset and direction combined).
    One sort of all events by (key, time) puts each arrival just before its completion; the
    next completion at or after every position is a running minimum.  (Binary search of
    random keys would cost a cache miss per probe.)
    """
    na = len(arr_t)
    lat = np.full(na, np.nan)
    if not na or not len(cmp_t):
        return lat
    nc = len(cmp_t)
    n = na + nc
    # Each event's rank in time order (a merge of the two sorted lists, no sort needed).
    rank_a = np.arange(na) + np.searchsorted(cmp_t, arr_t, side="left")
    rank_c = np.arange(nc) + np.searchsorted(arr_t, cmp_t, side="right")
    key_r = np.empty(n, dtype=np.int64)
    key_r[rank_a], key_r[rank_c] = arr_key, cmp_key
    t_r = np.empty(n)
    t_r[rank_a], t_r[rank_c] = arr_t, cmp_t
    is_c_r = np.zeros(n, dtype=bool)
    is_c_r[rank_c] = True
    bits = max(int(n).bit_length(), 1)
    if key_r.min() >= 0 and int(key_r.max()) < (1 << (63 - bits)):
        # Sort (key, time rank) packed in one int64: a plain sort, much cheaper than argsort.
        packed = np.sort((key_r << bits) | np.arange(n, dtype=np.int64))
        order = packed & ((1 << bits) - 1)
        key_sorted = packed >> bits
    else:
        order = np.argsort(key_r, kind="stable")
        key_sorted = key_r[order]
    is_c = is_c_r[order]
    pos = np.where(is_c, np.arange(n), n)
    nxt = np.minimum.accumulate(pos[::-1])[::-1]
    ia = np.flatnonzero(~is_c)
    j = nxt[ia]
    ok = j < n
    ia, j = ia[ok], j[ok]
    same = key_sorted[j] == key_sorted[ia]
    ra, rc = order[ia[same]], order[j[same]]
    # Back from time ranks to arrival indices.
    arr_index = np.empty(n, dtype=np.int64)
    arr_index[rank_a] = np.arange(na)
    lat[arr_index[ra]] = t_r[rc] - t_r[ra]
    return lat


def match_covering(
    arr_t: np.ndarray,
    arr_off: np.ndarray,
    arr_w: np.ndarray,
    cmp_t: np.ndarray,
    cmp_off: np.ndarray,
    cmp_w: np.ndarray,
    cmp_size: np.ndarray,
) -> np.ndarray:
    """Latency of arrivals merged into a larger request: a later completion covering their offset.

    A bio merged into another request (blktrace M/F events) has no completion of its own;
    the merged request's completion starts at a lower (back merge) or the same offset and
    covers it.  Per direction, the completion with the highest start <= the arrival's
    offset is the candidate; it must cover the offset and come after the arrival.
    """
    lat = np.full(len(arr_t), np.nan)
    for write in (False, True):
        a = np.flatnonzero(arr_w == write)
        c = np.flatnonzero(cmp_w == write)
        if not len(a) or not len(c):
            continue
        order = c[np.argsort(cmp_off[c], kind="stable")]
        pos = np.searchsorted(cmp_off[order], arr_off[a], side="right") - 1
        ok = pos >= 0
        a, cand = a[ok], order[pos[ok]]
        hit = (arr_off[a] < cmp_off[cand] + cmp_size[cand]) & (cmp_t[cand] >= arr_t[a])
        lat[a[hit]] = cmp_t[cand[hit]] - arr_t[a[hit]]
    return lat


def direction_key(offset: np.ndarray, is_write: np.ndarray) -> np.ndarray:
    """One int64 per (offset, direction) for matching."""
    return offset.astype(np.int64) * 2 + is_write.astype(np.int64)


class EventPairer:
    """Streaming matcher: feed batches of arrivals and completions, get requests out."""

    def __init__(self, horizon_s: float = 30.0) -> None:
        self.horizon_s = horizon_s
        self._held = TraceChunk.empty()

    def feed(
        self, arrivals: TraceChunk, cmp_t: np.ndarray, cmp_key: np.ndarray, cmp_size: np.ndarray | None = None
    ) -> TraceChunk:
        """Add a batch (arrivals without latency, completions by time); return settled requests.

        With ``cmp_size`` (bytes), arrivals without an exact completion may match a completion
        covering them (merged requests).
        """
        pending = TraceChunk.concat([self._held, arrivals])
        todo = np.isnan(pending.latency_s)
        if todo.any() and len(cmp_t):
            sub = pending.take(todo)
            lat = match_completions(sub.time_s, direction_key(sub.offset, sub.is_write), cmp_t, cmp_key)
            if cmp_size is not None and np.isnan(lat).any():
                miss = np.flatnonzero(np.isnan(lat))
                lat[miss] = match_covering(
                    sub.time_s[miss],
                    sub.offset[miss],
                    sub.is_write[miss],
                    cmp_t,
                    cmp_key // 2,
                    (cmp_key % 2).astype(bool),
                    cmp_size,
                )
            pending.latency_s[np.flatnonzero(todo)] = lat
        if not len(pending):
            return pending
        newest = max(pending.time_s[-1], cmp_t[-1] if len(cmp_t) else -np.inf)
        waiting = np.isnan(pending.latency_s) & (pending.time_s > newest - self.horizon_s)
        cut = int(np.argmax(waiting)) if waiting.any() else len(pending)
        self._held = pending.take(slice(cut, None))
        return pending.take(slice(0, cut))

    def finish(self) -> TraceChunk:
        """Everything still held (unmatched ones keep a NaN latency)."""
        held, self._held = self._held, TraceChunk.empty()
        return held
