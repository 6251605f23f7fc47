"""Where a batch prediction's time goes, in process (no HTTP): the models at the workloads
themselves, the IOPS model at the ladder's rungs (the load laws), and the percentile rungs.

    .venv/bin/python bench/predict_cost.py                 # trains INTEL_D3_S4610 (default training)
    .venv/bin/python bench/predict_cost.py --home PATH     # reuse a home of bench/serve.py --keep

10,000 random workloads (the mix of ``bench/serve.py``), as columns, ``--reps`` times; the
median per batch.  Timing: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.serve import DEVICE, WHATIF, build_home  # noqa: E402
from modeling.derived.store import register_derived  # noqa: E402
from modeling.serving import matrix_path  # noqa: E402
from modeling.serving.device_model import DeviceModel  # noqa: E402
from modeling.serving.registry import ModelRegistry  # noqa: E402
from modeling.store import DataDir  # noqa: E402
from modeling.workload import METRICS  # noqa: E402


def workloads(n: int = 10_000, seed: int = 1) -> dict[str, list[Any]]:
    """Random workloads as columns by field name."""
    rng = random.Random(seed)
    rows = [
        {
            "write_ratio": round(rng.random(), 3),
            "queue_depth": rng.choice([1, 2, 4, 8, 16, 32, 64]),
            "request_size": rng.choice([4096, 8192, 16384, 65536, 131072, 262144]),
            "randomness": round(rng.random(), 3),
            "numjobs": rng.choice([1, 2, 4, 8]),
        }
        for _ in range(n)
    ]
    return {f: [r[f] for r in rows] for f in rows[0]}


def timed(
    model: DeviceModel, cols: dict[str, list[Any]], metrics: list[str] | None, reps: int
) -> tuple[float, float]:
    """Median seconds per batch, and of that the rungs' share (``matrix_path.rung_values``)."""
    spent = [0.0]
    original = matrix_path.rung_values

    def rungs(*a: Any) -> Any:
        t = time.perf_counter()
        try:
            return original(*a)
        finally:
            spent[0] += time.perf_counter() - t

    model.predict(cols, metrics)  # warm the caches
    totals, rung = [], []
    matrix_path.rung_values = rungs
    try:
        for _ in range(reps):
            spent[0] = 0.0
            t = time.perf_counter()
            model.predict(cols, metrics)
            totals.append(time.perf_counter() - t)
            rung.append(spent[0])
    finally:
        matrix_path.rung_values = original
    return statistics.median(totals), statistics.median(rung)


def main() -> None:
    """Train (or load) the device and print the batch cost and its split."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, help="a data directory holding the trained device")
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    home = a.home or Path(tempfile.mkdtemp(prefix="bench-predict-cost-"))
    if a.home is None:
        t = time.perf_counter()
        build_home(home, quick=False)
        print(f"{DEVICE}: default training {time.perf_counter() - t:.1f} s; home {home}")
    model = ModelRegistry(DataDir(home)).load(DEVICE)
    cols = workloads()
    for label, metrics in (("the four main metrics", list(METRICS)), ("every served metric", None)):
        total, rung = timed(model, cols, metrics, a.reps)
        print(
            f"10,000 workloads, {label}: {total * 1e3:.1f} ms ({10_000 / total:,.0f} workloads/s);"
            f" IOPS at the ladder's rungs {rung * 1e3:.1f} ms, the rest {(total - rung) * 1e3:.1f} ms"
        )
    whatif_cost(home, model, a.reps)


def whatif_cost(home: Path, model: DeviceModel, reps: int) -> None:
    """A what-if (RAID 5 of 4 of the device) on workloads it has not seen, against the device itself.

    Each rep uses new workloads (another seed): the what-if's member-curve cache holds 4,096
    shapes, so 10,000 new ones are all first-time answers.
    """
    datadir = DataDir(home)
    if WHATIF not in {d.name for d in datadir.catalog.list_devices()}:
        register_derived(datadir, WHATIF, {"kind": "raid", "base": DEVICE, "level": 5, "members": 4,
                                           "chunk": 65536})
    derived = ModelRegistry(datadir).load(WHATIF)
    derived.predict(workloads(seed=100), None)  # warm the code paths, not the shapes
    own, what_if = [], []
    for rep in range(reps):
        cols = workloads(seed=101 + rep)
        for out, m in ((own, model), (what_if, derived)):
            t = time.perf_counter()
            m.predict(cols, None)
            out.append(time.perf_counter() - t)
    print(f"10,000 new workloads, every served metric: device {statistics.median(own) * 1e3:.1f} ms, "
          f"what-if RAID 5 of 4 of it {statistics.median(what_if) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
