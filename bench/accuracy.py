"""Accuracy benchmark: cross-validated errors per device, and MRE vs measured points.

Usage::

    .venv/bin/python bench/accuracy.py                       # every fio-plot device
    .venv/bin/python bench/accuracy.py --device NAME --home PATH   # an already swept device
    .venv/bin/python bench/accuracy.py --sampling-only --budget 30
    .venv/bin/python bench/accuracy.py --study extrapolation --budget 3   # issue 13's three studies:
    .venv/bin/python bench/accuracy.py --study extrapolation --device D --home H   # + sizes
    .venv/bin/python bench/accuracy.py --study tail
    .venv/bin/python bench/accuracy.py --study tail --budget 2 --draws 3   # mean of 3 fold draws
    .venv/bin/python bench/accuracy.py --study tail --leave-one-device-out --json tail.json  # issue 27
    .venv/bin/python bench/accuracy.py --study tail --leave-one-device-out --lodo-runs tail.npz  # re-judge
    .venv/bin/python bench/accuracy.py --study transfer       # (also --transfer-only)
    .venv/bin/python bench/accuracy.py --core --json after.json   # IOPS, bandwidth, mean latency only
    .venv/bin/python bench/accuracy.py --core --compare before.json --json after.json  # + the change

For each fio-plot leaf folder (one device) the fio JSON files are ingested into a
temporary data directory, then the nested 5-fold evaluation of :mod:`modeling.training.evaluate`
runs (the whole training procedure inside each fold).  Printed: MRE per metric with the
issue's targets, basic vs extended features, interval coverage, the noise floor when the
data has repeats, and the wall time of one full training.  The sampling study trains on
growing subsets of one device's points chosen by a coarse grid, at random, or adaptively
(:func:`modeling.training.adaptive.propose_points`) and reports the MRE on the points left out.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.physics_study import (  # noqa: E402
    load_study,
    oracle_load_study,
    print_extrapolation,
    print_tail,
    size_study,
    tail_study,
)
from modeling.training.adaptive import propose_points  # noqa: E402
from modeling.training.evaluate import evaluate_frame  # noqa: E402
from modeling.workload_matrix import workload_matrix  # noqa: E402
from modeling.training.fit import fit_device_model  # noqa: E402
from modeling.training.selection import make_candidate, relative_errors, workload_groups  # noqa: E402
from modeling.store import DataDir  # noqa: E402
from bench.transfer_study import transfer_study  # noqa: E402
from modeling.workload import METRICS, Workload  # noqa: E402

FIO_PLOT = Path(__file__).resolve().parents[1] / "tests" / "data" / "fio-plot"
TARGETS = {"iops": 0.04, "bandwidth_mib_s": 0.04, "latency_mean_us": 0.05, "latency_p99_us": 0.12}
SHORT = {
    "latency_mean_us": "lat mean",
    "latency_p99_us": "lat p99",
    "bandwidth_mib_s": "bandwidth",
    "iops": "IOPS",
}


def fio_plot_devices(root: Path = FIO_PLOT) -> list[Path]:
    """Leaf folders holding fio JSON results, one per device."""
    return sorted(p for p in root.rglob("*") if p.is_dir() and any(p.glob("*.json")))


def ingest_folder(datadir: DataDir, name: str, folder: Path) -> pd.DataFrame:
    """Ingest a folder of fio JSON files as a device; returns its measurements."""
    try:
        from collectors.ingest import ingest_paths

        ingest_paths(datadir, name, sorted(folder.glob("*.json")))
    except ImportError:  # before the ingest module existed
        from collectors.fio.results import parse_fio_output

        rows = [
            r.row
            for f in sorted(folder.glob("*.json"))
            for r in parse_fio_output(f.read_text(), source=f.name)
        ]
        datadir.catalog.ensure_device(name)
        datadir.catalog.add_measurements(name, rows)
    return datadir.catalog.measurements(name)


def accuracy_row(name: str, frame: pd.DataFrame, folds: int, budget: float) -> dict:
    """Nested-CV errors and one full training's wall time for one device."""
    t0 = time.monotonic()
    fit_device_model(frame, folds=folds, time_budget_s=budget)
    train_s = time.monotonic() - t0
    report = evaluate_frame(frame, device=name, folds=folds, time_budget_s=budget).to_dict()
    report["train_seconds"] = train_s
    return report


def print_table(reports: list[dict]) -> None:
    """The per-device error table (markdown)."""
    head = ["device", "n"] + [f"{SHORT[m]} MRE" for m in METRICS]
    head += [f"{SHORT[m]} basic/ext" for m in METRICS] + [
        "coverage (90 %)",
        "noise floor",
        "train s",
        "eval s",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in reports:
        cells = [r["device"], str(r["n"])]
        for m in METRICS:
            mre = r["metrics"][m]["mre"]
            cells.append(f"{mre:.1%}{'' if mre <= TARGETS[m] else ' ✗'}")
        fs = r.get("feature_sets") or {}
        for m in METRICS:
            cells.append(f"{fs['basic'][m]:.1%} / {fs['extended'][m]:.1%}" if fs else "-")
        cov = [r["metrics"][m]["coverage"] for m in METRICS]
        cells.append(f"{min(cov):.0%}-{max(cov):.0%}")
        noise = r.get("noise_floor")
        cells.append(
            "no repeats" if not noise else ", ".join(f"{SHORT[m]} {noise[m]['cv']:.1%}" for m in METRICS)
        )
        cells += [f"{r['train_seconds']:.0f}", f"{r['seconds']:.0f}"]
        print("| " + " | ".join(cells) + " |")
    targets = ", ".join(f"{SHORT[m]} <= {t:.0%}" for m, t in TARGETS.items())
    print(f"\ntargets (5-fold CV MRE): {targets}; ✗ = missed")


CORE = ("iops", "bandwidth_mib_s", "latency_mean_us", "latency_p99_us")
"""The core table's metrics: what a change to the tail must leave where it was (and the p99 beside)."""


def core_row(name: str, frame: pd.DataFrame, folds: int, budget: float) -> dict:
    """Nested-CV MRE per metric of one device: no feature-set comparison, no timing training."""
    report = evaluate_frame(frame, device=name, folds=folds, time_budget_s=budget, compare_feature_sets=False)
    return report.to_dict()


def print_core(reports: list[dict], before: list[dict] | None) -> None:
    """MRE per device of IOPS, bandwidth, mean latency and p99; with ``before``, its value and the change."""
    was = {r["device"]: r for r in before or []}
    print("\n| device | n | " + " | ".join(SHORT[m] for m in CORE) + " | eval s |")
    print("|---|---|" + "---|" * len(CORE) + "---|")
    worst = 0.0
    for r in reports:
        cells = []
        for m in CORE:
            now = r["metrics"][m]["mre"]
            old = was.get(r["device"], {}).get("metrics", {}).get(m, {}).get("mre")
            if old is None:
                cells.append(f"{now:.2%}")
                continue
            cells.append(f"{old:.2%} -> {now:.2%} ({100 * (now - old):+.2f})")
            if m != "latency_p99_us":
                worst = max(worst, abs(now - old))
        print(f"| {r['device']} | {r['n']} | " + " | ".join(cells) + f" | {r['seconds']:.0f} |")
    if was:
        print(f"largest change of IOPS, bandwidth or mean latency: {100 * worst:.2f} points")


def print_regions(reports: list[dict]) -> None:
    """Global vs region model MRE of IOPS per region."""
    print("\n| device | region | n | IOPS global | IOPS region | IOPS auto |", end="")
    print(" p99 global | p99 region | p99 auto |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in reports:
        for region, e in r["regions"].items():

            def f(v: float | None) -> str:
                return "-" if v is None else f"{v:.1%}"

            print(
                f"| {r['device']} | {region} | {e['n']} | {f(e['iops']['global'])} |"
                f" {f(e['iops']['region'])} |"
                f" {f(e['iops']['auto'])} | {f(e['latency_p99_us']['global'])} |"
                f" {f(e['latency_p99_us']['region'])} | {f(e['latency_p99_us']['auto'])} |"
            )


def print_physics(reports: list[dict]) -> None:
    """The physics check: metrics derived from predicted IOPS, and what training chose per fold."""
    print("\n| device | bandwidth: model / IOPS x size | lat mean: model / Little's law", end="")
    print(" | modes chosen (folds) |")
    print("|---|---|---|---|")
    for r in reports:
        p = r["physics"]
        bw, lat = p["bandwidth_mib_s"], p["latency_mean_us"]
        modes = "; ".join(
            f"{SHORT[m]}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
            for m, c in p["modes"].items()
        )
        print(
            f"| {r['device']} | {bw['model_mre']:.1%} / {bw['derived_from_iops_mre']:.1%} |"
            f" {lat['model_mre']:.1%} / {lat['derived_from_iops_mre']:.1%} | {modes} |"
        )


SAMPLING_CANDIDATES = [
    make_candidate("extended", "xgboost", n_estimators=300, max_depth=6, learning_rate=0.05, subsample=0.8)
]


def tail_consistency(frame: pd.DataFrame) -> dict[str, float]:
    """How often p99 contradicts the mean latency along queue depth (a measure of tail noise).

    At fixed read/write mix, size, randomness and numjobs, one more step of queue depth
    can only add queueing: the mean latency never falls by much.  A p99 that falls by over
    20 % on such a step while the mean rises is measurement noise (or a bimodal tail),
    which no model of the workload can predict.
    """
    keys = [
        k
        for k in (
            "write_ratio",
            "request_size",
            "randomness",
            "numjobs",
            "read_size",
            "write_size",
            "read_randomness",
            "write_randomness",
        )
        if k in frame
    ]
    steps = p99_contradicts = mean_falls = 0
    for _, g in frame.groupby(keys, dropna=False):
        g = g.groupby("queue_depth")[["latency_mean_us", "latency_p99_us"]].median()
        mean, p99 = g["latency_mean_us"].to_numpy(), g["latency_p99_us"].to_numpy()
        steps += len(g) - 1
        p99_contradicts += int(np.sum((np.diff(mean) > 0) & (p99[1:] < 0.8 * p99[:-1])))
        mean_falls += int(np.sum(mean[1:] < 0.8 * mean[:-1]))
    return {
        "steps": steps,
        "p99_falls_while_mean_rises": p99_contradicts / max(steps, 1),
        "mean_falls": mean_falls / max(steps, 1),
    }


def print_tail_consistency(frames: dict[str, pd.DataFrame]) -> None:
    print("\nTail consistency along queue depth (share of steps; see tail_consistency)")
    print("| device | qd steps | p99 falls > 20 % while mean rises | mean falls > 20 % |")
    print("|---|---|---|---|")
    for name, frame in frames.items():
        t = tail_consistency(frame)
        print(f"| {name} | {t['steps']} | {t['p99_falls_while_mean_rises']:.0%} | {t['mean_falls']:.0%} |")


def later_sweep_study(
    name: str, frame: pd.DataFrame, later_name: str, later: pd.DataFrame, budget: float
) -> None:
    """How well the first sweep predicts a later sweep of the same workloads.

    Two numbers per metric: the *drift floor*, the MRE of the later runs against the first
    sweep's median of each workload (what a perfect model of the first sweep would score;
    it holds the device's slow drift, which back-to-back repeats cannot see), and the MRE
    of the model trained on the whole first sweep (``evaluate_frame`` with ``holdout``).
    """
    first = distinct_workloads(frame)
    # one group id per workload over both sweeps; the first sweep holds each group once
    groups = workload_groups(np.vstack([workload_matrix(first), workload_matrix(later)]))
    position = dict(zip(groups[: len(first)].tolist(), range(len(first)), strict=True))
    later_groups = groups[len(first) :]
    common = np.isin(later_groups, groups[: len(first)])
    index = np.array([position[g] for g in later_groups[common].tolist()], dtype=int)
    report = evaluate_frame(
        frame, holdout=later, device=name, time_budget_s=budget, compare_feature_sets=False
    )
    print(f"\n{name} -> {later_name}: the first sweep's medians and model on a later sweep")
    print(f"({int(common.sum())} of {len(later)} later runs repeat a workload of the first sweep)")
    print("| metric | drift floor (later runs vs first medians) | model MRE on the later sweep |")
    print("|---|---|---|")
    for metric in METRICS:
        floor = relative_errors(first[metric].to_numpy(float)[index], later[metric].to_numpy(float)[common])
        print(f"| {SHORT[metric]} | {floor.mean():.1%} | {report.metrics[metric]['mre']:.1%} |")


TRANSFER_FIT = {"folds": 3, "candidates": SAMPLING_CANDIDATES, "regions": False, "physics": False}
"""The fast training configuration of the transfer study (references and from-scratch models)."""


def _holdout_mre(frame: pd.DataFrame, train_idx: np.ndarray, metric: str) -> float:
    model, _ = fit_device_model(
        frame.iloc[train_idx], folds=3, candidates=SAMPLING_CANDIDATES, regions=False, physics=False
    )
    test = np.setdiff1d(np.arange(len(frame)), train_idx)
    pred = model.predict_matrix(workload_matrix(frame.iloc[test]), metrics=[metric])[metric][0]
    return float(relative_errors(pred, frame[metric].to_numpy(float)[test]).mean())


def grid_subset(frame: pd.DataFrame, n: int) -> np.ndarray:
    """A coarse, even grid of ``n`` points: farthest-point order from one corner, deterministic."""
    w = workload_matrix(frame)
    z = np.column_stack([w[:, 0], np.log2(w[:, 1]), np.log2(w[:, 2]), w[:, 3], np.log2(w[:, 4])])
    span = np.ptp(z, axis=0)
    z = (z - z.min(axis=0)) / np.where(span > 0, span, 1)
    chosen = [int(np.argmin(z.sum(axis=1)))]
    dist = np.linalg.norm(z - z[chosen[0]], axis=1)
    while len(chosen) < n:
        nxt = int(np.argmax(dist))
        chosen.append(nxt)
        dist = np.minimum(dist, np.linalg.norm(z - z[nxt], axis=1))
    return np.array(chosen)


def adaptive_subset(frame: pd.DataFrame, n: int, start: int, step: int, metric: str) -> np.ndarray:
    """Start from a small grid, then add ``step`` points at a time where the model is least sure."""
    chosen = list(grid_subset(frame, start))
    workloads = [Workload.from_row(r) for r in frame.to_dict("records")]
    while len(chosen) < n:
        pool = [i for i in range(len(frame)) if i not in set(chosen)]
        picks = propose_points(
            frame.iloc[chosen], [workloads[i] for i in pool], min(step, n - len(chosen)), metric=metric
        )
        index = {workloads[i]: i for i in pool}
        chosen += [index[p] for p in picks]
    return np.array(chosen)


def distinct_workloads(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per workload, each metric the median of its repeats.

    A sampler "measures" a workload once; leaving a repeat of a training workload among the
    test points would score the model on a point it has already seen.
    """
    frame = frame.reset_index(drop=True)
    groups = workload_groups(workload_matrix(frame))
    metrics = [m for m in METRICS if m in frame]
    medians = frame[metrics].groupby(groups).median()
    first = frame.groupby(groups).head(1).copy()
    first[metrics] = medians.loc[groups[first.index.to_numpy()]].to_numpy()
    return first.reset_index(drop=True)


def sampling_study(
    name: str, frame: pd.DataFrame, sizes: list[int], metric: str = "iops", seeds: int = 3
) -> None:
    """MRE on the left-out points vs number of measured points, for three samplers."""
    print(f"\n{name}: {metric} MRE on the points not measured, vs points measured ({len(frame)} in all)")
    print("| points | grid | random (mean of %d) | adaptive |" % seeds)
    print("|---|---|---|---|")
    for n in sizes:
        grid = _holdout_mre(frame, grid_subset(frame, n), metric)
        rnd = np.mean(
            [
                _holdout_mre(frame, np.random.default_rng(s).choice(len(frame), n, replace=False), metric)
                for s in range(seeds)
            ]
        )
        adaptive = _holdout_mre(
            frame, adaptive_subset(frame, n, start=min(16, n), step=8, metric=metric), metric
        )
        print(f"| {n} | {grid:.1%} | {rnd:.1%} | {adaptive:.1%} |", flush=True)


def run_study(
    study: str, frames: dict[str, pd.DataFrame], budget: float, folds: int, sizes: bool, draws: int = 1
) -> None:
    """One study of issue 13 on every device (see :mod:`bench.physics_study`)."""
    if study == "tail":
        tails = {}
        for name, frame in frames.items():
            print(f"tail study: {name} ...", file=sys.stderr, flush=True)
            tails[name] = tail_study(frame, budget, folds, draws)
        print_tail(tails)
        return
    loads = {}
    for name, frame in frames.items():
        print(f"extrapolation study: {name} ...", file=sys.stderr, flush=True)
        loads[name] = load_study(frame, budget)
    print_extrapolation(loads, "Extrapolation in load: trained at queue depth x numjobs <= 32, scored above")
    print("\nThe load rule fed measured IOPS (no model): IOPS MRE above 32 in flight")
    print("| device | points | flat plateau (served) | hyperbolic 1/X = a + b/L |")
    print("|---|---|---|---|")
    for name, frame in frames.items():
        oracle = oracle_load_study(frame)
        if oracle is not None:
            print(f"| {name} | {oracle['points']:.0f} | {oracle['flat']:.1%} | {oracle['hyperbolic']:.1%} |")
    if sizes:
        print_extrapolation(
            {name: size_study(frame, budget) for name, frame in frames.items()},
            "Extrapolation in size: trained at <= 128 KiB, scored at 256 KiB - 1 MiB",
        )


def main() -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", help="evaluate this existing device instead of the fio-plot set")
    parser.add_argument("--home", type=Path, help="data directory of --device")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=30.0, help="tuning seconds per training")
    parser.add_argument("--only", help="substring: only fio-plot devices whose name contains it "
                        "(several, comma-separated: any of them)")
    parser.add_argument("--sampling-only", action="store_true")
    parser.add_argument("--no-sampling", action="store_true")
    parser.add_argument("--later", help="with --device: a later sweep of the same workloads, to score on")
    parser.add_argument(
        "--consistency-only", action="store_true", help="only the tail-consistency table (seconds)"
    )
    parser.add_argument("--transfer-only", action="store_true", help="the same as --study transfer")
    parser.add_argument("--transfer-seeds", type=int, default=3,
                        help="random draws per K in the transfer study")
    parser.add_argument("--draws", type=int, default=1,
                        help="tail study (also with --leave-one-device-out): draws of the outer folds to "
                        "average (the first is the usual one)")
    parser.add_argument("--leave-one-device-out", action="store_true",
                        help="tail study: the tail guard's threshold chosen on the other devices, "
                        "against a tuned plain XGBoost and CART (bench/tail_lodo.py)")
    parser.add_argument("--lodo-runs", type=Path, nargs="+",
                        help="with --leave-one-device-out: re-judge the predictions saved by a run with "
                        "--json (its .npz; several: a run split by --only) without training again")
    parser.add_argument("--json", type=Path, help="also write the reports to this JSON file")
    parser.add_argument("--core", action="store_true",
                        help="only the nested-CV MRE of IOPS, bandwidth, mean latency and p99 per device")
    parser.add_argument("--compare", type=Path, help="with --core: a --json of an earlier --core run, "
                        "printed beside with the change in points")
    parser.add_argument(
        "--study",
        choices=("extrapolation", "tail", "transfer"),
        help="only this study of issue 13: train at <= 32 I/Os in flight (and, with --device, "
        "sizes <= 128 KiB) and score beyond; p50..p99.9 vs a plain XGBoost; or a new device "
        "from K points of another",
    )
    args = parser.parse_args()
    if args.lodo_runs:
        from bench.tail_lodo import lodo_table, load_runs, print_lodo

        print_lodo(lodo_table(load_runs(*map(str, args.lodo_runs))))
        return

    frames: dict[str, pd.DataFrame] = {}
    if args.device:
        if not args.home:
            parser.error("--device needs --home")
        frames[args.device] = DataDir(args.home).catalog.measurements(args.device)
    else:
        datadir = DataDir(tempfile.mkdtemp(prefix="ssdpredict-bench-"))
        for folder in fio_plot_devices():
            if args.only and not any(part in folder.name for part in args.only.split(",")):
                continue
            frames[folder.name] = ingest_folder(datadir, folder.name, folder)
    if args.core:
        reports = []
        for name, frame in frames.items():
            print(f"core accuracy: {name} ...", file=sys.stderr, flush=True)
            reports.append(core_row(name, frame, args.folds, args.budget))
        print_core(reports, json.loads(args.compare.read_text()) if args.compare else None)
        if args.json:
            args.json.write_text(json.dumps(reports, indent=1, default=str))
        return
    print_tail_consistency(frames)
    if args.consistency_only:
        return
    if args.transfer_only or args.study == "transfer":
        transfer_study({n: distinct_workloads(f) for n, f in frames.items()}, TRANSFER_FIT,
                       seeds=args.transfer_seeds)
        return
    if args.study == "tail" and args.leave_one_device_out:
        from bench.physics_study import TAIL_CANDIDATES
        from bench.tail_lodo import print_lodo, tail_lodo_study

        print_lodo(tail_lodo_study(frames, args.budget, args.folds, TAIL_CANDIDATES,
                                   save=str(args.json.with_suffix(".npz")) if args.json else None,
                                   draws=args.draws))
        return
    if args.study:
        run_study(args.study, frames, args.budget, args.folds, sizes=bool(args.device), draws=args.draws)
        return
    if args.later:
        if not args.device:
            parser.error("--later needs --device")
        later = DataDir(args.home).catalog.measurements(args.later)
        later_sweep_study(args.device, frames[args.device], args.later, later, args.budget)
        return
    reports = []
    if not args.sampling_only:
        for name, frame in frames.items():
            print(f"evaluating {name} ({len(frame)} points) ...", file=sys.stderr, flush=True)
            reports.append(accuracy_row(name, frame, args.folds, args.budget))
        print_table(reports)
        print_regions(reports)
        print_physics(reports)
        if args.json:
            args.json.write_text(json.dumps(reports, indent=1, default=str))
    if not args.no_sampling:
        name, frame = next(iter(frames.items()))
        frame = distinct_workloads(frame)
        sizes = [n for n in (16, 24, 32, 48, 64, 96, 128) if n <= len(frame) // 2]
        sampling_study(name, frame, sizes)


if __name__ == "__main__":
    main()
