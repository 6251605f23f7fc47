"""The studies of issue 13 for ``bench/accuracy.py``: extrapolation and the tail.

* :func:`load_study` trains where outstanding I/O (queue depth x numjobs) <= 32 and
  scores the points above it; :func:`size_study` trains on sizes <= 128 KiB and scores
  256 KiB - 1 MiB (it needs a sweep that varies the size: ``--device D --home H``).
  Both also count the answers that break a law over a dense grid
  (:func:`modeling.training.physics_check.law_violations`).
* :func:`tail_study` scores p50/p90/p99/p99.9 on the same folds as a plain XGBoost
  on the log-scaled features, fitted to the log of each percentile.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from modeling.estimators.families import make_estimator
from modeling.features import compute_features
from modeling.training.fit import fit_device_model, median_by_workload
from modeling.training.physics_check import dense_grid, law_violations
from modeling.training.selection import make_candidate, cv_folds, relative_errors
from modeling.training.tail_floor import grid_neighbours, loo_geometric_mean, same_load_peers, tail_jumps
from modeling.serving.physics.limits import PhysicsLimits
from modeling.serving.physics.extrapolation import stretch
from modeling.workload import KIB, METRICS, MIB, PERCENTILE_METRICS, WORKLOAD_FIELDS
from modeling.workload_matrix import outstanding_io, workload_matrix

EXTRAPOLATED = ("iops", "bandwidth_mib_s", "latency_mean_us")
EXTRAPOLATION_TARGETS = {"iops": 0.15, "bandwidth_mib_s": 0.15, "latency_mean_us": 0.20}
TAIL = ("latency_p50_us", "latency_p90_us", "latency_p99_us", "latency_p99_9_us")


def _split_study(frame: pd.DataFrame, train: np.ndarray, budget: float) -> dict[str, object]:
    """Train on the ``train`` rows, score the others; and the law violations of that model."""
    model, _ = fit_device_model(frame.loc[train], time_budget_s=budget)
    test = frame.loc[~train]
    out = model.predict_matrix(workload_matrix(test), metrics=list(EXTRAPOLATED))
    mre = {m: float(relative_errors(out[m][0], test[m].to_numpy(float)).mean()) for m in EXTRAPOLATED}
    return {
        "n_train": int(train.sum()),
        "n_test": int(len(test)),
        "mre": mre,
        "flagged": float(np.mean(out["iops"][3])),
        "violations": law_violations(model, dense_grid()),
    }


def load_study(frame: pd.DataFrame, budget: float, max_outstanding: int = 32) -> dict[str, object] | None:
    """Train at outstanding I/O <= ``max_outstanding``, score above; None without such points."""
    train = outstanding_io(workload_matrix(frame)) <= max_outstanding
    if train.all() or train.sum() < 8:
        return None
    return _split_study(frame, train, budget)


def size_study(frame: pd.DataFrame, budget: float) -> dict[str, object] | None:
    """Train on request sizes <= 128 KiB, score 256 KiB - 1 MiB; None without such points."""
    size = frame["request_size"].to_numpy(float)
    keep = (size <= 128 * KIB) | ((size >= 256 * KIB) & (size <= MIB))
    frame = frame.loc[keep]
    train = frame["request_size"].to_numpy(float) <= 128 * KIB
    if train.all() or train.sum() < 8:
        return None
    return _split_study(frame, train, budget)


def oracle_load_study(frame: pd.DataFrame, max_outstanding: int = 32) -> dict[str, float] | None:
    """The load rule fed measured IOPS instead of a model: what the law alone costs.

    Each point above ``max_outstanding`` is answered from the measured IOPS at the load
    the serving path evaluates instead (:func:`modeling.serving.physics.extrapolation.stretch` of the
    limits of the points at or below it) by two rules: ``flat``, the plateau the serving
    path holds, and ``hyperbolic``, ``1/X = a + b/L`` through that point and the one a
    measured depth below (X = Xmax L / (L + K); flat where it does not saturate).
    IOPS MRE of each; None when the points needed are missing.
    """
    w, ys, _ = median_by_workload(workload_matrix(frame), {"iops": frame["iops"].to_numpy(float)})
    oio = outstanding_io(w)
    train = oio <= max_outstanding
    if train.all() or train.sum() < 8:
        return None
    limits = PhysicsLimits.measured(w[train], None)
    measured = {tuple(r): x for r, x in zip(w[train].tolist(), ys["iops"][train].tolist(), strict=True)}
    depths = sorted(limits.depths)
    qd = WORKLOAD_FIELDS.index("queue_depth")
    errs: dict[str, list[float]] = {"flat": [], "hyperbolic": []}
    for row, x in zip(w[~train], ys["iops"][~train], strict=True):
        ev = stretch(row[None, :], limits).w_eval[0]
        x2 = measured.get(tuple(ev.tolist()))
        if x2 is None:
            continue
        at = outstanding_io(row[None, :])[0]
        l2 = outstanding_io(ev[None, :])[0]
        errs["flat"].append(abs(x2 - x) / x)
        below = [d for d in depths if d < ev[qd]]
        lower = ev.copy()
        lower[qd] = below[-1] if below else ev[qd]
        x1 = measured.get(tuple(lower.tolist()))
        guess = x2
        if below and x1 is not None:
            l1 = outstanding_io(lower[None, :])[0]
            b = (1 / x1 - 1 / x2) / (1 / l1 - 1 / l2)
            a = 1 / x2 - b / l2
            guess = 1 / (a + b / at) if a > 0 and b > 0 else x2
        errs["hyperbolic"].append(abs(guess - x) / x)
    if not errs["flat"]:
        return None
    return {rule: float(np.mean(e)) for rule, e in errs.items()} | {"points": float(len(errs["flat"]))}


def print_extrapolation(rows: dict[str, dict[str, object] | None], title: str) -> None:
    """The extrapolation table (markdown)."""
    print(f"\n{title} (targets: IOPS/bandwidth MRE <= 15 %, mean latency <= 20 %, 0 law violations)")
    print("| device | train / test points | IOPS | bandwidth | lat mean | law violations (dense grid) |")
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        if r is None:
            print(f"| {name} | no points beyond the split | - | - | - | - |")
            continue
        mre, bad = r["mre"], r["violations"]
        assert isinstance(mre, dict) and isinstance(bad, dict)
        broken = ", ".join(f"{k} {v}" for k, v in bad.items() if v) or "0"
        print(
            f"| {name} | {r['n_train']} / {r['n_test']} | {mre['iops']:.1%} | {mre['bandwidth_mib_s']:.1%} "
            f"| {mre['latency_mean_us']:.1%} | {broken} |",
            flush=True,
        )


TAIL_CANDIDATES = [
    make_candidate("extended", "xgboost", n_estimators=300, max_depth=6, learning_rate=0.05, subsample=0.8),
    make_candidate("extended", "extra_trees", n_estimators=60, min_samples_leaf=3, loss="relative"),
]
"""The product's two main tail families, untuned: the study must finish on a shared machine."""


def tail_workloads(
    frame: pd.DataFrame,
) -> tuple[np.ndarray, dict[str, np.ndarray], pd.DataFrame, np.ndarray] | None:
    """The distinct workloads at their median over repeats, their metrics, as a frame to train on,
    and their extended features; None when the measurements hold no percentiles besides p99.

    The tail studies' folds split distinct workloads, each trained on at its median.
    """
    if not all(m in frame.columns for m in TAIL) or frame[list(TAIL)].isna().any().any():
        return None
    names = [*METRICS, *PERCENTILE_METRICS]
    w, ys, _ = median_by_workload(workload_matrix(frame), {m: frame[m].to_numpy(float) for m in names})
    distinct = pd.DataFrame(w, columns=list(WORKLOAD_FIELDS)).assign(**ys)
    return w, ys, distinct, compute_features(w, "extended")


def tail_study(
    frame: pd.DataFrame, budget: float, folds: int = 5, draws: int = 1
) -> dict[str, object] | None:
    """Per percentile, the MRE of the product's model and of a plain XGBoost, same folds.

    Both are trained inside each outer fold on the same distinct workloads (nested CV:
    the product's training runs its own inner CV there) and scored against each
    workload's median over repeats.  Also the 90 % interval coverage of each percentile
    and :func:`tail_predictability`.  None when the measurements hold no percentiles
    besides p99.  With ``draws`` > 1 the outer folds are drawn that many times (the first
    draw is the single-draw study's) and the errors are averaged, with each metric's
    per-draw range: on 98 workloads one fold draw moves a p99 MRE by several points.
    """
    found = tail_workloads(frame)
    if found is None:
        return None
    w, ys, distinct, X = found
    ours = {m: np.full((draws, len(w)), np.nan) for m in TAIL}
    inside = {m: np.zeros((draws, len(w)), dtype=bool) for m in TAIL}
    plain = {m: np.full((draws, len(w)), np.nan) for m in TAIL}
    for d in range(draws):
        labels = np.arange(len(w)) if d == 0 else np.random.default_rng(d).permutation(len(w))
        for train, test in cv_folds(labels, folds):
            model, _ = fit_device_model(
                distinct.iloc[train], time_budget_s=budget, candidates=TAIL_CANDIDATES, regions=False
            )
            out = model.predict_matrix(w[test], metrics=list(TAIL))
            for m in TAIL:
                ours[m][d, test] = out[m][0]
                inside[m][d, test] = (out[m][1] <= ys[m][test]) & (ys[m][test] <= out[m][2])
                xgb = make_estimator("xgboost", {}).fit(X[train], ys[m][train])
                plain[m][d, test] = xgb.predict(X[test])
    errors = {
        who: {m: relative_errors(pred[m], ys[m][None, :]) for m in TAIL}
        for who, pred in (("ours", ours), ("plain_xgboost", plain))
    }
    jumps = tail_jumps(w, ys["latency_p99_us"], ys["latency_mean_us"])
    p99 = "latency_p99_us"
    return {
        "draws": draws,
        "mre": {
            m: {
                "ours": float(errors["ours"][m].mean()),
                "plain_xgboost": float(errors["plain_xgboost"][m].mean()),
                "coverage": float(inside[m].mean()),
                "ours_range": [float(v) for v in np.sort(errors["ours"][m].mean(axis=1))[[0, -1]]],
                "plain_xgboost_range": [
                    float(v) for v in np.sort(errors["plain_xgboost"][m].mean(axis=1))[[0, -1]]
                ],
            }
            for m in TAIL
        },
        # the p99 off and on its jumps (see tail_predictability): the model's share and the data's
        "p99_split": {
            f"{who}_{part}": float(errors[who][p99][:, mask].mean()) if mask.any() else None
            for who in ("ours", "plain_xgboost")
            for part, mask in (("consistent", ~jumps), ("jumps", jumps))
        },
        "predictability": tail_predictability(w, ys),
    }


def tail_predictability(w: np.ndarray, ys: dict[str, np.ndarray]) -> dict[str, float]:
    """Why a device's p99 can or cannot be predicted from the workload, from the data alone.

    * ``knee``: share of workloads whose p99 is over 5x their p90 -- the p99 sits on the
      jump of a bimodal distribution (a slow mode of about 1 % of the I/Os), where a
      slightly larger slow share moves it tenfold;
    * ``below_mean``: share whose measured p99 is below the mean latency (the slow mode
      drags the mean above the p99; the served p99 >= mean cannot follow them);
    * ``jumps``: share of workloads at a step of the p99 (over 4x to a grid neighbour or a
      same-load peer while the mean latencies are within 2x,
      :func:`modeling.training.tail_floor.tail_jumps`);
    * ``neighbour_mre`` / ``neighbour_r2``: the error of the best smooth interpolation an
      oracle could make -- each workload's p99 read off the geometric mean of its measured
      neighbours (one step of queue depth or numjobs, all else equal) -- and the share of
      the variance of log p99 it explains.  A model of the workload is a smooth function
      of it, so it cannot do much better than this on points it has not seen;
    * ``same_load_mre``: the same with the workload's same-load peers (the other splits of
      its queue depth x numjobs), where the p99 follows the load; and
      ``same_load_mre_consistent``, that error off the jumps.
    """
    p99, p90, mean = ys["latency_p99_us"], ys["latency_p90_us"], ys["latency_mean_us"]
    guess = loo_geometric_mean(p99, grid_neighbours(w))
    ok = np.isfinite(guess)
    resid = np.log(guess[ok]) - np.log(p99[ok])
    peers = loo_geometric_mean(p99, same_load_peers(w))
    jumps = tail_jumps(w, p99, mean)
    has_peers, calm = np.isfinite(peers), np.isfinite(peers) & ~jumps
    return {
        "knee": float(np.mean(p99 > 5 * p90)),
        "below_mean": float(np.mean(p99 < mean)),
        "jumps": float(np.mean(jumps)),
        "neighbour_mre": float(relative_errors(guess[ok], p99[ok]).mean()),
        "neighbour_r2": float(1 - resid.var() / np.log(p99[ok]).var()),
        "same_load_mre": float(relative_errors(peers[has_peers], p99[has_peers]).mean()),
        "same_load_mre_consistent": float(relative_errors(peers[calm], p99[calm]).mean()),
    }


def print_tail(rows: dict[str, dict[str, object] | None]) -> None:
    """The tail table (markdown): per percentile, ours vs plain XGBoost; then why the p99 is hard."""
    draws = max((r.get("draws", 1) for r in rows.values() if r is not None), default=1)
    print("\nTail: MRE per percentile, the product's model (plain XGBoost on log features), same folds")
    if draws > 1:
        print(f"(mean over {draws} draws of the outer folds; [the product's lowest-highest draw])")
    print("| device | p50 | p90 | p99 | p99.9 | p99 gain vs plain | p99 target |", end="")
    print(" coverage p50/p90/p99/p99.9 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        if r is None:
            print(f"| {name} | no percentiles stored | | | | | | |")
            continue
        mre = r["mre"]
        assert isinstance(mre, dict)
        cells = [f"{mre[m]['ours']:.1%} ({mre[m]['plain_xgboost']:.1%})" for m in TAIL]
        if r.get("draws", 1) > 1:  # each draw's range beside the mean over draws
            cells = [
                f"{c} [{mre[m]['ours_range'][0]:.1%}-{mre[m]['ours_range'][1]:.1%}]"
                for c, m in zip(cells, TAIL, strict=True)
            ]
        p99 = mre["latency_p99_us"]
        gain = 1 - p99["ours"] / p99["plain_xgboost"]
        # issue 13's two targets: the arrays' tail is consistent (p99 <= 12 %); the SATA
        # SSDs' is bimodal, so there the target is beating plain XGBoost by 25 %
        array = "RAID" in name.upper() or name.startswith("P420i")
        met = p99["ours"] <= 0.12 if array else gain >= 0.25
        cover = "/".join(f"{mre[m]['coverage']:.0%}" for m in TAIL)
        print(f"| {name} | {' | '.join(cells)} | {gain:+.0%} | {'met' if met else 'missed'} | {cover} |")
    print("\nWhy the p99 is or is not predictable (see tail_predictability)")
    print("| device | p99 > 5x p90 (knee) | p99 < mean |", end="")
    print(" oracle neighbour interpolation: p99 MRE | R² of log p99 |", end="")
    print(" same-load peers: p99 MRE (off the jumps) |", end="")
    print(" p99 jumps > 4x, mean < 2x | p99 MRE off / on the jumps: ours (plain) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        if r is None:
            continue
        t, split = r["predictability"], r["p99_split"]
        assert isinstance(t, dict) and isinstance(split, dict)

        def pct(v: float | None) -> str:
            return "-" if v is None else f"{v:.1%}"

        print(
            f"| {name} | {t['knee']:.0%} | {t['below_mean']:.0%} | {t['neighbour_mre']:.1%} |"
            f" {t['neighbour_r2']:.2f} | {t['same_load_mre']:.1%} ({t['same_load_mre_consistent']:.1%}) |"
            f" {t['jumps']:.0%} | {pct(split['ours_consistent'])} / {pct(split['ours_jumps'])}"
            f" ({pct(split['plain_xgboost_consistent'])} / {pct(split['plain_xgboost_jumps'])}) |",
            flush=True,
        )
