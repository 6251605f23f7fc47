"""Which measured rows are open-loop points: one rule for training, export, and traces.

An open-loop point (:mod:`collectors.sweep.openloop`: fio ``rate_iops`` with Poisson arrivals)
stores the rate it offered in ``offered_iops``; a closed-loop point has none (NaN, or no
such column).  Its IOPS is the offered rate, not the device's capacity, so training and
export leave it out, and the trace predictor learns its light-load correction from it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

OFFERED = "offered_iops"
METHOD = "open_loop_method"
REPLAYED = "replay"
"""The :data:`METHOD` of an open-loop row measured through the trace replay path (its capacity,
:mod:`traces.replay.capacity`) instead of by fio's Poisson jobs."""


def open_loop_mask(frame: pd.DataFrame) -> np.ndarray:
    """Per row: whether it is an open-loop point (a finite ``offered_iops``)."""
    if OFFERED not in frame.columns:
        return np.zeros(len(frame), dtype=bool)
    return np.isfinite(pd.to_numeric(frame[OFFERED], errors="coerce").to_numpy(np.float64))


def replayed_mask(frame: pd.DataFrame) -> np.ndarray:
    """Per row: whether it is a replay-path capacity point (:data:`REPLAYED`)."""
    if METHOD not in frame.columns:
        return np.zeros(len(frame), dtype=bool)
    return (frame[METHOD] == REPLAYED).to_numpy(bool)


def fio_open_loop_mask(frame: pd.DataFrame) -> np.ndarray:
    """Per row: whether it is an open-loop point fio measured (not a replay-path capacity point)."""
    return open_loop_mask(frame) & ~replayed_mask(frame)


def fio_open_loop_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The open-loop points fio measured (:func:`fio_open_loop_mask`), renumbered from 0."""
    return frame.loc[fio_open_loop_mask(frame)].reset_index(drop=True)


def closed_loop_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of a measurement frame that are closed-loop points (no offered rate)."""
    return frame.loc[~open_loop_mask(frame)]


def open_loop_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows that are open-loop points, renumbered from 0."""
    return frame.loc[open_loop_mask(frame)].reset_index(drop=True)


def swept_mixes(frame: pd.DataFrame) -> tuple[list[float], list[int]]:
    """The write ratios (to 1e-6) and request sizes a device's closed-loop points were measured at."""
    if frame.empty or "write_ratio" not in frame or "request_size" not in frame:
        return [], []
    closed = closed_loop_rows(frame)
    return (sorted({round(float(w), 6) for w in closed["write_ratio"].dropna()}),
            sorted({int(b) for b in closed["request_size"].dropna()}))
