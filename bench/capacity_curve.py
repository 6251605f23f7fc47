"""Latency against offered load on a reference device, measured point by point with fio.

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

``--kind loop``: a loop device over a tmpfs file (buffered, the loop driver's default), whose
driver serves one cgroup's requests from a single worker, one after the other: a queue after
fio's issue timestamp.  Each mix's capacity is measured first (closed loop, the 16 lanes
without a rate limit), the fractions are of that, and ``--curves`` repeats the whole curve
to show whether it repeats.

``--per-point N`` (N > 1) measures every fraction N times in turn (the fractions in order, N
passes) on one reference and one mix (``--mixes``, its first), and prints per point the median
and spread of the mean and p99, the served share, and the elasticity between the medians; then,
for each statistic, the band of rates where the median lies within 25 % of a target: at the
cliff's middle (the geometric mean of the lowest point's median and the highest median), at the
validation's targets (3x the p99 and 2x the mean of the lowest point, its 0.5), and at the flat
level itself; with where each pass crosses the target, and the share of runs within 25 % of it
at the fraction that has the most.  ``--kind zram``: the zram reference, each mix's closed-loop
capacity measured before and after as for the loop.

    /work/bin/quiet .venv/bin/python bench/capacity_curve.py --iops 200,500
    /work/bin/quiet .venv/bin/python bench/capacity_curve.py --kind loop --curves 3
    /work/bin/quiet .venv/bin/python bench/capacity_curve.py --iops 200 --per-point 3 \
        --mixes "write_ratio=0,request_size=16k,randomness=1" --fractions 0.5,0.8,0.85,0.86,0.87,...
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
from collectors.fio.jobs import JobSettings, global_options, render_job, workload_options  # noqa: E402
from collectors.fio.results import load_fio_json, parse_fio_document  # noqa: E402
from collectors.fio.runner import run_fio  # noqa: E402
from collectors.sweep.openloop import LANES, measure_open_point, offered_rate, realtime_prefix  # noqa: E402
from modeling.store import DataDir  # noqa: E402
from modeling.workload import Workload  # noqa: E402
from traces.capacity.device import parse_mix  # noqa: E402

MIXES = ("write_ratio=0,request_size=4k,randomness=1", "write_ratio=0.4,request_size=16k,randomness=1")
LOOP_MIXES: tuple[str, ...] = (
    "write_ratio=0,request_size=64k,randomness=1",
    "write_ratio=0,request_size=256k,randomness=1",
    "write_ratio=0.4,request_size=128k,randomness=1",
)
FRACTIONS = "0.5,0.6,0.7,0.8,0.85,0.9,0.95,1.0,1.05"
LOOP_FRACTIONS = "0.3,0.5,0.6,0.7,0.8,0.85,0.9,0.95,1.0"


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


def closed_capacity(mix: str, target: str, size: int, runtime_ms: int = 2000) -> float:
    """The mix's IO/s with the 16 lanes unlimited (closed loop, QD1 each), at real-time priority."""
    w = Workload(queue_depth=1, numjobs=LANES, **parse_mix(mix))
    settings = JobSettings(target=target, engine="psync", size=size, runtime_ms=runtime_ms)
    job = render_job({**global_options(settings), "group_reporting": "1"}, {"closed": workload_options(w)})
    doc = load_fio_json(run_fio(job, prefix=realtime_prefix()[0], timeout=120), source="capacity point")
    return float(parse_fio_document(doc, source="capacity point")[0].row["iops"])


def print_curve(points: list[dict[str, float]], fractions: list[float]) -> None:
    print(
        f"    {'frac':>5s} {'offered':>8s} {'served':>6s} {'mean us':>9s} {'p99 us':>9s}"
        f" {'el.mean':>7s} {'el.p99':>7s}"
    )
    prev = None
    for f, p in zip(fractions, points, strict=True):
        print_point(f, p, prev)
        prev = p


def print_point(f: float, p: dict, prev: dict | None) -> None:
    """One curve row: the point and its elasticity against the previous one (none at equal rates)."""
    el = ("", "")
    if prev is not None and p["offered"] != prev["offered"]:  # 16 lanes: equal rates happen
        dl = np.log(p["offered"] / prev["offered"])
        el = tuple(f"{np.log(p[s] / prev[s]) / dl:7.1f}" for s in ("mean", "p99"))
    print(
        f"    {f:5.2f} {p['offered']:8.0f} {p['served']:6.2f} {p['mean']:9.0f} {p['p99']:9.0f}"
        f" {el[0]:>7s} {el[1]:>7s}",
        flush=True,
    )


def one_loop(fractions: list[float], curves: int, min_requests: int, mixes: tuple[str, ...]) -> None:
    """Make a loop reference, measure every mix's capacity and ``curves`` curves, destroy it."""
    home = Path(tempfile.mkdtemp(prefix="bench-capacity-curve-"))
    datadir = DataDir(home)
    size_mib = 256
    ref = create_reference(datadir, "loop", size_mib << 20)
    span = (size_mib - 16) << 20
    print(f"{ref.path}: {ref.note}; load average {os.getloadavg()[0]:.1f}", flush=True)
    try:
        for mix in mixes:
            caps = [closed_capacity(mix, ref.path, span) for _ in range(2)]
            cap = float(np.mean(caps))
            print(f"  {mix}: closed-loop capacity {caps[0]:,.0f} / {caps[1]:,.0f} IO/s", flush=True)
            table = []
            for c in range(curves):
                pts = [point(mix, f * cap, ref.path, span, min_requests) for f in fractions]
                table.append(pts)
                print(f"   curve {c + 1} (load average {os.getloadavg()[0]:.1f})")
                print_curve(pts, fractions)
            if curves > 1:
                for s in ("mean", "p99"):
                    v = np.array([[p[s] for p in pts] for pts in table])
                    spread = v.std(axis=0) / v.mean(axis=0)
                    print(f"    {s} spread over curves (std/mean) by fraction: "
                          + " ".join(f"{x:.0%}" for x in spread), flush=True)
            cap_after = closed_capacity(mix, ref.path, span)
            print(f"    closed-loop capacity after: {cap_after:,.0f} IO/s", flush=True)
    finally:
        destroy_reference(datadir, ref.path)
        shutil.rmtree(home, ignore_errors=True)


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
                print_point(f, p, prev)
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


BAND = 1.25
"""The 1.0x check's band: the measured statistic within 25 % of the target."""


def band(
    fractions: np.ndarray, medians: np.ndarray, target: float
) -> tuple[float, list[tuple[float, float]]]:
    """The rates (fractions of the cap, linear between points in log-statistic) where the median
    curve lies within ``BAND`` of ``target``: their total width and the intervals."""
    grid = np.linspace(fractions[0], fractions[-1], 20001)
    curve = np.interp(grid, fractions, np.log(medians))
    inside = np.abs(curve - np.log(target)) <= np.log(BAND)
    edges = np.flatnonzero(np.diff(np.r_[0, inside.astype(int), 0]))
    spans = [(float(grid[a]), float(grid[b - 1])) for a, b in zip(edges[::2], edges[1::2], strict=True)]
    return float(sum(b - a for a, b in spans)), spans


def crossing(fractions: np.ndarray, values: np.ndarray, target: float) -> float:
    """The first fraction where one pass's curve rises through ``target`` (log-linear), nan if never."""
    above = np.flatnonzero(values > target)
    if not len(above) or above[0] == 0:
        return float("nan")
    i = above[0]
    lo, hi = np.log(values[i - 1]), np.log(values[i])
    return float(fractions[i - 1] + (fractions[i] - fractions[i - 1]) * (np.log(target) - lo) / (hi - lo))


def dense(
    kind: str, iops: int | None, mix: str, fractions: list[float], passes: int, min_requests: int
) -> None:
    """One mix's curve, every fraction measured ``passes`` times, and the 1.0x band (module docstring)."""
    home = Path(tempfile.mkdtemp(prefix="bench-capacity-curve-"))
    datadir = DataDir(home)
    size_mib = 256
    ref = create_reference(datadir, kind, size_mib << 20, iops)
    span = (size_mib - 16) << 20
    print(f"{ref.path} ({kind}): {ref.note}; load average {os.getloadavg()[0]:.1f}", flush=True)
    try:
        if kind == "throttled":
            wr = parse_mix(mix).get("write_ratio", 0.0)
            cap = float(iops or 0) / max(wr, 1 - wr)  # the binding direction's bucket
            print(f"  {mix}: cap of the mix {cap:,.0f} IO/s (the bucket)", flush=True)
        else:
            caps = [closed_capacity(mix, ref.path, span) for _ in range(2)]
            cap = float(np.mean(caps))
            print(f"  {mix}: closed-loop capacity {caps[0]:,.0f} / {caps[1]:,.0f} IO/s", flush=True)
        runs = []
        for k in range(passes):
            runs.append([point(mix, f * cap, ref.path, span, min_requests) for f in fractions])
            print(f"   pass {k + 1} done (load average {os.getloadavg()[0]:.1f})", flush=True)
        if kind != "throttled":
            after = closed_capacity(mix, ref.path, span)
            print(f"    closed-loop capacity after: {after:,.0f} IO/s", flush=True)
    finally:
        destroy_reference(datadir, ref.path)
        shutil.rmtree(home, ignore_errors=True)
    print_dense(np.array(fractions), runs)


def print_dense(fractions: np.ndarray, runs: list[list[dict[str, float]]]) -> None:
    """The per-point medians, spreads and elasticities, then the bands (module docstring)."""
    v = {s: np.array([[p[s] for p in run] for run in runs]) for s in ("offered", "served", "mean", "p99")}
    med = {s: np.median(x, axis=0) for s, x in v.items()}
    spread = {s: (v[s].max(axis=0) - v[s].min(axis=0)) / med[s] for s in ("mean", "p99")}
    print(
        f"    {'frac':>5s} {'offered':>8s} {'served':>14s} {'mean us (runs)':>26s} {'spread':>6s}"
        f" {'p99 us (runs)':>30s} {'spread':>6s} {'el.mean':>7s} {'el.p99':>7s}"
    )
    for i, f in enumerate(fractions):
        el = ["", ""]
        if i and med["offered"][i] != med["offered"][i - 1]:
            dl = np.log(med["offered"][i] / med["offered"][i - 1])
            el = [f"{np.log(med[s][i] / med[s][i - 1]) / dl:7.1f}" for s in ("mean", "p99")]
        print(
            f"    {f:5.2f} {med['offered'][i]:8.0f} {'/'.join(f'{x:.2f}' for x in v['served'][:, i]):>14s}"
            f" {'/'.join(f'{x:.0f}' for x in v['mean'][:, i]):>26s} {spread['mean'][i]:6.0%}"
            f" {'/'.join(f'{x:.0f}' for x in v['p99'][:, i]):>30s} {spread['p99'][i]:6.0%}"
            f" {el[0]:>7s} {el[1]:>7s}"
        )
    # where each pass is first served under 95 % of its offered rate (the validation counts that as over)
    short = [next((float(f) for f, x in zip(fractions, run, strict=True) if x < 0.95), float("nan"))
             for run in v["served"]]
    print("    first served under 95 %: " + "/".join(f"{x:.2f}" for x in short), flush=True)
    for s, multiple in (("mean", 2.0), ("p99", 3.0)):
        flat = med[s][0]
        targets = {
            "cliff's middle": float(np.sqrt(flat * med[s].max())),
            f"{multiple:g}x the lowest point (the validation's)": multiple * flat,
            "the lowest point (the flat level)": flat,
        }
        for name, t in targets.items():
            width, spans = band(fractions, med[s], t)
            # where each pass rises through the target (through 1.25x it for the flat level)
            edge = t * (BAND if name.startswith("the lowest") else 1.0)
            cross = np.array([crossing(fractions, v[s][k], edge) for k in range(len(runs))])
            hits = (np.abs(np.log(v[s] / t)) <= np.log(BAND)).mean(axis=0)
            print(
                f"    {s} target {t:,.0f} us ({name}): median within 25 % over a width of {width:.3f}"
                f" of the cap ({', '.join(f'{a:.3f}-{b:.3f}' for a, b in spans) or 'nowhere'});"
                f" passes cross {edge:,.0f} us at"
                f" {'/'.join(f'{c:.3f}' for c in cross)}; runs within 25 % at best {hits.max():.0%}"
                f" (at {fractions[int(np.argmax(hits))]:.2f})",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kind", choices=("throttled", "loop", "zram"), default="throttled")
    parser.add_argument("--iops", default="200,500", help="caps, comma-separated (throttled)")
    parser.add_argument("--fractions", default=None, help="of each mix's cap")
    parser.add_argument("--curves", type=int, default=3, help="loop: whole curves per mix")
    parser.add_argument("--mixes", default=None, help="loop, --per-point: mixes separated by ';'")
    parser.add_argument("--per-point", type=int, default=1, help="runs of each fraction (one mix; docstring)")
    parser.add_argument("--floor", type=float, default=0.9, help="the fraction run --repeats more times")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--min-requests", type=int, default=1500, help="a point runs for at least this many")
    args = parser.parse_args()
    t0 = time.time()
    if args.per_point > 1 or args.kind == "zram":
        default = MIXES if args.kind == "throttled" else LOOP_MIXES
        mix = args.mixes.split(";")[0] if args.mixes else default[0]
        iops = int(args.iops.split(",")[0]) if args.kind == "throttled" else None
        fractions = [float(x) for x in (args.fractions or FRACTIONS).split(",")]
        dense(args.kind, iops, mix, fractions, max(args.per_point, 1), args.min_requests)
        print(f"done in {time.time() - t0:.0f} s")
        return
    if args.kind == "loop":
        mixes = tuple(args.mixes.split(";")) if args.mixes else LOOP_MIXES
        one_loop([float(x) for x in (args.fractions or LOOP_FRACTIONS).split(",")], args.curves,
                 args.min_requests, mixes)
        print(f"done in {time.time() - t0:.0f} s")
        return
    for iops in (int(x) for x in args.iops.split(",")):
        one_cap(
            iops, [float(x) for x in (args.fractions or FRACTIONS).split(",")], args.floor, args.repeats,
            args.min_requests,
        )
    print(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
