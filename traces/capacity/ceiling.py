"""The open-loop path's own throughput, from open-loop points offered beyond what it serves.

A capacity answer is an offered rate, so the throughput it runs out of is what an open-loop
stream gets served, not the closed-loop sweep's best.  They differ on a CPU-bound device:
on the zram reference (2 cores) fio's 16 rate-limited psync lanes spend CPU on their timers,
and 1 MiB random reads offered 1.0x and 1.25x the closed-loop capacity (10,223 IO/s) were
served 90 % and 89 % of it; below that every open-loop point is served in full and its
latency is flat, so the capacity search answered "meets at saturation" at 10,223 IO/s, a
rate the open-loop path never serves.

An open-loop point served under :data:`~traces.predict.utilisation.MIN_SERVED` of its offered
rate measured that throughput (the correction leaves such points out).  Per measured mix, the
*ceiling* is the highest rate the open-loop path was measured to serve, as a share of the most
IO/s its closed-loop points reached (the share of the model's capacity an open-loop stream
gets); a mix asked about takes the share of the nearest measured mix (the correction's distance):

* with a saturated point, the most IO/s any of its open-loop points was served, saturated or
  not: an overload point that collapsed below a faster point served in full does not pull the
  ceiling under that point (a loop device over tmpfs queues its requests for one worker, and
  overloaded it serves less: 40 % writes offered 1.2x their 37.6k IO/s closed-loop capacity
  were served 28.9k, 2026-11-29), and it can be over the closed-loop capacity (on zram,
  2026-11-29, 256 KiB writes offered 1.2x theirs, 3,071 IO/s, were served 3,318);
* without one, the closed-loop capacity, or the fastest rate served in full where that is more
  (on zram, 2026-11-29, 256 KiB 40 % writes offered 1.2x their 6,304 IO/s closed-loop capacity
  were served in full, 7,485).

A share over 1 extends the curve beyond the closed-loop capacity
(:func:`traces.predict.openloop.cap_curves`).  A device without open-loop points keeps the
model's capacity: a sweep with an open-loop fraction above 1 (``sweep --for-capacity``, or
``--open-loop ...,1.2``) measures them.

The fastest point served in full bounds the answer too (the *limit*): above it nothing was
measured, and the latency there is the model's guess at a knee it never saw.  On the throttled
reference (a token bucket at 2,000 IO/s) 4 KiB reads measured a p99 of 16 us at 90 % of the
rate, 1.8 ms at 95 % and 65 ms at 100 %, where the method, fitted on points up to 90 %, predicted
19 us up to saturation.  So the search stops at the limit (outcome ``measured``), and a sweep
with points nearer saturation moves it up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from modeling.store.open_loop_rows import OFFERED, closed_loop_rows
from traces.predict.utilisation import KEY, MIN_SERVED, mix_groups, mix_keys, nearest_mix
from traces.predict.windows import newest_open_loop

@dataclass(frozen=True)
class OpenLoopCeilings:
    """Per measured mix, as shares of its closed-loop capacity: the open-loop path's throughput
    (``shares``: the highest rate it was measured to serve, see the module docstring) and the
    fastest offered rate served in full (``limits``)."""

    keys: np.ndarray  # (g, 3): write ratio, log2 size, randomness
    shares: np.ndarray  # (g,) > 0; over 1 where the open-loop path served more than closed loop
    limits: np.ndarray  # (g,) > 0

    def nearest(self, mixes: pd.DataFrame) -> np.ndarray:
        """Each mix's nearest measured mix."""
        return nearest_mix(mixes, self.keys)

    def for_mixes(self, mixes: pd.DataFrame) -> np.ndarray:
        """Each mix's ceiling: the nearest measured mix's."""
        return self.shares[self.nearest(mixes)]  # type: ignore[no-any-return]

    def limits_for(self, mixes: pd.DataFrame) -> np.ndarray:
        """Each mix's limit as a share of its capacity once capped at (or raised to) the ceiling
        (at most 1)."""
        g = self.nearest(mixes)
        return np.minimum(self.limits[g] / self.shares[g], 1.0)  # type: ignore[no-any-return]

    def notes(self) -> list[str]:
        """What the answers rest on, one line each."""
        def span(x: np.ndarray) -> str:
            lo, hi = float(x.min()), float(x.max())
            return f"{lo:.0%}" if round(lo, 2) == round(hi, 2) else f"{lo:.0%}-{hi:.0%}"

        out = []
        capped, raised = self.shares < 1, self.shares > 1
        if capped.any():
            out.append(f"open-loop points offered beyond saturation were served {span(self.shares[capped])}"
                       " of the closed-loop capacity: an offered rate's throughput is capped there")
        if raised.any():
            out.append(f"open-loop points were served up to {span(self.shares[raised])} of the closed-loop"
                       " capacity: an offered rate's throughput reaches that far")
        out.append(f"answers stop at the fastest open-loop point served in full ({span(self.limits)} of the"
                   " closed-loop capacity): above it nothing was measured")
        return out


def open_loop_ceilings(frame: pd.DataFrame) -> OpenLoopCeilings | None:
    """The ceilings and limits of a device's measurements (its newest open-loop points); None
    without an open-loop point served in full."""
    ol = newest_open_loop(frame)
    closed = closed_loop_rows(frame)
    if ol.empty or "iops" not in ol or closed.empty or "iops" not in closed:
        return None
    full = ol["iops"] >= MIN_SERVED * ol[OFFERED]

    def by_mix(rows: pd.DataFrame, column: str) -> pd.Series:
        return rows.groupby(mix_groups(rows))[column].max()

    capacity = by_mix(closed, "iops")
    fastest = by_mix(ol[full], OFFERED)
    both = fastest.index.intersection(capacity.index)
    if both.empty:
        return None
    cap = capacity.loc[both].to_numpy(np.float64)
    saturated = by_mix(ol[~full], "iops").reindex(both).to_numpy(np.float64)  # NaN: none
    in_full = by_mix(ol[full], "iops").loc[both].to_numpy(np.float64)
    # the highest rate served: a saturated mix's best point (saturated or not), else at least C
    ceiling = np.where(np.isfinite(saturated), np.fmax(saturated, in_full), np.maximum(cap, in_full))
    shares = np.maximum(ceiling / cap, 1e-3)
    limits = np.minimum(fastest.loc[both].to_numpy(np.float64) / cap, shares)
    keys = pd.DataFrame(list(both), columns=list(KEY))
    return OpenLoopCeilings(mix_keys(keys), shares, limits)
