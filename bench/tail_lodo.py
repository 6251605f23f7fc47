"""The tail, leave one device out: the guard's threshold judged on devices it was not chosen on.

``bench/accuracy.py --study tail --leave-one-device-out`` (issue 27).  For every shared
device, nested cross-validation over its distinct workloads (outer folds; the product's
training runs its own inner CV inside each), and on the same outer folds:

* **the product's rules** -- the training with the tail guard recording its comparison
  but always keeping the rules (``tail_guard=-inf``), with the guard's paired advantage
  (standard errors over the plain model, on the inner folds) per percentile and fold;
* **the fallback** -- the plain log-target XGBoost the guard would serve
  (:func:`modeling.training.tail_guard.plain_selection`, with its CV multiplier);
* **plain XGBoost** -- log features, log target, depth tuned by inner CV, raw: the baseline;
* **CART** -- one tree of the log, leaf size and depth tuned by inner CV, raw: the published method.

The product served at a guard threshold ``t`` is, per percentile and outer fold, the rules'
prediction where the advantage is ``>= t`` and the fallback's elsewhere, put in ladder order
(:func:`modeling.serving.physics.laws.order_percentiles`).  Leave one device out: each device
is scored at the threshold with the lowest mean p99 error over the *other* devices, so no
device judges a rule it helped choose.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pandas as pd

from bench.physics_study import TAIL, tail_workloads
from modeling.estimators.families import make_estimator
from modeling.serving.physics.laws import order_percentiles
from modeling.training.fit import fit_device_model
from modeling.training.selection import Candidate, cv_folds, make_candidate, relative_errors, select
from modeling.training.tail_guard import TAIL_GUARDS, plain_selection

THRESHOLDS = (-math.inf, 0.0, 0.5, 1.0, 2.0, 3.0, math.inf)
"""Guard thresholds judged (paired SEs; -inf: the rules always, inf: the plain model always)."""
CART_GRID: tuple[Candidate, ...] = tuple(
    make_candidate("extended", "cart", min_samples_leaf=leaf) for leaf in (1, 3, 5, 8)
)


def _tuned_raw(
    grid: list[Candidate], X: np.ndarray, w_tr: np.ndarray, y_tr: np.ndarray, x_te: np.ndarray, folds: int
) -> np.ndarray:
    """The grid's lowest inner-CV configuration refitted on the training rows, raw predictions."""
    sel = select(w_tr, y_tr, cv_folds(np.arange(len(y_tr)), folds), grid, None,
                 blend=False, tune=False, tolerance=0.0)
    best = sel.best[0]
    return make_estimator(best.kind, best.kwargs).fit(X, y_tr).predict(x_te)


def device_tail_runs(frame: pd.DataFrame, budget: float, candidates: list[Candidate] | None,
                     folds: int = 5) -> dict[str, object] | None:
    """One device's outer-fold predictions of every contender (None: no percentiles stored)."""
    found = tail_workloads(frame)
    if found is None:
        return None
    w, ys, distinct, X = found
    n = len(w)
    rules = {m: np.full(n, np.nan) for m in (*TAIL, "latency_mean_us")}
    fallback = {m: np.full(n, np.nan) for m in TAIL}
    plain = {m: np.full(n, np.nan) for m in TAIL}
    cart = {m: np.full(n, np.nan) for m in TAIL}
    z = {m: np.full(n, np.nan) for m in TAIL}  # the guard's advantage of each point's fold
    for train, test in cv_folds(np.arange(n), folds):
        model, report = fit_device_model(distinct.iloc[train], time_budget_s=budget, candidates=candidates,
                                         regions=candidates is None, tail_guard=-math.inf)
        out = model.predict_matrix(w[test], metrics=[*TAIL, "latency_mean_us"])
        for m in rules:
            rules[m][test] = out[m][0]
        inner = cv_folds(np.arange(len(train)), folds)
        for m in TAIL:
            z[m][test] = report["metrics"][m]["tail_guard"]["advantage_se"]
            y_tr = ys[m][train]
            sel = plain_selection(w[train], y_tr, inner, None)
            best = sel.best[0]
            raw = make_estimator(best.kind, best.kwargs).fit(X[train], y_tr).predict(X[test])
            plain[m][test] = raw
            fallback[m][test] = raw * sel.scale
            cart[m][test] = _tuned_raw(list(CART_GRID), X[train], w[train], y_tr, X[test], folds)
    return {"ys": {m: ys[m] for m in TAIL}, "rules": rules, "fallback": fallback, "plain": plain,
            "cart": cart, "z": z}


def served_at(run: dict[str, object], threshold: float | dict[str, float]) -> dict[str, np.ndarray]:
    """The product's predictions with the guard at ``threshold`` (one, or per percentile), in ladder order."""
    rules, fallback, z = run["rules"], run["fallback"], run["z"]
    assert isinstance(rules, dict) and isinstance(fallback, dict) and isinstance(z, dict)
    at = threshold if isinstance(threshold, dict) else dict.fromkeys(TAIL, threshold)
    ladder = {m: np.where(z[m] >= at[m], rules[m], fallback[m]) for m in TAIL}
    ladder["latency_mean_us"] = rules["latency_mean_us"].copy()
    order_percentiles(ladder)
    return {m: ladder[m] for m in TAIL}


def _mre(pred: np.ndarray, y: np.ndarray) -> float:
    return float(relative_errors(pred, y).mean())


def lodo_table(runs: dict[str, dict[str, object]]) -> dict[str, dict]:
    """Per device: each percentile's threshold chosen on the others, and every contender's MRE.

    A percentile's threshold is the one with the lowest mean error of that percentile over
    the other devices (every percentile at that threshold; ties go to the stronger guard);
    the device is then scored with the chosen thresholds together, in ladder order.
    """
    scores = {
        name: {t: {m: _mre(served_at(run, t)[m], run["ys"][m]) for m in TAIL} for t in THRESHOLDS}
        for name, run in runs.items()
    }
    table: dict[str, dict] = {}
    for name, run in runs.items():
        others = [o for o in runs if o != name] or [name]
        chosen = {
            m: min(THRESHOLDS, key=lambda t, m=m: (np.mean([scores[o][t][m] for o in others]), -t))
            for m in TAIL
        }
        ys = run["ys"]
        served = served_at(run, chosen)
        table[name] = {
            "threshold": chosen,
            "product": {m: _mre(served[m], ys[m]) for m in TAIL},
            "default": {m: _mre(v, ys[m]) for m, v in served_at(run, dict(TAIL_GUARDS)).items()},
            "rules": scores[name][-math.inf],
            "plain_xgboost": {m: _mre(run["plain"][m], ys[m]) for m in TAIL},
            "cart": {m: _mre(run["cart"][m], ys[m]) for m in TAIL},
            "by_threshold": {t: scores[name][t] for t in THRESHOLDS},
        }
    return table


def save_runs(runs: dict[str, dict[str, object]], path: str) -> None:
    """Every contender's outer-fold predictions, to re-judge the rules without training again (npz)."""
    flat = {f"{name}|{part}|{m}": np.asarray(v) for name, run in runs.items()
            for part, by in run.items() for m, v in by.items()}
    np.savez_compressed(path, **flat)


def load_runs(path: str) -> dict[str, dict[str, object]]:
    runs: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    with np.load(path) as data:
        for key in data.files:
            name, part, m = key.split("|")
            runs.setdefault(name, {}).setdefault(part, {})[m] = data[key]
    return runs  # type: ignore[return-value]


def tail_lodo_study(frames: dict[str, pd.DataFrame], budget: float, folds: int,
                    candidates: list[Candidate] | None, save: str | None = None) -> dict[str, dict]:
    runs = {}
    for name, frame in frames.items():
        print(f"tail, leave one device out: {name} ...", file=sys.stderr, flush=True)
        run = device_tail_runs(frame, budget, candidates, folds)
        if run is not None:
            runs[name] = run
    if save:
        save_runs(runs, save)
    return lodo_table(runs)


def _t(t: float) -> str:
    return {-math.inf: "rules", math.inf: "plain"}.get(t, f"{t:g} SE")


def print_lodo(table: dict[str, dict]) -> None:
    """Markdown: per device and percentile, the product (LODO thresholds), plain XGBoost, CART."""
    short = {"latency_p50_us": "p50", "latency_p90_us": "p90", "latency_p99_us": "p99",
             "latency_p99_9_us": "p99.9"}
    p99 = "latency_p99_us"
    print("\nTail, leave one device out: MRE per percentile -- product (each percentile's guard threshold"
          " chosen on the other devices) / plain XGBoost tuned / CART tuned")
    print("| device | thresholds p50/p90/p99/p99.9 | " + " | ".join(short[m] for m in TAIL)
          + " | p99 product vs best baseline |")
    print("|---|---|" + "---|" * len(TAIL) + "---|")
    losses = {m: 0 for m in TAIL}
    for name, r in table.items():
        cells = [f"{r['product'][m]:.1%} / {r['plain_xgboost'][m]:.1%} / {r['cart'][m]:.1%}" for m in TAIL]
        for m in TAIL:
            losses[m] += r["product"][m] > min(r["plain_xgboost"][m], r["cart"][m])
        best = min(r["plain_xgboost"][p99], r["cart"][p99])
        ts = "/".join(_t(r["threshold"][m]) for m in TAIL)
        print(f"| {name} | {ts} | {' | '.join(cells)} | {r['product'][p99] / best:.2f}x |")
    n = len(table)
    for m in TAIL:
        ours = np.mean([r["product"][m] for r in table.values()])
        plain = np.mean([r["plain_xgboost"][m] for r in table.values()])
        default = np.mean([r["default"][m] for r in table.values()])
        print(f"mean {short[m]} over {n} devices: product {ours:.1%} (at the shipped default {default:.1%}),"
              f" plain XGBoost {plain:.1%} ({ours / plain:.2f}x);"
              f" loses to the best baseline on {losses[m]} of {n}")
    print("(target: p99 no worse than plain XGBoost on every device, mean p99 <= 0.85x plain XGBoost's)")
    print("\nMRE by guard threshold, p99 (p99.9) -- the rules always ... the plain model always;"
          " shipped defaults: " + ", ".join(f"{short[m]} {_t(t)}" for m, t in TAIL_GUARDS.items()))
    print("| device | " + " | ".join(_t(t) for t in THRESHOLDS) + " |")
    print("|---|" + "---|" * len(THRESHOLDS))
    for name, r in table.items():
        cells = [f"{r['by_threshold'][t][p99]:.1%} ({r['by_threshold'][t]['latency_p99_9_us']:.1%})"
                 for t in THRESHOLDS]
        print(f"| {name} | " + " | ".join(cells) + " |")
