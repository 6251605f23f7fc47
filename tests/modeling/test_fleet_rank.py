"""Fleet prediction: devices ranked per workload from their batch predictions; unusable ones skipped.

Three trained devices of known speed ("fast" is 4x "mid", which is 4x "slow": every
latency 4x lower, every rate 4x higher), one device without a model and one trained on
IOPS alone.  The ranking must follow the predictions each device's model gives through
the plain batch path, and the known order.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from modeling.errors import InvalidInput, NoModel
from modeling.serving.fleet_rank import rank_csv, rank_devices
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from modeling.training.selection import candidates_of_kinds
from modeling.training.train import train_device
from modeling.workload import METRICS
from tests.modeling.conftest import synthetic_rows

SPEED = {"slow": 1.0, "mid": 4.0, "fast": 16.0}
WORKLOADS = pd.DataFrame(
    {
        "write_ratio": [0.0, 0.3, 1.0, 0.7],
        "queue_depth": [1, 8, 32, 4],
        "request_size": [4096, 16384, 65536, 4096],
        "randomness": [1.0, 1.0, 0.0, 0.5],
        "numjobs": [1, 2, 4, 1],
    }
)


def speed_rows(speed: float) -> pd.DataFrame:
    rows = synthetic_rows(seed=3)
    for metric in ("iops", "bandwidth_mib_s"):
        rows[metric] *= speed
    for metric in ("latency_mean_us", "latency_p99_us"):
        rows[metric] /= speed
    return rows


@pytest.fixture(scope="module")
def fleet_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with the fleet described above, trained once (CART, 2 folds)."""
    root = tmp_path_factory.mktemp("fleet-rank")
    datadir = DataDir(root)
    cart = candidates_of_kinds(["cart"])
    for name, speed in SPEED.items():
        datadir.catalog.ensure_device(name)
        datadir.catalog.add_measurements(name, speed_rows(speed).to_dict("records"))
        train_device(datadir, name, folds=2, candidates=cart)
    datadir.catalog.ensure_device("untrained")
    datadir.catalog.add_measurements("untrained", speed_rows(2.0).to_dict("records"))
    datadir.catalog.ensure_device("iops-only")
    datadir.catalog.add_measurements("iops-only", speed_rows(64.0).drop(
        columns=["bandwidth_mib_s", "latency_mean_us", "latency_p99_us"]).to_dict("records"))
    train_device(datadir, "iops-only", folds=2, candidates=cart)
    return root


@pytest.fixture
def fleet(fleet_template: Path, home: Path) -> DataDir:
    """This test's data directory with the fleet copied in."""
    shutil.copytree(fleet_template, home, dirs_exist_ok=True)
    return DataDir(home)


ALL = ["slow", "untrained", "mid", "iops-only", "fast"]


def _columns(frame: pd.DataFrame) -> dict[str, pd.Series]:
    return {c: frame[c] for c in frame.columns}


def test_ranking_follows_each_devices_batch_predictions(fleet: DataDir) -> None:
    registry = ModelRegistry(fleet)
    ranking = rank_devices(registry, ALL, _columns(WORKLOADS))
    assert ranking.rank_by == "latency_p99_us" and not ranking.higher_is_better and ranking.count == 4
    assert ranking.devices == ["slow", "mid", "fast"]  # in the order named; two skipped
    skipped = {s.device: s for s in ranking.skipped}
    assert skipped["untrained"].code == "no_model" and "no trained model" in skipped["untrained"].reason
    assert skipped["iops-only"].code == "not_found" and "latency_p99_us" in skipped["iops-only"].reason
    assert ranking.ranking() == [["fast", "mid", "slow"]] * 4
    for forecast in ranking.forecasts:
        plain = registry.load(forecast.device).predict(_columns(WORKLOADS)).columns
        assert forecast.model_version == registry.load(forecast.device).version
        assert set(forecast.predictions) == set(METRICS)
        for metric in METRICS:
            for got, want in zip(forecast.predictions[metric], plain[metric], strict=True):
                np.testing.assert_array_equal(got, want)
    # each workload's p99 along its ranking never decreases
    for i, order in enumerate(ranking.ranking()):
        p99 = [ranking.forecasts[ranking.devices.index(d)].predictions["latency_p99_us"][0][i] for d in order]
        assert p99 == sorted(p99)


def test_higher_is_better_for_rates_and_top(fleet: DataDir) -> None:
    ranking = rank_devices(ModelRegistry(fleet), ALL, _columns(WORKLOADS), rank_by="iops", top=2)
    assert ranking.higher_is_better
    assert ranking.devices == ["slow", "mid", "iops-only", "fast"]  # iops-only can rank by IOPS
    assert [s.device for s in ranking.skipped] == ["untrained"]
    assert ranking.ranking() == [["iops-only", "fast"]] * 4
    doc = ranking.as_json()
    assert set(doc["devices"]["iops-only"]["predictions"]) == {"iops"}
    assert doc["skipped"] == [{"device": "untrained", "code": "no_model",
                               "reason": doc["skipped"][0]["reason"]}]

    ranking = rank_devices(ModelRegistry(fleet), ["slow", "fast"], _columns(WORKLOADS), rank_by="iops",
                           metrics=["iops"])
    assert all(set(f.predictions) == {"iops"} for f in ranking.forecasts)


def test_frame_has_a_row_per_workload_and_ranked_device(fleet: DataDir, tmp_path: Path) -> None:
    csv = tmp_path / "w.csv"
    WORKLOADS.assign(request_size=["4k", "16k", "64k", "4k"]).to_csv(csv, index=False)
    frame, ranking = rank_csv(fleet, ALL, csv, rank_by="iops")
    rows = ranking.frame(frame)
    assert len(rows) == 4 * 4
    assert rows["workload"].tolist() == [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4
    assert rows["rank"].tolist() == [1, 2, 3, 4] * 4
    assert rows["device"].astype(str).tolist()[:4] == ["iops-only", "fast", "mid", "slow"]
    assert rows["request_size"].tolist()[:5] == [4096] * 4 + [16384]  # the input columns come first
    # devices without a metric leave it blank; the others carry their own predictions
    only = rows[rows["device"] == "iops-only"]
    assert only["pred_latency_p99_us"].isna().all() and only["pred_iops"].notna().all()
    fast = rows[rows["device"] == "fast"].reset_index(drop=True)
    want = ModelRegistry(fleet).load("fast").predict_frame(WORKLOADS)
    for column in want.columns:
        np.testing.assert_array_equal(fast[column].to_numpy(), want[column].to_numpy(), err_msg=column)


def test_bad_requests_and_no_rankable_device(fleet: DataDir) -> None:
    registry = ModelRegistry(fleet)
    with pytest.raises(InvalidInput, match="cannot rank by"):
        rank_devices(registry, ALL, _columns(WORKLOADS), rank_by="latency")
    with pytest.raises(InvalidInput, match="unknown model"):
        rank_devices(registry, ALL, _columns(WORKLOADS), model="nowhere")
    with pytest.raises(InvalidInput, match="queue_depth"):
        rank_devices(registry, ALL, _columns(WORKLOADS.assign(queue_depth=0)))
    with pytest.raises(NoModel, match="none of the 2 devices") as err:
        rank_devices(registry, ["untrained", "iops-only"], _columns(WORKLOADS))
    assert {s["device"] for s in err.value.details["skipped"]} == {"untrained", "iops-only"}


def test_a_further_percentile_is_asked_like_any_served_metric(fleet: DataDir) -> None:
    """The API's schema admits every served metric; a device without one leaves it out, as
    ``iops-only`` leaves out the latencies (it was refused with 422 before)."""
    ranking = rank_devices(ModelRegistry(fleet), ["slow", "fast"], _columns(WORKLOADS),
                           rank_by="iops", metrics=["latency_p50_us", "latency_p99_9_us"])
    assert ranking.ranking() == [["fast", "slow"]] * 4
    assert all(set(f.predictions) == {"iops"} for f in ranking.forecasts)  # no percentiles measured
    with pytest.raises(InvalidInput, match="unknown metric"):
        rank_devices(ModelRegistry(fleet), ["slow"], _columns(WORKLOADS), metrics=["latency_p5_us"])
