"""Keeping a replay's lanes on the trace's clock: sleep-slip compensation and the lead-out.

fio 3.33 replays an iolog relative to the previous issue: before each entry it sleeps the
entry's gap minus the time since the previous issue (``iolog_delay``), and it never makes
up that sleep's overshoot (it carries an overshoot forward only when it exceeds the whole
gap, which almost never happens).  Every entry that sleeps therefore issues a little late,
and the lateness adds up over the lane's life: its *slip*.  fio has no option that
schedules an iolog against absolute time (``replay_no_stall`` drops the timing,
``replay_time_scale`` scales every gap, the v2 ``wait`` action counts whole milliseconds).

Measured on zram (2 cores, other work running, fio at real-time priority, 16 lanes):

* tpcc (51,000 IO/s, 7,000 requests): lanes slipped 10-13 us per entry, the replay ran
  4-7 % slow in every 50 ms window (the shorter the gaps, the more it shows: a lane's
  drift is its slip times its entries a second).  More lanes made it worse (32 lanes: 16-18 us an entry,
  -8 to -14 %; 64 lanes: 28-42 us, -20 %) and fewer lanes did not help (4-8 lanes: 5-10 us
  an entry, but each lane has more entries: -7 to -8 %), so the lane count stays.
* Shortening every positive gap of the written iolog by a constant (10 us) brought tpcc's
  windows within 0.5 % (residual slip under 1 us an entry); 20 us overshot (+2 %).
  Calibrated on 64 requests a lane the slip came out 7.5-8.7 us (worst window 0.6-2.0 %),
  on 128 a lane 8.3-10.4 us (worst window 0.2-0.6 %, four runs).
* The slip is not a machine constant: 2-4 us an entry on the blktrace sample (bursts of
  1 ms gaps per lane), 17 us on wsrch (40 ms gaps per lane).  So it is measured on the
  trace itself: a calibration replay of the trace's first requests
  (:func:`calibration_prefix`: at most :data:`CALIBRATION_PER_LANE` a lane, within
  :data:`CALIBRATION_S` of replay time and half the trace) without compensation, whose per-lane lateness
  slope (:func:`lane_slip`) is then taken off every positive gap of the real replay
  (:func:`shorten_gaps`).  A trace too sparse for that (under
  :data:`MIN_CALIBRATION_PER_LANE` a lane in the first seconds) is not compensated: at
  under 8 entries a second per lane even 50 us an entry is under 0.04 % of drift.
* The end of a replay: a lane whose log ends exits (writes its latency log, is reaped)
  while the others still replay, on the same two CPUs at the same real-time priority.
  On the blktrace sample the last burst's entries were 4-8 ms late (last window -8.6 %),
  on tpcc the last 50 ms window ran 5 % slow.  So every lane's log ends with a read at
  the same time, :data:`LEAD_OUT_US` after the trace's last arrival (left out of the
  results, like the lead-in): no lane exits while another still has trace requests.
  That alone brought the blktrace sample's windows within 0.2 %.
* Near saturation of a CPU-bound device (zram: the I/O is CPU work done by the lane that
  issues it) the calibrated slip also holds the lanes' wait for a CPU before they can
  issue: 1 MiB reads, 16 lanes, capacity about 12,000 IO/s, load average 8: 25 us an
  entry at 50 % of it, 72-85 us at 80 %, 114-163 us at 95 %.  Under fio's relative clock
  that wait delays all the lane's later requests too, which no open-loop arrival process
  does: uncompensated, Poisson and H2 traces at 80 % fell 4-6 % behind (two of four
  windows measured saturated), at 95 % 7-10 %; compensated, the 80 % windows stayed within
  2.3 % (none saturated) and the 95 % ones mostly within 2.5 %, with one or two 12-16 %
  behind, where lanes were busy.  The wait itself is in neither measured latency (it
  comes before fio's issue timestamp): window latency stayed at the I/O time, 160-175 us,
  outside those windows.
"""

from __future__ import annotations

import numpy as np

from traces.chunks import TraceChunk

LEAD_OUT_US = 50_000
CALIBRATION_PER_LANE = 128
MIN_CALIBRATION_PER_LANE = 16
CALIBRATION_S = 2.0
MAX_SLIP_US = 200.0


def shorten_gaps(t_us: np.ndarray, slip_us: float, start_us: int | None = None) -> np.ndarray:
    """Timestamps (us, non-decreasing) whose every positive gap is ``slip_us`` shorter, never below zero.

    ``start_us``: the time of an entry written before the first (the lead-in); the gap
    from it to the first timestamp is shortened too.  Without it the first timestamp stays.
    Gaps are shortened before rounding to whole microseconds, so rounding does not add up.
    """
    t = np.asarray(t_us, np.int64)
    if not len(t) or not slip_us > 0:
        return t.copy()
    origin = int(t[0]) if start_us is None else int(start_us)
    gaps = np.diff(t, prepend=origin).astype(np.float64)
    short = np.where(gaps > 0, np.maximum(gaps - slip_us, 0.0), gaps)
    return origin + np.round(np.cumsum(short)).astype(np.int64)


def lane_slip(issue_s: np.ndarray, trace_t: np.ndarray, lane: np.ndarray, speed: float = 1.0,
              min_entries: int = MIN_CALIBRATION_PER_LANE) -> float:
    """How much later each sleeping entry issues than the one before it (us): the lanes' median slope.

    Per lane: the lateness (issue time minus trace time, replay seconds) regressed on the
    number of entries so far with a positive gap (the ones fio sleeps before; the lane's
    first entry sleeps after the lead-in).  A lane's clock offset is the intercept, so
    lanes that started a few milliseconds apart do not matter.  Requests must be in issue
    order within each lane.  NaN when no lane has ``min_entries`` entries with varying counts.
    """
    slopes = []
    for k in np.unique(lane):
        idx = np.flatnonzero(lane == k)
        if len(idx) < min_entries:
            continue
        t = trace_t[idx] / speed
        late = issue_s[idx] - t
        count = np.cumsum(np.diff(t, prepend=-np.inf) > 0).astype(np.float64)
        cc = count - count.mean()
        var = float(cc @ cc)
        if var > 0:
            slopes.append(float(cc @ (late - late.mean())) / var)
    return float(np.median(slopes)) * 1e6 if slopes else float("nan")


def calibration_prefix(c: TraceChunk, lanes: int, speed: float = 1.0) -> int:
    """How many of the trace's first requests the calibration replays (0: too sparse to need one)."""
    within = int(np.searchsorted((c.time_s - c.time_s[0]) / speed, CALIBRATION_S, side="right"))
    n = min(len(c) // 2, within, CALIBRATION_PER_LANE * lanes)
    return n if n >= MIN_CALIBRATION_PER_LANE * lanes else 0
