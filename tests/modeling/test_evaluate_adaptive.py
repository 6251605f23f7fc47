"""Evaluation report shape and contents; adaptive point proposals."""

from __future__ import annotations

import numpy as np

from modeling.training.adaptive import propose_points
from modeling.training.accuracy import noise_floor
from modeling.training.evaluate import evaluate_device, evaluate_frame
from modeling.workload import METRICS, Workload
from tests.modeling.conftest import fast_candidates, synthetic_rows


def test_kfold_report_shape(synthetic):
    report = evaluate_frame(synthetic, device="synth", folds=3, candidates=fast_candidates()).to_dict()
    assert report["device"] == "synth"
    for metric in METRICS:
        entry = report["metrics"][metric]
        assert isinstance(entry["mre"], float) and entry["n"] == len(synthetic)
        assert {"median_re", "p90_re", "r2", "coverage", "mre_global"} <= set(entry)
        assert entry["mre"] < 0.5
        assert set(report["feature_sets"]) == {"basic", "extended"}
    # extended knows numjobs, basic does not: on data where numjobs matters, extended wins
    assert report["feature_sets"]["extended"]["iops"] < report["feature_sets"]["basic"]["iops"]
    assert set(report["regions"]) and all("global" in e["iops"] for e in report["regions"].values())
    assert set(report["physics"]) == {"bandwidth_mib_s", "latency_mean_us", "modes"}
    assert sum(report["physics"]["modes"]["iops"].values()) == 3  # one training per outer fold
    assert report["noise_floor"] is None  # no repeats in this data


def test_noise_floor_from_repeats():
    rows = synthetic_rows(noise=0.1, repeats=3)
    floor = noise_floor(rows)
    assert floor is not None and floor["n_workloads"] == len(rows) // 3
    assert 0.03 < floor["iops"]["cv"] < 0.2


def test_holdout_evaluation(datadir, device_with_data, tmp_path):
    held = synthetic_rows(seed=9).drop(columns=["fio_version"])
    report = evaluate_device(datadir, "synth", holdout=held, candidates=fast_candidates()).to_dict()
    assert report["method"] == "holdout" and report["metrics"]["iops"]["n"] == 128
    # the hold-out report has the same sections as the k-fold one
    assert set(report["feature_sets"]) == {"basic", "extended"}
    assert report["regions"] and all("region" in e["iops"] for e in report["regions"].values())
    assert sum(report["physics"]["modes"]["iops"].values()) == 1  # one training


def test_holdout_without_measured_rows_is_nodata(datadir, device_with_data, tmp_path):
    import pytest

    from modeling.errors import NoData

    held = synthetic_rows(seed=9).drop(columns=["fio_version", "iops"])
    with pytest.raises(NoData, match="hold-out"):
        evaluate_device(datadir, "synth", holdout=held, candidates=fast_candidates())


def test_repeats_report_the_error_against_the_typical_run():
    rows = synthetic_rows(noise=0.15, repeats=3, seed=4)
    report = evaluate_frame(rows, folds=3, candidates=fast_candidates(), compare_feature_sets=False)
    iops = report.metrics["iops"]
    # single runs scatter around the typical value; the model aims at the typical value
    assert iops["mre_vs_median"] < iops["mre"]
    assert report.noise_floor["iops"]["mre_vs_median"] > 0.05


def test_propose_points_prefers_unmeasured_corners():
    measured = synthetic_rows(
        grid={
            "write_ratio": (0.0, 1.0),
            "queue_depth": (1, 2, 4, 8),
            "request_size": (4096,),
            "randomness": (1.0,),
            "numjobs": (1, 2),
        }
    )
    near = [Workload(write_ratio=0.0, queue_depth=q, request_size=4096, randomness=1.0) for q in (1, 2, 4)]
    far = [Workload(write_ratio=0.5, queue_depth=256, request_size=4096, randomness=1.0, numjobs=16)]
    chosen = propose_points(measured, near + far, 2)
    assert len(chosen) == 2 and len(set(chosen)) == 2
    assert chosen[0] == far[0]


def test_propose_points_without_data_spreads_out():
    cands = [
        Workload(write_ratio=w, queue_depth=q, request_size=4096, randomness=1.0)
        for w in (0.0, 0.5, 1.0)
        for q in (1, 8, 64)
    ]
    chosen = propose_points(synthetic_rows().head(0), cands, 3)
    ws = np.array([[c.write_ratio, np.log2(c.queue_depth)] for c in chosen])
    assert len({tuple(r) for r in ws}) == 3
    assert propose_points(synthetic_rows().head(0), cands, 0) == []
