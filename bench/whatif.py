"""What-if validation (issue 26): a RAID 0 of three Crucial MX200 from one MX200's model.

    PYTHONPATH=. .venv/bin/python bench/whatif.py [--time-budget 60] [--seeds 5]

The member (one MX200 alone on the HP P420i, fio-plot) is ingested and trained with the
CLI's defaults (``ssdpredict train``: 5 folds, 60 s budget); the derived device
``raid whatif --level 0 --members 3`` then predicts the 98 measured points of the real
array (same controller) with no array point: IOPS and mean-latency mean relative error.
Beside it: the naive rule (N x the member's predicted IOPS, latency / N), and the what-if
calibrated on K = 8 random array points (median over ``seeds`` draws, error on the other
90 points).  The P420i's default strip is 256 KiB; at 4 KiB the chunk does not matter.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.accuracy import FIO_PLOT, ingest_folder  # noqa: E402
from modeling.derived.calibrate import fit_calibration  # noqa: E402
from modeling.derived.store import load_derived, register_derived  # noqa: E402
from modeling.serving.registry import ModelRegistry  # noqa: E402
from modeling.store import DataDir  # noqa: E402
from modeling.training.train import train_device  # noqa: E402
from modeling.workload_matrix import workload_matrix  # noqa: E402

RAID = FIO_PLOT / "HPDL380G8" / "RAID"
METRICS = ("iops", "latency_mean_us", "latency_p99_us")


def mre(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - y) / y))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-budget", type=float, default=60.0, help="member training budget (CLI default 60)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--k", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = DataDir(Path(tmp) / "home")
        ingest_folder(data, "mx200", RAID / "P420i_CRUCIAL_MX200")
        array = ingest_folder(data, "mx200x3-raid0", RAID / "P420i_CRUCIAL_MX200x3_RAIDO")
        t0 = time.monotonic()
        train_device(data, "mx200", folds=5, time_budget_s=args.time_budget)
        print(f"member trained in {time.monotonic() - t0:.0f} s (5 folds, {args.time_budget:g} s budget)")
        registry = ModelRegistry(data)
        dev = register_derived(
            data,
            "raid0-whatif",
            {"kind": "raid", "base": "mx200", "level": 0, "members": 3, "chunk": 256 * 1024},
        )
        whatif = load_derived(dev, registry.load)
        member = registry.load("mx200")
        w = workload_matrix(array)
        measured = {m: array[m].to_numpy(float) for m in METRICS}
        t0 = time.monotonic()
        pred = {m: v[0] for m, v in whatif.predict_matrix(w, metrics=list(METRICS)).items()}
        took = time.monotonic() - t0
        base = {m: v[0] for m, v in member.predict_matrix(w, metrics=list(METRICS)).items()}
        naive = {"iops": 3 * base["iops"], "latency_mean_us": base["latency_mean_us"] / 3,
                 "latency_p99_us": base["latency_p99_us"] / 3}
        rows = {
            "what-if, zero array points": {m: mre(pred[m], measured[m]) for m in METRICS},
            "naive N x member": {m: mre(naive[m], measured[m]) for m in METRICS},
        }
        calibrated = {m: [] for m in METRICS}
        for seed in range(args.seeds):
            pick = np.random.default_rng(seed).choice(len(w), args.k, replace=False)
            rest = np.setdiff1d(np.arange(len(w)), pick)
            calib = fit_calibration(
                w[pick],
                {m: pred[m][pick] for m in METRICS},
                {m: measured[m][pick] for m in METRICS},
                "mx200x3-raid0",
            )
            spec = {**dev.metadata["derived"], "calibration": calib}
            fitted = load_derived(register_derived(data, "raid0-calibrated", spec), registry.load)
            out = fitted.predict_matrix(w[rest], metrics=list(METRICS))
            for m in METRICS:
                calibrated[m].append(mre(out[m][0], measured[m][rest]))
        rows[f"what-if + calibration, K = {args.k} (median of {args.seeds} draws, other points)"] = {
            m: float(np.median(v)) for m, v in calibrated.items()
        }
        print(f"\nRAID 0 of 3 x MX200 on a P420i, {len(w)} measured points; law: {whatif.law}")
        print("| rule | IOPS MRE | mean latency MRE | p99 latency MRE |")
        print("|---|---|---|---|")
        for name, r in rows.items():
            print(f"| {name} | {r['iops']:.1%} | {r['latency_mean_us']:.1%} | {r['latency_p99_us']:.1%} |")
        print(f"\n98 what-if predictions in {took * 1e3:.1f} ms (one batch)")


if __name__ == "__main__":
    main()
