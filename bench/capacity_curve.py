"""Latency against offered load on the throttled reference, measured point by point with fio.

The 1.0x check of ``bench/capacity.py --validate`` (the measured statistic within 25 % of the
target when fio offers exactly the predicted capacity) is only meaningful where the curve
rises gradually: if the latency goes from a fraction of the target to many times it within a
few percent of the rate, the check measures on which side of a cliff 1.0x lands.  This
bench measures how steep the curve is on a token bucket at a given cap, so that the
validation's targets can be put where it rises (and it says where there is no such place).

Per cap (``--iops``, the block throttle's reads and writes a second over a fresh zram
reference) and mix, fio open loop with Poisson arrivals (the open-loop sweep's 16 psync lanes
at its real-time priority, as the validation) at each fraction of the binding direction's
cap, then ``--repeats`` more runs of the ``--floor`` fraction for the noise floor.  Printed
per point: the offered and served IO/s, the mean and p99, and the local elasticity
``d ln(latency) / d ln(rate)`` between neighbouring points: a 1.0x check within 25 % needs the
answer's rate error under about ``0.22 / elasticity`` (ln 1.25).

    /work/bin/quiet .venv/bin/python bench/capacity_curve.py --iops 200,500
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.trace_reference import fio_wrapper  # noqa: E402
from collectors.devices.reference import create_reference, destroy_reference  # noqa: E402
from collectors.fio.jobs import JobSettings  # noqa: E402
from collectors.fio.runner import run_fio  # noqa: E402
from collectors.sweep.openloop import LANES, measure_open_point, offered_rate, realtime_prefix  # noqa: E402
from modeling.store import DataDir  # noqa: E402
from modeling.workload import Workload  # noqa: E402
from traces.capacity.device import parse_mix  # noqa: E402

MIXES = ("write_ratio=0,request_size=4k,randomness=1", "write_ratio=0.4,request_size=16k,randomness=1")
FRACTIONS = "0.5,0.6,0.7,0.8,0.85,0.9,0.95,1.0,1.05"


def point(mix: str, rate: float, target: str, size: int, min_requests: int) -> dict[str, float]:
    """One open-loop point as the sweep and the validation measure them."""
    w = Workload(queue_depth=1, numjobs=LANES, **parse_mix(mix))
    settings = JobSettings(target=target, engine="psync", size=size, runtime_ms=2000)
    prefix = realtime_prefix()[0]
    row, _ = measure_open_point(
        w,
        max(int(round(rate)), LANES),
        settings,
        lambda job, **kw: run_fio(job, prefix=prefix, **kw),
        min_requests=min_requests,
    )
    offered = offered_rate(w, max(int(round(rate)), LANES))
    return {
        "offered": offered,
        "served": float(row["iops"]) / offered,
        "mean": float(row["latency_mean_us"]),
        "p99": float(row["latency_p99_us"]),
    }


def one_cap(iops: int, fractions: list[float], floor: float, repeats: int, min_requests: int) -> None:
    """Make a throttled reference at ``iops``, measure every mix's curve, destroy it."""
    home = Path(tempfile.mkdtemp(prefix="bench-capacity-curve-"))
    datadir = DataDir(home)
    size_mib = 128
    ref = create_reference(datadir, "throttled", size_mib << 20, iops)
    os.environ.update(fio_wrapper(home))
    print(f"{ref.path}: {ref.note}; load average {os.getloadavg()[0]:.1f}", flush=True)
    try:
        for mix in MIXES:
            wr = parse_mix(mix).get("write_ratio", 0.0)
            cap = iops / max(wr, 1 - wr)  # the binding direction's bucket
            print(f"  {mix} (cap of the mix {cap:,.0f} IO/s)")
            print(
                f"    {'frac':>5s} {'offered':>8s} {'served':>6s} {'mean us':>9s} {'p99 us':>9s}"
                f" {'el.mean':>7s} {'el.p99':>7s}"
            )
            prev = None
            for f in fractions:
                p = point(mix, f * cap, ref.path, (size_mib - 16) << 20, min_requests)
                el = ("", "")
                if prev is not None and p["offered"] != prev["offered"]:  # 16 lanes: equal rates happen
                    dl = np.log(p["offered"] / prev["offered"])
                    el = tuple(f"{np.log(p[s] / prev[s]) / dl:7.1f}" for s in ("mean", "p99"))
                print(
                    f"    {f:5.2f} {p['offered']:8.0f} {p['served']:6.2f} {p['mean']:9.0f} {p['p99']:9.0f}"
                    f" {el[0]:>7s} {el[1]:>7s}",
                    flush=True,
                )
                prev = p
            runs = [
                point(mix, floor * cap, ref.path, (size_mib - 16) << 20, min_requests) for _ in range(repeats)
            ]
            for s in ("mean", "p99"):
                v = np.array([r[s] for r in runs])
                print(
                    f"    floor at {floor}: {s} "
                    + " / ".join(f"{x:.0f}" for x in v)
                    + f" us (spread {np.std(v) / v.mean():.0%})",
                    flush=True,
                )
    finally:
        destroy_reference(datadir, ref.path)
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--iops", default="200,500", help="caps, comma-separated")
    parser.add_argument("--fractions", default=FRACTIONS, help="of each mix's cap")
    parser.add_argument("--floor", type=float, default=0.9, help="the fraction run --repeats more times")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--min-requests", type=int, default=1500, help="a point runs for at least this many")
    args = parser.parse_args()
    t0 = time.time()
    for iops in (int(x) for x in args.iops.split(",")):
        one_cap(
            iops, [float(x) for x in args.fractions.split(",")], args.floor, args.repeats, args.min_requests
        )
    print(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
