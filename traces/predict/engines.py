"""One engine story: a trace is replayed with psync, so its prediction must rest on psync points.

Each stored point keeps the fio engine it was measured with (``engine``).  The replay
(:mod:`traces.replay.run`), the open-loop points and the device check issue psync; a
closed-loop sweep's default engine is io_uring.  On the zram reference the two disagree
most where a trace lives: 4 KiB QD1 measured 31-49 us with io_uring and 4-20 us with
psync, so an io_uring curve predicted light windows 2-3x too slow.  :func:`engine_notes`
says so with the device's own numbers (the same mix measured both ways where it has both)
and what to run instead; it never lets the mix pass silently.
"""

from __future__ import annotations

import pandas as pd

from modeling.store.open_loop_rows import OFFERED, closed_loop_rows, open_loop_mask, open_loop_rows
from modeling.workload import KIB, MIB

REPLAY_ENGINE = "psync"
MIX = ("write_ratio", "request_size", "randomness")
READ = (*MIX, "engine", "queue_depth", "numjobs", "latency_mean_us", OFFERED)
"""The measurement columns the engine notes read."""


def size_words(size: float) -> str:
    """A request size for the notes: ``1 MiB``, ``16 KiB``."""
    return f"{size / MIB:g} MiB" if size >= MIB else f"{size / KIB:g} KiB"


def kind_words(write_ratio: float) -> str:
    """A mix's direction for the notes: ``reads``, ``writes``, ``I/Os (40 % writes)``."""
    wr = write_ratio
    return "reads" if wr == 0 else "writes" if wr == 1 else f"I/Os ({wr * 100:.0f} % writes)"


def _us(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def _light(rows: pd.DataFrame) -> pd.DataFrame:
    """Per mix, its lightest measurement: QD1 one job closed loop, or the lowest-rate open-loop point."""
    keyed = rows.assign(**{f: rows[f].astype(float).round(3) for f in MIX})
    return keyed.sort_values("_load").groupby(list(MIX), as_index=False).first()


def _qd1(closed: pd.DataFrame, engine: str) -> pd.DataFrame:
    """The closed-loop points of ``engine`` at queue depth 1 and one job, as the lightest load."""
    one = (closed["engine"] == engine) & (closed["queue_depth"] == 1) & (closed.get("numjobs", 1) == 1)
    if not one.any():
        return closed.iloc[:0]
    return closed[one].assign(_load=0.0, _how="closed loop QD1")


def engine_comparison(frame: pd.DataFrame, other: str) -> str | None:
    """``"4 KiB QD1 reads 31 us io_uring vs 6.2 us psync (...)"`` for a mix measured both ways, or None."""
    closed = closed_loop_rows(frame)
    # the psync side first: a device swept with one other engine only (most) has none to compare
    psync_closed = _qd1(closed, REPLAY_ENGINE)
    parts = [psync_closed] if len(psync_closed) else []
    ol = open_loop_rows(frame)
    if len(ol):
        ol = ol[ol["engine"] == REPLAY_ENGINE] if "engine" in ol else ol
        rate = ol["offered_iops"].astype(float)
        parts.append(ol.assign(_load=rate, _how=[f"open loop at {r:.0f} IO/s" for r in rate]))
    if not parts:
        return None
    qd1 = _qd1(closed, other)
    if qd1.empty:
        return None
    psync = _light(pd.concat(parts, ignore_index=True))
    both = _light(qd1).merge(psync, on=list(MIX), suffixes=("", "_psync"))
    if both.empty:
        return None
    # the mix with the most requests a trace meets is unknown here: the smallest size, reads first
    row = both.sort_values(["request_size", "write_ratio"]).iloc[0]
    mix = f"{size_words(float(row['request_size']))} QD1 {kind_words(float(row['write_ratio']))}"
    return (f"{mix} {_us(row['latency_mean_us'])} us {other} vs "
            f"{_us(row['latency_mean_us_psync'])} us {REPLAY_ENGINE} ({row['_how_psync']})")


def engine_notes(frame: pd.DataFrame, device: str) -> list[str]:
    """Warnings when the device's closed-loop curve was not measured with the replay's engine."""
    if "engine" not in frame:
        return []
    # the engine column alone: a device's frame has dozens of columns to copy
    engines = pd.Series(frame["engine"].to_numpy()[~open_loop_mask(frame)])
    if engines.empty:
        return []
    counts = engines.fillna("unknown").astype(str).value_counts()
    others = [e for e in counts.index if e != REPLAY_ENGINE]
    if not others:
        return []
    share = ", ".join(f"{counts[e]} {e}" for e in counts.index)
    numbers = []
    if (frame["engine"] == REPLAY_ENGINE).any():  # else no psync point to compare with (most devices)
        frame = frame[[c for c in READ if c in frame]]
        numbers = [c for c in (engine_comparison(frame, e) for e in others) if c]
    measured = f": {'; '.join(numbers)}" if numbers else " (no psync point of the same mix to compare)"
    return [
        f"the closed-loop curve is not the replay's engine ({REPLAY_ENGINE}): its points are {share}"
        f"{measured}; light-load latency follows the curve's engine. Measure with psync: "
        f"ssdpredict sweep --device {device} --target TARGET --for-trace TRACE, then train"
    ]

