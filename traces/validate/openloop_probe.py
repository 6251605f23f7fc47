"""``trace validate``'s light open-loop probe: the trace's own light rates measured again right before
the replay, and the prediction re-anchored on them.

``sweep --for-trace`` measures open-loop points (fio, Poisson arrivals on the replay's psync lanes,
:func:`collectors.sweep.openloop.measure_open_point`) at the traces' own offered rates, and the
prediction's light load passes through them (:mod:`traces.predict.utilisation`).  Minutes later,
when ``trace validate`` replays the trace, the device is not where it was: on the throttled
reference (zram under a 2,000 IO/s token bucket, 2 shared CPUs) the same fio point and the replay
agree within +0.2..+1.2 us measured back to back, but a point taken minutes before a replay missed
it by 8.6-18.4 % on average, one taken right before by 6.5-11.9 % (docs/benchmarks.md, "The user's
trace flow", 2026-11-29 late morning); the same code scored one trace 8.3 % and 24.8 % an hour apart.

So, with a replay target, right before the replay (after the device check) the validation measures
the trace's light rates again, the way the sweep measured its points, and predicts the windows a
second time with those fresh points in place of the sweep's stored ones at the same mix and
rates.  Both predictions are compared with the *same* replay (the report gives the re-anchored one
as its errors and the sweep's beside it, ``open_loop_probe.as_swept``).  Nothing is stored: a later
``trace predict`` reads the sweep's points only.

What is measured, per trace:

* **Mixes.** The stored fio open-loop points' mixes (as the sweep's plan chose them) that the
  trace's light windows are nearest to, in order of the light requests they carry; a mix under
  :data:`MIN_SHARE` of them is left out, and so is any mix past :data:`MAX_POINTS` points in all.
* **Rates.** A window is light when it is counted (not too short), not saturated and at most
  :data:`LIGHT_MAX` of its capacity (the as-swept prediction's utilisation, capped where the replay
  path's capacity was probed): near a token bucket's wall fio's lanes, which offer 1-4 % more than
  asked, land past it (asked 1,950 of 2,000 IO/s, served 2,004 at 1.2 ms mean).  Per mix, the median
  and the 95th percentile of its light windows' offered rates (the sweep's quantiles,
  :data:`collectors.plans.for_trace.OWN_RATE_QUANTILES`), one point when they are within
  :data:`MERGE` of each other.
* **Anchors replaced.** The stored points of that mix whose offered rate lies within :data:`BAND`
  of the probed rates' range are dropped and the fresh points put in their place; the mix's
  other points (lighter, heavier) stay as swept.
* **Two measurements, one anchor.** Where the sweep has a point within :data:`BAND` of a probed
  rate and the two means are within a factor :data:`AGREE` of each other, the fresh point's
  latencies (mean, p99, every stored percentile) are the geometric means of the probe's and
  that point's: both are one fio point of the same mix and rate, and on this machine one such
  point is as noisy as the drift the probe is there to catch.  On 36 user-flow validations of 18 traces
  (2026-11-29, two rounds, docs/benchmarks.md) the probe moved the sweep's anchor by -22..+42 %
  and the replay then sided with either: the probe alone put 22 traces' mean within 15 %,
  the sweep's alone 19, the mean of the two predictions 25 (average MRE 15.5 %, 19.6 % and
  15.1 %).  A third round (2026-11-29 evening) had the largest change yet, +64 % (p99 5.3x), on
  zram drifted +48 % since its sweep (the device check's figure): the replay measured +43 %, between
  the two, where the probe alone (then the rule past 1.5x) was off by 262 % at the p99.  Where the
  sweep has no point near the rate (a rate it did not measure), or the two differ by more than
  :data:`AGREE` (beyond any change seen in these 54 validations: not the same device any more), the
  probe is the anchor as measured.

Cost: one fio point each, as the sweep runs it: its warm-up (1 s), ``max(1 s, 1,500 requests)`` and
fio's start: on the throttled reference 2.4-2.9 s at 1,000-1,600 IO/s and 5.2 s at 400 IO/s
(2026-11-29); one or two points a trace (at most :data:`MAX_POINTS`).  The report gives the
seconds it took.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from collectors.fio.jobs import JobSettings
from collectors.plans.for_trace import OWN_RATE_QUANTILES
from collectors.sweep.openloop import MIN_REQUESTS, measure_open_point, realtime_prefix
from collectors.sweep.steady import WARMUP_MS
from modeling.store.catalog import Catalog
from modeling.store.open_loop_rows import OFFERED, fio_open_loop_mask, fio_open_loop_rows
from modeling.workload import Workload
from traces.predict.engines import kind_words, size_words
from traces.predict.utilisation import mix_keys, nearest_key

LIGHT_MAX = 0.85
MERGE = 0.20
BAND = 0.20
MAX_POINTS = 3
MIN_SHARE = 0.10
RUNTIME_MS = 1000  # the sweep's default runtime (a point runs longer for MIN_REQUESTS requests)
SOURCE = "validate-probe"
"""The ``anchor_source`` of a fresh point (the sweep's stored ones have none): never stored."""
AGREE = 2.0
"""Probe and sweep within this factor of each other (means) are averaged; beyond it the probe alone."""
LATENCIES = ("latency_mean_us", "latency_p99_us")
METRICS = (OFFERED, *LATENCIES)


@dataclass
class AnchorPoint:
    """One open-loop point measured right before the replay, beside the sweep's nearest at its mix."""

    mix: str
    rate: int  # asked
    probed: dict[str, float]  # offered_iops, latency_mean_us, latency_p99_us
    swept: dict[str, float] | None  # the replaced stored point nearest its rate (within BAND of it)
    replaced: int = 0
    seconds: float = 0.0

    @property
    def change(self) -> float | None:
        """probed mean / swept mean - 1 (None without a stored point to compare)."""
        if self.swept is None:
            return None
        return self.probed["latency_mean_us"] / self.swept["latency_mean_us"] - 1

    @property
    def note(self) -> str:
        """One line: the mix, the rate, the sweep's anchor and the probe's, and the change."""
        p = self.probed
        now = f"{p['latency_mean_us']:.1f} us mean, p99 {p['latency_p99_us']:.1f} at {p[OFFERED]:,.0f} IO/s"
        if self.swept is None:
            return (f"open-loop anchor for {self.mix} at {self.rate:,} IO/s: probed now {now} "
                    f"({self.seconds:.1f} s); the sweep had no point within {BAND:.0%} of that rate")
        s, a = self.swept, self.anchor
        was = f"{s['latency_mean_us']:.1f} us mean, p99 {s['latency_p99_us']:.1f} at {s[OFFERED]:,.0f} IO/s"
        return (f"open-loop anchor for {self.mix} at {self.rate:,} IO/s: sweep --for-trace measured {was}; "
                f"probed now {now} ({self.change:+.0%}, {self.seconds:.1f} s); the re-anchored prediction "
                f"{self._uses(a)} in place of {self.replaced} stored point(s) near it")

    def _uses(self, a: dict[str, float]) -> str:
        if self.swept is None or not agree(self.probed, self.swept):
            return f"uses the probe alone (more than {AGREE:g}x from the sweep's: the device changed)"
        mean, p99 = a["latency_mean_us"], a["latency_p99_us"]
        return f"uses their geometric mean ({mean:.1f} us mean, p99 {p99:.1f})"

    @property
    def anchor(self) -> dict[str, float]:
        """What the re-anchored prediction uses: the probe, or its geometric mean with the sweep's point."""
        return self.probed if self.swept is None else blended(self.probed, self.swept)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with the note."""
        return {"mix": self.mix, "rate_iops": self.rate, "swept": self.swept, "probed": self.probed,
                "anchor": self.anchor, "change_mean": self.change, "replaced": self.replaced,
                "seconds": self.seconds, "note": self.note}


def agree(probed: dict[str, Any], swept: dict[str, Any]) -> bool:
    """Whether the probe's and the sweep's mean latency are within :data:`AGREE` of each other."""
    pm, sm = _number(probed["latency_mean_us"]), _number(swept["latency_mean_us"])
    return pm > 0 and sm > 0 and abs(math.log(pm / sm)) <= math.log(AGREE)


def blended(probed: dict[str, Any], swept: dict[str, Any]) -> dict[str, Any]:
    """The probe's row with every latency both rows hold (mean, p99, the percentiles) the geometric
    mean of the two, where they :func:`agree`; else the probe's row as it is."""
    if not agree(probed, swept):
        return probed
    both = {}
    for m, v in probed.items():
        if m.startswith("latency_") and m.endswith("_us") and m in swept:
            a, b = _number(v), _number(swept[m])
            if a > 0 and b > 0:  # NaN is neither
                both[m] = math.sqrt(a * b)
    return {**probed, **both}


def _number(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


@dataclass
class Planned:
    """One point to probe: its mix (as :func:`mix_keys`, rounded), the workload of the mix's stored
    points (the replay's lanes), the rate, and the band of stored rates it replaces."""

    key: tuple[float, float, float]
    workload: Workload
    rate: int
    band: tuple[float, float]


def _keys(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The distinct mixes of ``rows`` (as :func:`mix_keys`) and each row's index into them."""
    k = np.round(mix_keys(rows), 3)
    keys, inverse = np.unique(k, axis=0, return_inverse=True)
    return keys, inverse.reshape(-1)


def plan_probe(open_loop: pd.DataFrame, table: pd.DataFrame, *, light_max: float = LIGHT_MAX,
               max_points: int = MAX_POINTS) -> list[Planned]:
    """The points to measure for a trace predicted as ``table`` (the as-swept window table) on a
    device whose newest open-loop rows are ``open_loop`` (see the module docstring)."""
    rows = fio_open_loop_rows(open_loop)
    if rows.empty or table.empty:
        return []
    keys, row_mix = _keys(rows)
    light = (~table["too_short"].to_numpy(bool) & ~table["saturated"].to_numpy(bool)
             & (table["utilisation"].to_numpy(np.float64) <= light_max)
             & (table["offered_iops"].to_numpy(np.float64) > 0))
    win = table[light]
    if win.empty:
        return []
    near = nearest_key(mix_keys(win), keys)
    requests = win["requests"].to_numpy(np.float64)
    rate = win["offered_iops"].to_numpy(np.float64)
    total = requests.sum()
    order = sorted(np.unique(near), key=lambda g: -requests[near == g].sum())
    out: list[Planned] = []
    for g in order:
        if requests[near == g].sum() < MIN_SHARE * total:
            continue
        mine = rate[near == g]
        qs = [float(np.quantile(mine, q)) for q in OWN_RATE_QUANTILES]
        rates = [qs[0]] if qs[-1] <= qs[0] * (1 + MERGE) else qs
        if out and len(out) + len(rates) > max_points:
            break
        stored = rows[row_mix == g]
        workload = Workload.from_row(stored.iloc[-1].to_dict())
        band = (min(rates) / (1 + BAND), max(rates) * (1 + BAND))
        key = (float(keys[g][0]), float(keys[g][1]), float(keys[g][2]))
        out += [Planned(key, workload, max(int(round(r)), 1), band) for r in rates[:max_points]]
    return out


def reanchor(open_loop: pd.DataFrame, planned: list[Planned], fresh: list[dict[str, Any]]
             ) -> tuple[pd.DataFrame, list[tuple[int, dict[str, float] | None]]]:
    """``open_loop`` with each planned mix's stored fio points in its band dropped and the fresh rows
    added (blended with the stored point nearest their rate, :func:`blended`, where one is within
    :data:`BAND` of it); per planned point, how many stored points were within :data:`BAND` of its own
    rate and the one nearest its rate (None: none)."""
    ol = open_loop.reset_index(drop=True)
    is_fio = np.flatnonzero(fio_open_loop_mask(ol))
    rows = ol.iloc[is_fio].reset_index(drop=True)
    row_keys = np.round(mix_keys(rows), 3) if len(rows) else np.empty((0, 3))
    stored_rate = rows[OFFERED].to_numpy(np.float64) if len(rows) else np.empty(0)
    drop = np.zeros(len(ol), dtype=bool)
    said: list[tuple[int, dict[str, float] | None]] = []
    nearest: list[dict[str, Any] | None] = []  # the whole stored row, for blended()
    for p in planned:
        mine = np.all(np.isclose(row_keys, np.array(p.key)), axis=1)
        inband = mine & (stored_rate >= p.band[0]) & (stored_rate <= p.band[1])
        drop[is_fio[inband]] = True
        # compared with the sweep's points near its own rate (a mix's second point is not compared with
        # a point the band takes in only because of the first)
        near = inband & (stored_rate >= p.rate / (1 + BAND)) & (stored_rate <= p.rate * (1 + BAND))
        idx = np.flatnonzero(near)
        if idx.size:
            j = idx[np.argmin(np.abs(np.log(stored_rate[idx] / p.rate)))]
            said.append((int(near.sum()), {m: float(rows[m].iloc[j]) for m in METRICS}))
            nearest.append(rows.iloc[j].to_dict())
        else:
            said.append((0, None))
            nearest.append(None)
    added = pd.DataFrame([{**(r if row is None else blended(r, row)), "anchor_source": SOURCE}
                          for r, row in zip(fresh, nearest, strict=True)])
    kept = ol[~drop]
    return pd.concat([kept, added], ignore_index=True) if len(added) else kept, said


@dataclass
class OpenLoopProber:
    """Measures a trace's light open-loop points on ``target`` right before its replay and re-anchors
    the device's open-loop rows on them; what it measured is kept in ``found``."""

    target: str
    destroy_data: bool
    catalog: Catalog | None = None
    fio: str | None = None
    runtime_ms: int = RUNTIME_MS
    min_requests: int = MIN_REQUESTS
    warmup_ms: int = WARMUP_MS
    found: list[AnchorPoint] = field(default_factory=list)
    seconds: float = 0.0
    _planned: list[Planned] = field(default_factory=list)
    _fresh: list[dict[str, Any]] = field(default_factory=list)

    def measure(self, open_loop: pd.DataFrame, table: pd.DataFrame) -> bool:
        """Measure the points :func:`plan_probe` chooses; whether there were any."""
        from collectors.fio.runner import run_fio
        from traces.replay.iolog import DEFAULT_SIZE, prepare_target

        planned = plan_probe(open_loop, table)
        if not planned:
            return False
        t0 = time.monotonic()
        span, _ = prepare_target(self.target, self.destroy_data, DEFAULT_SIZE, self.catalog)
        job = JobSettings(target=self.target, engine="psync", size=min(span, DEFAULT_SIZE),
                          runtime_ms=self.runtime_ms)
        runner = partial(run_fio, binary=self.fio, prefix=realtime_prefix()[0])
        for p in planned:
            t = time.monotonic()
            row, _ = measure_open_point(p.workload, p.rate, job, runner, self.min_requests, self.warmup_ms)
            self._fresh.append(row)
            wr, log_size, _ = p.key
            mix = f"{size_words(2.0**log_size)} {kind_words(wr)}"
            probed = {m: float(row[m]) for m in METRICS}
            self.found.append(AnchorPoint(mix, p.rate, probed, None, 0, time.monotonic() - t))
        self._planned = planned
        self.seconds = time.monotonic() - t0
        return True

    def __call__(self, open_loop: pd.DataFrame) -> pd.DataFrame:
        """``open_loop`` (a device's newest open-loop rows) re-anchored on the fresh points."""
        out, said = reanchor(open_loop, self._planned, self._fresh)
        for point, (n, swept) in zip(self.found, said, strict=True):
            point.replaced, point.swept = n, swept
        return out

    def to_dict(self) -> dict[str, Any]:
        """The points and the probe's cost in seconds."""
        return {"points": [p.to_dict() for p in self.found], "seconds": self.seconds}
