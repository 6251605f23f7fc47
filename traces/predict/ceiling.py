"""The replay path's own capacity, measured by ``sweep --for-trace``: the prediction's capacity cap.

A trace replay reaches the device through iolog lanes (:mod:`traces.replay.run`), and on a
CPU-bound device that path serves less than fio's closed-loop or open-loop jobs: on the
zram reference (2 cores) 1 MiB random reads were served 6.9-8.1k IO/s by the replay and
9.3-9.9k by fio, so windows offered 80-95 % of the replay's capacity fell behind while the
prediction, whose capacity was fio's, said "not saturated" (saturation agreement 76 %).

``sweep --for-trace`` replays, per mix its traces come near the capacity of, a Poisson trace
offered 3x that capacity (:func:`traces.replay.capacity.replay_capacity_point`) and stores
what was served as an open-loop row (``open_loop_method`` ``replay``) beside the mix's fio
points.  :func:`replay_ceilings` turns those rows into each mix's share of its closed-loop
capacity; a window takes the share of its nearest measured open-loop mix (1 where that mix
has no replay row), and the open-loop method moves its curve's capacity there
(:func:`traces.predict.openloop.cap_curves`).

The share is of the capacity the window's curve has, the model's at that mix (``capacity_of``),
not of the highest IO/s the sweep stored there: a window of the measured mix then gets the
measured capacity itself.  Over the stored maximum, the share under-called the capacity
wherever the model's curve peaks below that one noisy point: on the throttled reference
(a 2,000 IO/s bucket), 2026-11-29, the replay path served 2,036 IO/s of 4 KiB reads, the
model's curve peaked 6 % under the sweep's highest point, and windows offered 1,938-1,984
IO/s, served in full, were predicted saturated at 1,914.

The share is not clipped at 1: the replay path can serve more than the closed-loop sweep
reached (the closed loop drifts too, and it is measured once): on zram, 2026-11-29, a probe of
1 MiB reads beside a validation served 8,499 IO/s where the sweep's closed loop reached 7,891,
and a share clipped at 1 called windows at 8,000 IO/s saturated that the replay served.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from modeling.store.open_loop_rows import closed_loop_rows, replayed_mask
from traces.predict.engines import kind_words, size_words
from traces.predict.utilisation import KEY, mix_groups, mix_keys, nearest_mix


@dataclass(frozen=True)
class ReplayCeilings:
    """Per measured open-loop mix: the share of its closed-loop capacity the replay path serves."""

    keys: np.ndarray  # (g, 3) mix_keys of the measured mixes
    shares: np.ndarray  # (g,) > 0, over 1 where the replay served more; 1 without a replay measurement
    served: np.ndarray  # (g,) the replay's served IO/s (NaN without one)
    capacity: np.ndarray  # (g,) the closed-loop capacity
    # (g,) the replay's served IO/s as sweep --for-trace measured it, where ``served`` was
    # replaced by a probe taken beside the validation (:meth:`probed`); None: all from the sweep
    swept: np.ndarray | None = None

    def probed(self, served: dict[int, float]) -> ReplayCeilings:
        """These ceilings with mix ``i``'s served rate replaced by ``served[i]`` (a probe of the replay
        path taken now, :mod:`traces.validate.capacity_probe`); the sweep's own kept as ``swept``."""
        got = self.served.copy()
        for i, iops in served.items():
            got[i] = iops
        cap = self.capacity
        return ReplayCeilings(self.keys, _shares(got, cap), got, cap,
                              self.served if self.swept is None else self.swept)

    def for_windows(self, windows: pd.DataFrame) -> np.ndarray:
        """Each window's ceiling: its nearest measured mix's share."""
        return self.shares[nearest_mix(windows, self.keys)]  # type: ignore[no-any-return]

    def notes(self) -> list[str]:
        """One line per mix whose capacity moved (capped or raised), with the replay's and the
        closed loop's numbers."""
        out = []
        swept = self.served if self.swept is None else self.swept
        for (wr, log_size, _), share, served, cap, before in zip(
            self.keys, self.shares, self.served, self.capacity, swept, strict=True
        ):
            if share != 1:
                mix = f"{size_words(2.0**log_size)} {kind_words(wr)}"
                how = ("measured by sweep --for-trace" if served == before or not np.isfinite(before)
                       else f"probed by trace validate just now (sweep --for-trace measured {before:,.0f})")
                moved = "capped at" if share < 1 else "raised to"
                out.append(
                    f"capacity {moved} {share:.0%} of the closed-loop capacity for {mix}: "
                    f"the replay path's own, {how} ({served:,.0f} of {cap:,.0f} IO/s)"
                )
        return out


def _shares(served: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Each mix's share: the replay's served rate over the closed-loop capacity (not clipped at 1;
    at least 1e-3), 1 where either is missing."""
    ok = np.isfinite(served) & np.isfinite(capacity) & (capacity > 0)
    return np.where(ok, np.maximum(served / np.where(ok, capacity, 1.0), 1e-3), 1.0)


def replay_ceilings(open_loop: pd.DataFrame, frame: pd.DataFrame,
                    capacity_of: Callable[[pd.DataFrame], np.ndarray] | None = None) -> ReplayCeilings | None:
    """The replay ceilings of a device: ``open_loop`` its newest open-loop rows, ``frame`` all its
    measurements; None without a replay capacity row.  The closed-loop capacity of each replayed
    mix is ``capacity_of`` its replay row (the model's curve's, see the module docstring), else
    the highest IO/s ``frame`` holds at that mix."""
    replayed = replayed_mask(open_loop)
    closed = closed_loop_rows(frame)
    if not replayed.any() or closed.empty:
        return None

    def by_mix(rows: pd.DataFrame, how: str) -> pd.Series:
        return rows.groupby(mix_groups(rows))["iops"].agg(how)

    mixes = by_mix(open_loop, "size").index
    capacity = by_mix(closed, "max").reindex(mixes)
    served = by_mix(open_loop[replayed], "mean").reindex(mixes)
    if capacity_of is not None:
        first = open_loop[replayed].groupby(mix_groups(open_loop[replayed])).head(1)
        modelled = pd.Series(np.asarray(capacity_of(first), np.float64),
                             index=pd.MultiIndex.from_frame(pd.concat(mix_groups(first), axis=1)))
        capacity = modelled.reindex(mixes)
    cap = capacity.to_numpy(np.float64)
    got = served.to_numpy(np.float64)
    shares = _shares(got, cap)
    keys = mix_keys(pd.DataFrame(list(mixes), columns=list(KEY)))
    return ReplayCeilings(keys, shares, got, cap)
