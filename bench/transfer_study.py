"""Transfer study (issue 13 item 3): a new device from K measured points and a reference model.

For every ordered pair (reference, target) of fio-plot devices: the reference is trained
on all its points, then the target from K of its distinct workloads, and the IOPS mean
relative error is measured on the target's other workloads -- for the relative-fitness
transfer on K random points, a from-scratch model on the same points (median over
``seeds`` draws each), and the transfer on the K points the transfer-aware adaptive plan
picks (deterministic).  Fast training configurations throughout (the sampling study's).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from modeling.errors import NoData
from modeling.serving.device_model import DeviceModel
from modeling.training.adaptive import propose_transfer_points
from modeling.training.fit import fit_device_model
from modeling.training.selection import relative_errors
from modeling.training.transfer import fit_transfer_model
from modeling.workload import Workload
from modeling.workload_matrix import workload_matrix

SIZES = (4, 8, 16, 32)


def _holdout(frame: pd.DataFrame, idx: np.ndarray, fit: Callable[[pd.DataFrame], DeviceModel]) -> float:
    try:
        model = fit(frame.iloc[idx])
    except NoData:
        return float("nan")
    test = np.setdiff1d(np.arange(len(frame)), idx)
    pred = model.predict_matrix(workload_matrix(frame.iloc[test]), metrics=["iops"])["iops"][0]
    return float(relative_errors(pred, frame["iops"].to_numpy(float)[test]).mean())


def pair_row(
    ref: DeviceModel, frame: pd.DataFrame, k: int, seeds: int, scratch: Callable[[pd.DataFrame], DeviceModel]
) -> dict[str, float]:
    """Median holdout IOPS MRE of transfer and from-scratch over ``seeds`` draws, and adaptive."""
    def transfer(part: pd.DataFrame) -> DeviceModel:
        return fit_transfer_model(part, ref, device="new", version="study")[0]

    draws = [np.random.default_rng(s).choice(len(frame), k, replace=False) for s in range(seeds)]
    workloads = [Workload.from_row(r) for r in frame.to_dict("records")]
    ref_log = np.log(np.maximum(
        ref.predict_matrix(workload_matrix(frame), metrics=["iops"])["iops"][0], 1e-12))
    picks = propose_transfer_points(ref_log, workloads, k)
    index = {w: i for i, w in enumerate(workloads)}
    adaptive_idx = np.array([index[p] for p in picks])
    return {
        "transfer": float(np.median([_holdout(frame, d, transfer) for d in draws])),
        "scratch": float(np.nanmedian([_holdout(frame, d, scratch) for d in draws]))
        if k >= 8 else float("nan"),
        "adaptive": _holdout(frame, adaptive_idx, transfer),
    }


def transfer_study(
    frames: dict[str, pd.DataFrame], fit_kw: dict, sizes: tuple[int, ...] = SIZES, seeds: int = 3,
    pairs: list[tuple[str, str]] | None = None,
) -> list[dict]:
    """One row per (reference, target, K); prints a markdown table as it goes."""
    def scratch(part: pd.DataFrame) -> DeviceModel:
        return fit_device_model(part, **fit_kw)[0]

    refs = {name: fit_device_model(f, **fit_kw)[0] for name, f in frames.items()}
    pairs = pairs or [(a, b) for a in frames for b in frames if a != b]
    print("\nTransfer: IOPS MRE on the unmeasured points vs K measured points "
          f"(transfer and from-scratch: median of {seeds} random draws; adaptive: transfer-aware plan)")
    print("| reference -> target | K | transfer | from scratch | adaptive + transfer |")
    print("|---|---|---|---|---|")
    rows = []
    for a, b in pairs:
        for k in sizes:
            if k >= len(frames[b]):
                continue
            r = {"reference": a, "target": b, "k": k, **pair_row(refs[a], frames[b], k, seeds, scratch)}
            rows.append(r)
            cells = [f"{r[c]:.1%}" if np.isfinite(r[c]) else "n/a"
                     for c in ("transfer", "scratch", "adaptive")]
            print(f"| {a} -> {b} | {k} | " + " | ".join(cells) + " |", flush=True)
    _summary(rows)
    return rows


def _summary(rows: list[dict]) -> None:
    pairs = {(r["reference"], r["target"]) for r in rows}
    for k in (8, 16):
        at = [r for r in rows if r["k"] == k and np.isfinite(r["scratch"])]
        wins = sum(r["transfer"] < r["scratch"] for r in at)
        print(f"K = {k}: transfer beats from-scratch on {wins} of {len(at)} pairs")
    print(f"({len(pairs)} ordered pairs; from scratch needs 8 distinct workloads, so K = 4 is transfer only)")
