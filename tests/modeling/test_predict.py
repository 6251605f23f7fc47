"""Prediction: intervals with measured coverage, extrapolation flags, model choice, batch input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from modeling.errors import InvalidInput, NoModel, NotFound
from modeling.training.fit import fit_device_model
from modeling.serving.predict import predict
from modeling.workload import METRICS, Workload
from tests.modeling.conftest import fast_candidates, synthetic_rows


@pytest.fixture(scope="module")
def model():
    m, _ = fit_device_model(synthetic_rows(noise=0.1, seed=0), folds=3, candidates=fast_candidates())
    return m


def test_interval_coverage_on_held_out_data(model):
    held_out = synthetic_rows(noise=0.1, seed=42, repeats=3)  # fresh noise, same workloads
    out = model.predict_frame(held_out)
    for metric in METRICS:
        inside = (held_out[metric] >= out[f"pred_{metric}_lower"]) & (
            held_out[metric] <= out[f"pred_{metric}_upper"]
        )
        assert 0.8 <= inside.mean() <= 1.0, (metric, inside.mean())
        assert (out[f"pred_{metric}_lower"] <= out[f"pred_{metric}"]).all()
        assert (out[f"pred_{metric}"] <= out[f"pred_{metric}_upper"]).all()


def test_inside_range_is_not_extrapolated(model):
    p = model.predict_one(
        Workload(write_ratio=0.3, queue_depth=8, request_size="16k", randomness=1, numjobs=2)
    )
    assert not any(mp.extrapolated for mp in p.predictions.values())
    for mp in p.predictions.values():
        assert mp.lower is not None and mp.lower <= mp.value <= mp.upper


@pytest.mark.parametrize(
    "fields",
    [
        {"queue_depth": 256},  # above the swept maximum of 64
        {"request_size": "1m"},  # above 64k
        {"numjobs": 16},  # above 4
        {"request_size": 2048},  # below 4k
    ],
)
def test_outside_range_is_flagged(model, fields):
    base = {"write_ratio": 0.3, "queue_depth": 8, "request_size": "16k", "randomness": 1.0}
    p = model.predict_one(Workload(**{**base, **fields}))
    assert all(mp.extrapolated for mp in p.predictions.values())


def test_region_without_data_is_flagged():
    common = {"queue_depth": (1, 4, 16, 64), "request_size": (4096, 8192), "numjobs": (1, 4)}
    reads = synthetic_rows(grid={"write_ratio": (0.0,), "randomness": (1.0,), **common})
    writes = synthetic_rows(grid={"write_ratio": (1.0,), "randomness": (0.0,), **common})
    m, _ = fit_device_model(
        pd.concat([reads, writes], ignore_index=True), folds=3, candidates=fast_candidates()
    )
    frame = pd.DataFrame(
        [
            {"write_ratio": 0.0, "queue_depth": 4, "request_size": 4096, "randomness": 1.0},
            {"write_ratio": 0.0, "queue_depth": 4, "request_size": 4096, "randomness": 0.0},
        ]
    )
    # the second row is inside every field's swept range, but nothing was measured in its
    # region (read-sequential-small)
    out = m.predict_frame(frame)
    assert list(out["iops_extrapolated"]) == [False, True]


def test_model_choice_global_region_and_auto(model):
    wl = Workload(write_ratio=0.0, queue_depth=4, request_size=4096, randomness=1.0)
    region = wl.region
    assert model.predict_one(wl, model="global").predictions["iops"].model == "global"
    explicit = model.predict_one(wl, model=region).predictions["iops"]
    assert explicit.model == region
    auto = model.predict_one(wl).predictions["iops"]
    assert auto.model == (region if region in model.specs["iops"].auto_regions else "global")
    with pytest.raises(InvalidInput, match="unknown model"):
        model.predict_one(wl, model="fastest")


def test_predict_frame_shape_defaults_and_matches_single(model):
    frame = pd.DataFrame(
        {
            "write_ratio": [0.3, 0.7],
            "queue_depth": [8, 2],
            "request_size": [16384, 4096],
            "randomness": [1.0, 0.0],
            "numjobs": [np.nan, 4],
        }
    )
    out = model.predict_frame(frame, metrics=["iops", "latency_mean_us"])
    assert list(out.columns) == [
        "pred_iops",
        "pred_iops_lower",
        "pred_iops_upper",
        "iops_extrapolated",
        "iops_model",
        "pred_latency_mean_us",
        "pred_latency_mean_us_lower",
        "pred_latency_mean_us_upper",
        "latency_mean_us_extrapolated",
        "latency_mean_us_model",
    ]
    single = model.predict_one(Workload(write_ratio=0.3, queue_depth=8, request_size=16384, randomness=1.0))
    assert out["pred_iops"].iloc[0] == pytest.approx(single.predictions["iops"].value)


@pytest.mark.parametrize(
    ("column", "value", "match"),
    [
        ("queue_depth", 0, "queue_depth"),
        ("write_ratio", 1.5, "write_ratio"),
        ("request_size", 1000, "request_size"),
        ("queue_depth", "lots", "non-numeric"),
    ],
)
def test_predict_frame_rejects_bad_values(model, column, value, match):
    frame = pd.DataFrame(
        {"write_ratio": [0.3], "queue_depth": [8], "request_size": [4096], "randomness": [1.0]}
    )
    frame[column] = frame[column].astype(object)
    frame.loc[0, column] = value
    with pytest.raises(InvalidInput, match=match):
        model.predict_frame(frame)


def test_predict_through_datadir(datadir, trained):
    p = predict(datadir, "synth", Workload(write_ratio=0.5, queue_depth=4, request_size="4k", randomness=1))
    assert p.model_version == trained and set(p.predictions) == set(METRICS)
    only = predict(
        datadir,
        "synth",
        Workload(write_ratio=0.5, queue_depth=4, request_size="4k", randomness=1),
        metrics=["iops"],
    )
    assert set(only.predictions) == {"iops"}


def test_predict_without_model(datadir, device_with_data):
    with pytest.raises(NoModel):
        predict(datadir, "synth", Workload(write_ratio=0.5, queue_depth=4, request_size="4k", randomness=1))


def test_region_model_missing_is_not_found():
    rows = synthetic_rows(
        grid={
            "write_ratio": (0.0, 1.0),
            "queue_depth": (1, 4, 16, 64),
            "request_size": (4096,),
            "randomness": (1.0,),
            "numjobs": (1, 2, 4),
        }
    )
    m, _ = fit_device_model(rows, folds=3, candidates=fast_candidates())
    wl = Workload(write_ratio=0.0, queue_depth=4, request_size=4096, randomness=1.0)
    with pytest.raises(NotFound):
        m.predict_one(wl, model="read-sequential-large")
