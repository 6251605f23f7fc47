"""Benchmark: a sweep point's fixed cost, and this machine's repeat noise on the PTS matrix.

1. Fixed overhead: one fio job (4 KiB random read, QD 8) at several runtimes, a few times
   each; overhead = wall time - runtime.  Also the per-point wall time inside a real
   sweep (fio + parsing + storing), from the sweep's progress callbacks.
2. Repeat noise: the 56-point SNIA PTS IOPS matrix at a short runtime with N repeats on a
   scratch file; the coefficient of variation between repeats per point, summarised per
   metric (mean / median / max).  A model cannot be more accurate than this.

Usage: ``python bench/sweep_cost.py [--runtime 500ms] [--repeats 3] [--size 256MiB]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from collectors.fio.engines import resolve_engine
from collectors.fio.jobs import JobSettings, build_job
from collectors.fio.runner import fio_version, run_fio
from collectors.plans.presets import pts_plan
from collectors.sweep.quality import repeat_cv
from collectors.safety import prepare_file
from collectors.sweep.run import run_sweep
from collectors.sweep.settings import SweepSettings
from modeling.units import parse_duration_ms
from modeling.store import DataDir
from modeling.workload import METRICS, Workload, format_size, parse_size


def overhead(target: str, size: int, runtimes: list[str], tries: int) -> list[tuple[str, list[float]]]:
    """Wall time minus runtime of single fio invocations."""
    engine = resolve_engine(None, target)
    w = Workload.model_validate({"write_ratio": 0, "queue_depth": 8, "request_size": 4096, "randomness": 1})
    out = []
    for rt in runtimes:
        ms = parse_duration_ms(rt)
        job = build_job(w, JobSettings(target=target, engine=engine, size=size, runtime_ms=ms))
        extra = []
        for _ in range(tries):
            start = time.monotonic()
            run_fio(job, timeout=120)
            extra.append(time.monotonic() - start - ms / 1000)
        out.append((rt, extra))
    return out


def main() -> None:
    """Run both measurements and print tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="500ms", help="runtime per PTS point")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--size", default="256MiB", help="scratch file size")
    parser.add_argument("--tries", type=int, default=3, help="fio runs per runtime for the overhead")
    parser.add_argument("--runtimes", default="500ms,1s,2s")
    parser.add_argument("--points", type=int, default=None, help="only the first N PTS points")
    args = parser.parse_args()
    size = parse_size(args.size)

    with tempfile.TemporaryDirectory(prefix="ssdpredict-bench-", dir="/var/tmp") as tmp:
        target = str(Path(tmp) / "scratch.img")
        prepare_file(target, size)
        print(f"{fio_version()}, engine {resolve_engine(None, target)}, scratch file {format_size(size)}"
              f" in {tmp}")
        print("\n1. fixed cost of one fio invocation (4k random read, QD 8)")
        print(f"{'runtime':>8} {'runs':>5} {'overhead mean s':>16} {'min':>7} {'max':>7} "
              f"{'wall/runtime':>13}")
        for rt, extra in overhead(target, size, args.runtimes.split(","), args.tries):
            secs = parse_duration_ms(rt) / 1000
            print(f"{rt:>8} {len(extra):>5} {statistics.mean(extra):>16.3f} {min(extra):>7.3f} "
                  f"{max(extra):>7.3f} {(secs + statistics.mean(extra)) / secs:>13.2f}")

        plan = pts_plan().head(args.points)
        data = DataDir(Path(tmp) / "home")
        stamps: list[float] = []
        settings = SweepSettings(target=target, runtime=args.runtime, size=args.size, repeats=args.repeats)
        start = time.monotonic()
        sweep = run_sweep(data, "bench", plan, settings,
                          progress=lambda done, total, w: stamps.append(time.monotonic()))
        wall = time.monotonic() - start
        per_point = [b - a for a, b in zip(stamps[1:], stamps[2:], strict=False)]
        rt_s = settings.runtime_ms / 1000
        print(f"\n2. PTS matrix: {len(plan)} points x {args.repeats} repeats at {args.runtime}: "
              f"{sweep.n_points} measurements in {wall:.1f} s")
        print(f"   sweep point wall time: median {statistics.median(per_point):.3f} s, "
              f"fixed overhead (median - runtime) {statistics.median(per_point) - rt_s:.3f} s")
        frame = data.catalog.sweep_points(sweep.id)
        cvs = [repeat_cv(g.to_dict("records")) for _, g in frame.groupby("seq")]
        print(f"\n   repeat noise (coefficient of variation between {args.repeats} repeats, per point)")
        print(f"   {'metric':<18} {'mean':>7} {'median':>7} {'p90':>7} {'max':>7}")
        for m in METRICS:
            vals = sorted(c[m] for c in cvs if c[m] == c[m])
            p90 = vals[int(0.9 * (len(vals) - 1))]
            print(f"   {m:<18} {100 * statistics.mean(vals):>6.1f}% {100 * statistics.median(vals):>6.1f}% "
                  f"{100 * p90:>6.1f}% {100 * max(vals):>6.1f}%")
        worst = sorted(zip((c["iops"] for c in cvs), frame.groupby("seq"), strict=True),
                       key=lambda t: -t[0])[:3]
        print("   noisiest points (iops CV): " + "; ".join(
            f"wr {g.iloc[0]['write_ratio']:g} bs {format_size(int(g.iloc[0]['request_size']))} "
            f"{100 * cv:.0f}%" for cv, (_, g) in worst))


if __name__ == "__main__":
    main()
