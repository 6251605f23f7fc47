"""The tail, leave one device out: the guard's threshold judged on devices it was not chosen on.

``bench/accuracy.py --study tail --leave-one-device-out`` (issue 27).  For every shared
device, nested cross-validation over its distinct workloads (outer folds; the product's
training runs its own inner CV inside each), and on the same outer folds:

* **the product's rules** -- the training with the tail guard recording its comparison
  but always keeping the rules (``tail_guard=-inf``), with the guard's paired advantage
  (standard errors over the plain model, on the inner folds) per percentile and fold;
* **the fallback** -- the plain log-target XGBoost the guard would serve
  (:func:`modeling.training.tail_guard.plain_selection`), with its CV multiplier or without
  (then it is the baseline below);
* **plain XGBoost** -- log features, log target, depth tuned by inner CV, raw: the baseline;
* **CART** -- one tree of the log, leaf size and depth tuned by inner CV, raw: the published method.

The product served at a guard setting ``(t, multiplier)`` is, per percentile and outer fold,
the rules' prediction where the advantage over that fallback is ``>= t`` and the fallback's
elsewhere, put in ladder order (:func:`modeling.serving.physics.laws.order_percentiles`).
Leave one device out: each device is scored, per percentile, at the setting with the lowest
mean error of that percentile over the *other* devices, so no device judges a rule it helped
choose.  With ``draws`` > 1 the outer folds are drawn that many times (the first draw is the
single-draw study's) and every error is the mean over the draws.
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
from modeling.workload_matrix import region_codes
from modeling.training.selection import Candidate, cv_folds, make_candidate, relative_errors, select
from modeling.training.tail_guard import (
    BLEND_WEIGHTS, FALLBACK_MULTIPLIER, TAIL_BLEND, TAIL_GUARDS, TAIL_ONE_SE, blend, one_se_weight,
    plain_selection,
)

THRESHOLDS = (-math.inf, 0.0, 0.5, 1.0, 2.0, 3.0, math.inf)
"""Guard thresholds judged (paired SEs; -inf: the rules always, inf: the plain model always)."""
ONE_SE = 2
"""A setting's blend mode: the one-SE rule's weight (:func:`~modeling.training.tail_guard.one_se_weight`;
False: the rules or the fallback, True: :func:`~modeling.training.tail_guard.choose_weight`'s)."""
SETTINGS = tuple((t, m, b) for b in (False, True) for t in THRESHOLDS for m in (True, False)) + tuple(
    (-math.inf, m, ONE_SE) for m in (True, False)
)
"""Guard settings judged: each threshold with the fallback's CV multiplier and without, the
rules alone or blended with the fallback (:func:`modeling.training.tail_guard.choose_weight`);
and the one-SE rule's blend (no threshold), with the multiplier and without."""
Setting = tuple[float, bool, int]
KINDS = {True: "scaled", False: "raw"}
"""The fallback with its CV multiplier, without."""
FOLD = "fold"
"""The run's part that holds each point's outer fold (numbered over the draws; -1: not recorded)."""
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
                     folds: int = 5, draws: int = 1) -> dict[str, object] | None:
    """One device's outer-fold predictions of every contender (None: no percentiles stored).

    With ``draws`` > 1, each draw's points follow the previous ones (every array is
    ``draws`` x the workloads long, the measured values repeated).
    """
    found = tail_workloads(frame)
    if found is None:
        return None
    w, ys, distinct, X = found
    inner: dict[str, np.ndarray] = {}
    parts = [_one_draw(w, ys, distinct, X, budget, candidates, folds, d, inner) for d in range(draws)]
    run = {key: {m: np.concatenate([p[key][m] for p in parts]) for m in parts[0][key]} for key in parts[0]}
    run["ys"] = {m: np.tile(ys[m], draws) for m in TAIL}
    run["region"] = {m: np.tile(region_codes(w), draws) for m in TAIL}
    run["meta"] = {"draws": np.array(draws)}
    run["inner"] = inner
    return run


def _one_draw(w: np.ndarray, ys: dict[str, np.ndarray], distinct: pd.DataFrame, X: np.ndarray, budget: float,
              candidates: list[Candidate] | None, folds: int, draw: int, inner_oof: dict[str, np.ndarray]
              ) -> dict[str, dict[str, np.ndarray]]:
    """One fold draw's outer predictions; ``inner_oof`` gets each outer fold's guard comparison.

    Per outer fold ``f`` (numbered over the draws: ``draw * folds + f``, :data:`FOLD` per point)
    and percentile, the inner-CV rows and out-of-fold predictions the guard compared
    (``fit_device_model(guard_oof=...)``), under ``"{f}/{metric}/{part}"``.
    """
    n = len(w)
    fold_of = {m: np.full(n, -1) for m in TAIL}
    rules = {m: np.full(n, np.nan) for m in (*TAIL, "latency_mean_us")}
    # per point, of its outer fold: the guard's advantage over the plain model with its
    # multiplier (z) and without (z_raw), and the inner-CV MREs it compared
    keys = ("fallback", "plain", "cart", "z", "z_raw", "rules_cv", "plain_cv", *_blend_keys())
    out: dict[str, dict[str, np.ndarray]] = {k: {m: np.full(n, np.nan) for m in TAIL} for k in keys}
    labels = np.arange(n) if draw == 0 else np.random.default_rng(draw).permutation(n)
    for f, (train, test) in enumerate(cv_folds(labels, folds)):
        guard_oof: dict[str, dict] = {}
        model, report = fit_device_model(distinct.iloc[train], time_budget_s=budget, candidates=candidates,
                                         regions=candidates is None, tail_guard=-math.inf,
                                         guard_oof=guard_oof)
        fold = draw * folds + f
        for m, parts in guard_oof.items():
            fold_of[m][test] = fold
            for part, v in parts.items():
                inner_oof[f"{fold}/{m}/{part}"] = np.asarray(v)
        pred = model.predict_matrix(w[test], metrics=[*TAIL, "latency_mean_us"])
        for m in rules:
            rules[m][test] = pred[m][0]
        inner = cv_folds(np.arange(len(train)), folds)
        for m in TAIL:
            guard = report["metrics"][m]["tail_guard"]
            out["z"][m][test] = guard["advantage_scaled_se"]
            out["z_raw"][m][test] = guard["advantage_raw_se"]
            out["rules_cv"][m][test] = guard["rules_cv_mre"]
            out["plain_cv"][m][test] = guard["plain_cv_mre"]
            for kind, by in guard["blends"].items():
                for wt, (mre, z) in by.items():
                    out[f"cv:{kind}:{wt}"][m][test] = mre
                    out[f"z:{kind}:{wt}"][m][test] = z
            y_tr = ys[m][train]
            sel = plain_selection(w[train], y_tr, inner, None)
            best = sel.best[0]
            raw = make_estimator(best.kind, best.kwargs).fit(X[train], y_tr).predict(X[test])
            out["plain"][m][test] = raw
            out["fallback"][m][test] = raw * sel.scale
            out["cart"][m][test] = _tuned_raw(list(CART_GRID), X[train], w[train], y_tr, X[test], folds)
    return {"rules": rules, **out, FOLD: fold_of}


def _blend_keys() -> list[str]:
    """The run's parts that hold each blend's inner-CV MRE and advantage (per fallback and weight)."""
    return [f"{part}:{kind}:{wt:g}" for part in ("cv", "z") for kind in KINDS.values()
            for wt in (*BLEND_WEIGHTS, 1.0)]


def _setting(value: float | tuple) -> Setting:
    """A threshold, ``(threshold, multiplier)`` or ``(threshold, multiplier, blends)``."""
    if not isinstance(value, tuple):
        return (value, True, False)
    return (*value, False) if len(value) == 2 else value  # type: ignore[return-value]


def weights_at(run: dict[str, object], m: str, t: float, multiplier: bool, blends: bool) -> np.ndarray:
    """Per point, the rules' weight the guard serves (:func:`~modeling.training.tail_guard.choose_weight`)."""
    kind = KINDS[multiplier]
    if blends == ONE_SE:
        return _one_se_weights(run, m, multiplier)
    if not blends:
        # a run saved before z_raw was recorded compares with the scaled fallback only
        z = run["z"][m] if multiplier else run.get("z_raw", run["z"])[m]  # type: ignore[index,union-attr]
        return np.where(z >= t, 1.0, 0.0)
    best_cv = np.full(len(run["ys"][m]), np.inf)  # type: ignore[index]
    weight = np.zeros(len(best_cv))
    for wt in (*BLEND_WEIGHTS, 1.0):  # ascending: a tie goes to the rules' side
        cv, z = run[f"cv:{kind}:{wt:g}"][m], run[f"z:{kind}:{wt:g}"][m]  # type: ignore[index]
        better = (z >= t) & (cv <= best_cv)
        best_cv = np.where(better, cv, best_cv)
        weight = np.where(better, wt, weight)
    return weight


def _one_se_weights(run: dict[str, object], m: str, multiplier: bool) -> np.ndarray:
    """Per point, the one-SE rule's weight on its outer fold's inner CV (the run's ``inner`` part)."""
    inner, folds = run["inner"], run[FOLD][m]  # type: ignore[index]
    weight = np.full(len(folds), np.nan)
    for fold in np.unique(folds):
        at = f"{fold}/{m}/"
        plain = inner[at + "plain"] if multiplier else inner[at + "plain"] / inner[at + "scale"]
        weight[folds == fold] = one_se_weight(inner[at + "rules"], plain, inner[at + "y"])[0]
    return weight


def served_at(run: dict[str, object], setting: float | Setting | dict[str, float | Setting]
              ) -> dict[str, np.ndarray]:
    """The product's predictions at a guard setting (one, or per percentile), in ladder order.

    A setting is a threshold (the fallback with its multiplier) or ``(threshold, multiplier)``.
    """
    rules = run["rules"]
    assert isinstance(rules, dict)
    given = setting if isinstance(setting, dict) else dict.fromkeys(TAIL, setting)
    at = {m: _setting(v) for m, v in given.items()}
    ladder = {}
    for m in TAIL:
        t, multiplier, blends = at[m]
        fallback = run["fallback" if multiplier else "plain"][m]  # type: ignore[index]
        ladder[m] = blend(rules[m], fallback, weights_at(run, m, t, multiplier, blends))
    ladder["latency_mean_us"] = rules["latency_mean_us"].copy()
    order_percentiles(ladder)
    return {m: ladder[m] for m in TAIL}


def shipped() -> dict[str, Setting]:
    """The guard settings the product ships (:data:`TAIL_GUARDS`, :data:`FALLBACK_MULTIPLIER`,
    :data:`TAIL_BLEND`, :data:`TAIL_ONE_SE`)."""
    return {
        m: (-math.inf, FALLBACK_MULTIPLIER[m], ONE_SE) if TAIL_BLEND[m] and TAIL_ONE_SE[m]
        else (TAIL_GUARDS[m], FALLBACK_MULTIPLIER[m], TAIL_BLEND[m])
        for m in TAIL
    }


def settings_of(run: dict[str, object]) -> tuple[Setting, ...]:
    """The settings a run can judge (a run saved before the blends, or before the inner CV's
    predictions, were recorded: not those)."""
    return tuple(st for st in SETTINGS
                 if (st[2] != ONE_SE or "inner" in run) and (not st[2] or "cv:raw:1" in run))


def _mre(pred: np.ndarray, y: np.ndarray) -> float:
    return float(relative_errors(pred, y).mean())


def lodo_table(runs: dict[str, dict[str, object]]) -> dict[str, dict]:
    """Per device: each percentile's guard setting chosen on the others, and every contender's MRE.

    A percentile's setting is the one with the lowest mean log ratio of its error to the plain
    XGBoost's over the other devices (the other percentiles at their shipped settings, as the
    ladder couples them; ties go to the stronger guard, then to the fallback with its
    multiplier, then to no blend); the device is then scored with the chosen settings
    together, in ladder order.  The ratio, not the error itself: the SATA SSDs' p99 errors
    (35-160 %, one PM883 draw 45 % and another 162 %) would otherwise decide every device's
    setting, and the issue asks for each device to be no worse than the plain model.

    A percentile the product serves by the one-SE rule (:data:`TAIL_ONE_SE`) has nothing to
    choose: the rule has no parameter set on the devices, so every device is scored at it
    (the other percentiles choose among the thresholds, as before the rule).
    """
    settings = [st for st in SETTINGS if all(st in settings_of(run) for run in runs.values())]
    # a run saved before the inner CV's predictions were recorded: the coarse blends' guard instead
    base = {m: st if st in settings else (TAIL_GUARDS[m], st[1], True) for m, st in shipped().items()}
    scores = {
        name: {st: {m: _mre(served_at(run, {**base, m: st})[m], run["ys"][m]) for m in TAIL}
               for st in settings}
        for name, run in runs.items()
    }
    plain = {name: {m: _mre(run["plain"][m], run["ys"][m]) for m in TAIL} for name, run in runs.items()}
    table: dict[str, dict] = {}
    for name, run in runs.items():
        others = [o for o in runs if o != name] or [name]
        # ties: the stronger guard, the fallback with its multiplier, no blend
        coarse = {
            m: min((st for st in settings if st[2] != ONE_SE),
                   key=lambda st, m=m: (np.mean([math.log(scores[o][st][m] / plain[o][m]) for o in others]),
                                        -st[0], -st[1], st[2]))
            for m in TAIL
        }
        chosen = {m: base[m] if base[m][2] == ONE_SE else coarse[m] for m in TAIL}
        ys = run["ys"]
        served = served_at(run, chosen)
        draws = int(run.get("meta", {}).get("draws", 1))  # type: ignore[union-attr]
        p99 = "latency_p99_us"
        table[name] = {
            "draws": draws,
            # the p99 MRE of each fold draw: product, plain XGBoost
            "p99_by_draw": [
                (_mre(a, y), _mre(b, y))
                for a, b, y in zip(np.split(served[p99], draws), np.split(run["plain"][p99], draws),  # type: ignore[index]
                                   np.split(ys[p99], draws), strict=True)
            ],
            "threshold": chosen,
            "product": {m: _mre(served[m], ys[m]) for m in TAIL},
            "default": {m: _mre(v, ys[m]) for m, v in served_at(run, base).items()},
            # before the one-SE rule: each percentile at its threshold with the coarse blends,
            # chosen on the others like the rest (the p99 of each fold draw as p99_by_draw)
            "coarse": {m: scores[name][coarse[m]][m] for m in TAIL},
            "coarse_p99_by_draw": [
                _mre(a, y) for a, y in zip(np.split(served_at(run, coarse)[p99], draws),
                                           np.split(ys[p99], draws), strict=True)
            ],
            "coarse_threshold": coarse,
            "rules": scores[name][(-math.inf, True, False)],
            "plain_xgboost": {m: _mre(run["plain"][m], ys[m]) for m in TAIL},
            "cart": {m: _mre(run["cart"][m], ys[m]) for m in TAIL},
            # at the shipped multiplier, without blends and (where the run has them) with
            "by_threshold": {t: {m: scores[name][(t, FALLBACK_MULTIPLIER[m], False)][m] for m in TAIL}
                             for t in THRESHOLDS},
            "by_threshold_blend": {
                t: {m: scores[name][(t, FALLBACK_MULTIPLIER[m], True)][m] for m in TAIL}
                for t in THRESHOLDS if (t, True, True) in settings
            },
            # the p99's rules' weight served at the chosen setting: the share of points per weight
            "p99_weights": _shares(weights_at(run, p99, *chosen[p99])),
        }
    return table


def _shares(weights: np.ndarray) -> dict[float, float]:
    values, counts = np.unique(weights, return_counts=True)
    return {float(v): float(c) / len(weights) for v, c in zip(values, counts, strict=True)}


def save_runs(runs: dict[str, dict[str, object]], path: str) -> None:
    """Every contender's outer-fold predictions, to re-judge the rules without training again (npz)."""
    flat = {f"{name}|{part}|{m}": np.asarray(v) for name, run in runs.items()
            for part, by in run.items() for m, v in by.items()}
    np.savez_compressed(path, **flat)


def load_runs(*paths: str) -> dict[str, dict[str, object]]:
    """The runs saved by :func:`save_runs` (several files: a study split by device, ``--only``)."""
    runs: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    for path in paths:
        with np.load(path) as data:
            for key in data.files:
                name, part, m = key.split("|")
                runs.setdefault(name, {}).setdefault(part, {})[m] = data[key]
    return runs  # type: ignore[return-value]


def tail_lodo_study(frames: dict[str, pd.DataFrame], budget: float, folds: int,
                    candidates: list[Candidate] | None, save: str | None = None,
                    draws: int = 1) -> dict[str, dict]:
    runs = {}
    for name, frame in frames.items():
        print(f"tail, leave one device out: {name} ...", file=sys.stderr, flush=True)
        run = device_tail_runs(frame, budget, candidates, folds, draws)
        if run is not None:
            runs[name] = run
    if save:
        save_runs(runs, save)
    return lodo_table(runs)


def _t(t: float | Setting) -> str:
    """A threshold, or a setting: ``x`` marks the fallback with its CV multiplier, ``b`` a blend."""
    if isinstance(t, tuple):
        t0, multiplier, blends = _setting(t)
        if blends == ONE_SE:
            return "one-SE" + (" x" if multiplier else "")
        if blends and t0 != math.inf:
            return ("best blend" if t0 == -math.inf else f"{t0:g} SE b") + (" x" if multiplier else "")
        return _t(t0) + (" x" if multiplier and t0 != -math.inf else "")
    return {-math.inf: "rules", math.inf: "plain"}.get(t, f"{t:g} SE")


def print_lodo(table: dict[str, dict]) -> None:
    """Markdown: per device and percentile, the product (LODO thresholds), plain XGBoost, CART."""
    short = {"latency_p50_us": "p50", "latency_p90_us": "p90", "latency_p99_us": "p99",
             "latency_p99_9_us": "p99.9"}
    p99 = "latency_p99_us"
    print("\nTail, leave one device out: MRE per percentile -- product (each percentile's guard setting"
          " chosen on the other devices; x: the fallback with its CV multiplier) / plain XGBoost tuned"
          " / CART tuned")
    print("| device | settings p50/p90/p99/p99.9 | " + " | ".join(short[m] for m in TAIL)
          + " | p99 product vs best baseline |")
    print("|---|---|" + "---|" * len(TAIL) + "---|")
    losses = {m: 0 for m in TAIL}
    for name, r in table.items():
        cells = [f"{r['product'][m]:.1%} / {r['plain_xgboost'][m]:.1%} / {r['cart'][m]:.1%}" for m in TAIL]
        for m in TAIL:
            losses[m] += r["product"][m] > min(r["plain_xgboost"][m], r["cart"][m])
        best = min(r["plain_xgboost"][p99], r["cart"][p99])
        ts = "/".join(_t(r["threshold"][m]) for m in TAIL)
        spread = ""
        if r.get("draws", 1) > 1:
            by = np.array(r["p99_by_draw"])
            lo, hi = by.min(axis=0), by.max(axis=0)
            wins = int((by[:, 0] <= by[:, 1]).sum())
            spread = (f" (draws: product {lo[0]:.1%}-{hi[0]:.1%}, plain {lo[1]:.1%}-{hi[1]:.1%},"
                      f" product no worse on {wins} of {len(by)})")
        print(f"| {name} | {ts} | {' | '.join(cells)} | {r['product'][p99] / best:.2f}x{spread} |")
    n = len(table)
    for m in TAIL:
        ours = np.mean([r["product"][m] for r in table.values()])
        plain = np.mean([r["plain_xgboost"][m] for r in table.values()])
        default = np.mean([r["default"][m] for r in table.values()])
        print(f"mean {short[m]} over {n} devices: product {ours:.1%} (at the shipped default {default:.1%}),"
              f" plain XGBoost {plain:.1%} ({ours / plain:.2f}x);"
              f" loses to the best baseline on {losses[m]} of {n}")
    print("(target: p99 no worse than plain XGBoost on every device, mean p99 <= 0.85x plain XGBoost's)")
    if any(r["threshold"][m] != r["coarse_threshold"][m] for r in table.values() for m in TAIL):
        print("\nBefore the one-SE rule (every percentile's threshold and coarse blend chosen on the other"
              " devices) / with it: MRE per percentile; the p99 per fold draw, plain XGBoost's beside")
        print("| device | " + " | ".join(short[m] for m in TAIL)
              + " | p99 per draw: before / one-SE / plain |")
        print("|---|" + "---|" * len(TAIL) + "---|")
        for name, r in table.items():
            cells = [f"{r['coarse'][m]:.1%} / {r['product'][m]:.1%}" for m in TAIL]
            draws = ", ".join(f"{c:.1%} / {a:.1%} / {b:.1%}"
                              for c, (a, b) in zip(r["coarse_p99_by_draw"], r["p99_by_draw"], strict=True))
            print(f"| {name} | " + " | ".join(cells) + f" | {draws} |")
        cells = [f"{np.mean([r['coarse'][m] for r in table.values()]):.1%} / "
                 f"{np.mean([r['product'][m] for r in table.values()]):.1%}" for m in TAIL]
        print("| mean | " + " | ".join(cells) + " | |")
    print("\nMRE by guard threshold, p99 (p99.9) -- the rules always ... the plain model always;"
          " shipped defaults: " + ", ".join(f"{short[m]} {_t(st)}" for m, st in shipped().items()))
    print("| device | " + " | ".join(_t(t) for t in THRESHOLDS) + " |")
    print("|---|" + "---|" * len(THRESHOLDS))
    for name, r in table.items():
        cells = [f"{r['by_threshold'][t][p99]:.1%} ({r['by_threshold'][t]['latency_p99_9_us']:.1%})"
                 for t in THRESHOLDS]
        print(f"| {name} | " + " | ".join(cells) + " |")
    blends = [t for t in THRESHOLDS if all(t in r["by_threshold_blend"] for r in table.values())]
    if not blends:
        return
    print("\nThe same with blends (the rules' weight in a geometric blend with the fallback chosen by"
          f" inner CV among {', '.join(f'{x:g}' for x in BLEND_WEIGHTS)} and 1), p99 (p99.9);"
          " and the share of the p99's points at each weight at the chosen setting")
    print("| device | " + " | ".join(_t((t, True, True)).removesuffix(" x") for t in blends)
          + " | p99 weights served |")
    print("|---|" + "---|" * (len(blends) + 1))
    for name, r in table.items():
        by = r["by_threshold_blend"]
        cells = [f"{by[t][p99]:.1%} ({by[t]['latency_p99_9_us']:.1%})" for t in blends]
        shares = ", ".join(f"{wt:g}: {share:.0%}" for wt, share in r["p99_weights"].items())
        print(f"| {name} | " + " | ".join(cells) + f" | {shares} |")
