"""How well a replay keeps the trace's clock: drift of the shared traces, repeated, on a zram reference.

Each shared trace (the blktrace sample at 0.1 s windows, tpcc at 0.05 s, the first
``--wsrch-s`` seconds of wsrch at 1 s) is replayed ``--repeats`` times on a fresh
reference device (``collectors.devices.reference``, removed at the end) or on
``--target``; per trace it prints the whole-trace drift, the worst window's drift and the
share of windows within 2 % (the issue's target), each as mean and range over the
repeats, with the slip taken off each gap (:mod:`traces.replay.clock`) and what the
lanes still slipped.  ``--slip-us 0`` replays without compensation (the lead-out stays).

    .venv/bin/python bench/replay_drift.py                     # ~3 min with the 60 s wsrch cut
    .venv/bin/python bench/replay_drift.py --wsrch-s 10 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from collectors.devices.reference import create_reference, destroy_reference  # noqa: E402
from modeling.store import DataDir  # noqa: E402
from trace_reference import TESTDATA, _cut, window_drift  # noqa: E402
from traces.replay.run import replay  # noqa: E402


def measure(trace: Path, target: str, window_s: float, repeats: int, slip_us: float | None) -> dict[str, Any]:
    """``repeats`` replays of ``trace``: drift, worst window and windows within 2 % per run."""
    runs = []
    given = {} if slip_us is None else {"slip_us": slip_us}
    for _ in range(repeats):
        rep = replay(trace, target, destroy_data=True, window_s=window_s, **given)
        worst, ok, windows = window_drift(rep.windows)
        runs.append({"drift": rep.drift, "worst": worst, "ok": ok, "windows": windows,
                     "slip": rep.slip_us, "residual": rep.residual_slip_us})
    return {"trace": trace.stem, "runs": runs}


def _span(values: list[float], scale: float = 100.0, fmt: str = "{:+.1f}") -> str:
    v = np.asarray(values, float) * scale
    if not np.isfinite(v).any():
        return "n/a"
    return f"{fmt.format(np.nanmean(v))} [{fmt.format(np.nanmin(v))}, {fmt.format(np.nanmax(v))}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--wsrch-s", type=float, default=60.0, help="seconds of wsrch to replay")
    ap.add_argument("--target", help="replay on this device or file (default: a fresh zram reference)")
    ap.add_argument("--slip-us", type=float, default=None, help="gap compensation (default: calibrated)")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-drift-"))
    datadir = DataDir(home)
    ref = None if args.target else create_reference(datadir, "auto", 256 << 20)
    target = args.target or ref.path
    print(f"replay target {target}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"{args.repeats} repeats; mean [min, max]")
    print(f"  {'trace':18s} {'win':>4s} {'drift %':>22s} {'worst window %':>22s} {'windows <=2% %':>22s}"
          f" {'slip us':>18s} {'residual us':>22s}")
    try:
        traces = [(TESTDATA / "sample.blktrace.0", 0.1), (TESTDATA / "tpcc-small.trace", 0.05),
                  (_cut(TESTDATA / "wsrch-small.trace", args.wsrch_s, home / "wsrch-cut.trace"), 1.0)]
        for path, window_s in traces:
            r = measure(path, target, window_s, args.repeats, args.slip_us)
            runs = r["runs"]
            print(f"  {r['trace'][:18]:18s} {runs[0]['windows']:4d} {_span([x['drift'] for x in runs]):>22s}"
                  f" {_span([x['worst'] for x in runs], fmt='{:.1f}'):>22s}"
                  f" {_span([x['ok'] for x in runs], fmt='{:.0f}'):>22s}"
                  f" {_span([x['slip'] for x in runs], 1.0, '{:.1f}'):>18s}"
                  f" {_span([x['residual'] for x in runs], 1.0, '{:+.1f}'):>22s}", flush=True)
        print(f"  load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        if ref is not None:
            destroy_reference(datadir, ref.path)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
