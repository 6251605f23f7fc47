"""POST /v1/predict and /v1/predict/batch: answers, filters, model choice, every error path."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from modeling.serving.metric_models import MetricSpec
from modeling.store import DataDir
from modeling.workload import REGION_NAMES, SERVED_METRICS, Workload
from service.api.routes.predict import _BATCH, _parse, workload_columns
from tests.service.utils import DEVICE, assert_error

WORKLOAD: dict[str, Any] = {
    "write_ratio": 0.0,
    "queue_depth": 8,
    "request_size": "4k",
    "randomness": 1.0,
    "numjobs": 4,
}


def test_predict_answers_every_metric_from_the_active_version(api: TestClient, trained: DataDir) -> None:
    r = api.post("/v1/predict", json={"device": DEVICE, "workload": WORKLOAD})
    assert r.status_code == 200, r.text
    body = r.json()
    active = trained.catalog.active_model_version(DEVICE)
    assert active is not None
    assert body["device"] == DEVICE and body["model_version"] == active.version
    # fio results hold p50/p90/p99.9 too: the whole latency distribution is served
    assert set(body["predictions"]) == set(SERVED_METRICS)
    for p in body["predictions"].values():
        assert p["value"] > 0
        assert p["lower"] is None or p["lower"] <= p["value"] <= p["upper"]
        assert isinstance(p["extrapolated"], bool)
        assert p["model"] == "global" or p["model"] in REGION_NAMES


def test_predict_matches_the_domain_model(api: TestClient, trained: DataDir) -> None:
    from modeling.serving.predict import predict

    expected = predict(trained, DEVICE, Workload(**WORKLOAD))
    body = api.post("/v1/predict", json={"device": DEVICE, "workload": WORKLOAD}).json()
    for metric, p in expected.predictions.items():
        assert body["predictions"][metric]["value"] == pytest.approx(p.value)


def test_metrics_filter_and_global_model(api: TestClient) -> None:
    r = api.post(
        "/v1/predict", json={"device": DEVICE, "workload": WORKLOAD, "metrics": ["iops"], "model": "global"}
    )
    assert r.status_code == 200, r.text
    assert list(r.json()["predictions"]) == ["iops"]
    assert r.json()["predictions"]["iops"]["model"] == "global"


def test_far_outside_the_training_data_is_flagged_extrapolated(api: TestClient) -> None:
    # fio-plot holds 4 KiB random I/O only: 1 MiB sequential is outside every trained range.
    far = {"write_ratio": 0.0, "queue_depth": 1, "request_size": "1m", "randomness": 0.0}
    body = api.post("/v1/predict", json={"device": DEVICE, "workload": far}).json()
    assert all(p["extrapolated"] for p in body["predictions"].values())
    # how far out, along which field: 1 MiB is 256 times the 4 KiB measured
    assert all(p["extrapolation"]["request_size"] == 256.0 for p in body["predictions"].values())


def test_percentiles_are_ordered_and_load_beyond_the_measured_is_named(api: TestClient) -> None:
    order = ["latency_p50_us", "latency_p90_us", "latency_p99_us", "latency_p99_9_us"]
    for qd, jobs in ((1, 1), (8, 4), (512, 1), (256, 4), (1024, 64)):
        wl = {**WORKLOAD, "queue_depth": qd, "numjobs": jobs}
        body = api.post("/v1/predict", json={"device": DEVICE, "workload": wl}).json()
        p = body["predictions"]
        values = [p[m]["value"] for m in order]
        assert values == sorted(values), (qd, jobs, values)
        assert p["latency_p99_us"]["value"] >= p["latency_mean_us"]["value"]
        inside = not p["iops"]["extrapolated"]
        assert (p["iops"]["extrapolation"] == {}) == inside
        if (qd, jobs) == (1024, 64):  # far beyond anything fio-plot ran
            assert p["iops"]["extrapolation"]["outstanding_io"] > 1.0


def test_unknown_device_is_404(api: TestClient) -> None:
    assert_error(
        api.post("/v1/predict", json={"device": "nope", "workload": WORKLOAD}), 404, "unknown_device"
    )


def test_device_without_model_is_404_no_model(api: TestClient, trained: DataDir) -> None:
    trained.catalog.ensure_device("fresh")
    assert_error(api.post("/v1/predict", json={"device": "fresh", "workload": WORKLOAD}), 404, "no_model")


def test_region_without_a_model_is_404(api: TestClient) -> None:
    # The data has no large sequential writes, so that region has no model of its own.
    r = api.post(
        "/v1/predict", json={"device": DEVICE, "workload": WORKLOAD, "model": "write-sequential-large"}
    )
    assert_error(r, 404, "not_found")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"queue_depth": 0}, "queue_depth"),
        ({"queue_depth": "eight"}, "queue_depth"),
        ({"write_ratio": 1.5}, "write_ratio"),
        ({"request_size": 1000}, "request_size"),
        ({"request_size": "lots"}, "request_size"),
        ({"numjobs": 2000}, "numjobs"),
        ({"colour": "red"}, "colour"),
        ({"randomness": True}, "randomness"),
    ],
)
def test_invalid_workload_is_422_naming_the_field(
    api: TestClient, change: dict[str, Any], field: str
) -> None:
    error = assert_error(
        api.post("/v1/predict", json={"device": DEVICE, "workload": {**WORKLOAD, **change}}), 422
    )
    assert error["code"] == "validation_error"
    assert field in error["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"device": "../etc", "workload": WORKLOAD}, "device"),
        ({"device": DEVICE, "workload": WORKLOAD, "metrics": ["speed"]}, "metrics"),
        ({"device": DEVICE, "workload": WORKLOAD, "model": "fancy"}, "model"),
        ({"device": DEVICE}, "workload"),
    ],
)
def test_invalid_request_is_422_naming_the_field(api: TestClient, body: dict[str, Any], field: str) -> None:
    assert field in assert_error(api.post("/v1/predict", json=body), 422)["message"]


def test_malformed_json_is_422(api: TestClient) -> None:
    r = api.post("/v1/predict", content=b"{not json", headers={"content-type": "application/json"})
    assert_error(r, 422, "validation_error")


# -- batch --------------------------------------------------------------------------------


def _rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "write_ratio": (i % 3) / 2,
            "queue_depth": 2 ** (i % 6),
            "request_size": 4096,
            "randomness": 1.0,
            "numjobs": 2 ** (i % 4),
        }
        for i in range(n)
    ]


def test_batch_matches_single_predictions(api: TestClient) -> None:
    rows = _rows(5) + [{**WORKLOAD, "request_size": "16k", "read_size": "4k"}]
    r = api.post("/v1/predict/batch", json={"device": DEVICE, "workloads": rows})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["count"] == len(rows) and set(body["predictions"]) == set(SERVED_METRICS)
    for i, row in enumerate(rows):
        single = api.post("/v1/predict", json={"device": DEVICE, "workload": row}).json()
        assert single["model_version"] == body["model_version"]
        for metric in SERVED_METRICS:
            assert body["predictions"][metric]["value"][i] == pytest.approx(
                single["predictions"][metric]["value"]
            )
            assert body["predictions"][metric]["model"][i] == single["predictions"][metric]["model"]
            for bound in ("lower", "upper"):  # null in both when there is no interval
                assert body["predictions"][metric][bound][i] == pytest.approx(
                    single["predictions"][metric][bound]
                )
            assert (
                body["predictions"][metric]["extrapolated"][i]
                == single["predictions"][metric]["extrapolated"]
            )


def test_batch_metrics_filter(api: TestClient) -> None:
    r = api.post(
        "/v1/predict/batch",
        json={"device": DEVICE, "workloads": _rows(3), "metrics": ["iops"], "model": "global"},
    )
    assert r.status_code == 200, r.text
    assert list(r.json()["predictions"]) == ["iops"]
    assert r.json()["predictions"]["iops"]["model"] == ["global"] * 3


def test_batch_invalid_row_is_422_naming_row_and_field(api: TestClient) -> None:
    rows = _rows(10)
    rows[7]["queue_depth"] = 0
    error = assert_error(api.post("/v1/predict/batch", json={"device": DEVICE, "workloads": rows}), 422)
    assert "workloads.7.queue_depth" in error["message"]


@pytest.mark.parametrize(
    "bad",
    [{"request_size": "1000"}, {"read_size": 100}, {"write_ratio": True}, {"extra": 1}, {"queue_depth": 1.5}],
)
def test_batch_rejects_what_workload_rejects(api: TestClient, bad: dict[str, Any]) -> None:
    rows = _rows(2)
    rows[1].update(bad)
    assert_error(
        api.post("/v1/predict/batch", json={"device": DEVICE, "workloads": rows}), 422, "validation_error"
    )


def test_batch_empty_and_unknown_device(api: TestClient) -> None:
    assert_error(api.post("/v1/predict/batch", json={"device": DEVICE, "workloads": []}), 422)
    assert_error(
        api.post("/v1/predict/batch", json={"device": "nope", "workloads": _rows(1)}), 404, "unknown_device"
    )
    assert_error(
        api.post("/v1/predict/batch", content=b"[1, 2", headers={"content-type": "application/json"}), 422
    )


def test_batch_over_max_batch_is_413(trained: DataDir, make_app: Any) -> None:
    with TestClient(make_app(max_batch=5)) as c:
        assert c.post("/v1/predict/batch", json={"device": DEVICE, "workloads": _rows(5)}).status_code == 200
        error = assert_error(c.post("/v1/predict/batch", json={"device": DEVICE, "workloads": _rows(6)}), 413)
        assert error["details"] == {"max_batch": 5}


def test_batch_columns_equal_rows(api: TestClient) -> None:
    rows = _rows(7)
    columns = {
        f: [r[f] for r in rows]
        for f in ("write_ratio", "queue_depth", "request_size", "randomness", "numjobs")
    }
    by_rows = api.post("/v1/predict/batch", json={"device": DEVICE, "workloads": rows})
    by_cols = api.post("/v1/predict/batch", json={"device": DEVICE, "columns": columns})
    assert by_cols.status_code == 200, by_cols.text
    assert by_cols.json() == by_rows.json()


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (
            {
                "columns": {
                    "write_ratio": [0.0, 1.0],
                    "queue_depth": [1],
                    "request_size": [4096] * 2,
                    "randomness": [1] * 2,
                }
            },
            "queue_depth",
        ),
        (
            {
                "columns": {
                    "write_ratio": [0.0],
                    "queue_depth": [0],
                    "request_size": [4096],
                    "randomness": [1],
                }
            },
            "columns.queue_depth.0",
        ),
        ({}, "either"),
        (
            {
                "workloads": [WORKLOAD],
                "columns": {
                    "write_ratio": [0.0],
                    "queue_depth": [1],
                    "request_size": [4096],
                    "randomness": [1],
                },
            },
            "either",
        ),
    ],
)
def test_batch_bad_columns_are_422(api: TestClient, body: dict[str, Any], fragment: str) -> None:
    error = assert_error(api.post("/v1/predict/batch", json={"device": DEVICE, **body}), 422)
    assert fragment in error["message"]


def test_batch_rows_name_extended_fields_in_some_rows_only(api: TestClient) -> None:
    # numjobs and read_size in one row each, write_size only as null, and
    # read_randomness nowhere: each column is built from the fields rows actually name
    rows: list[dict[str, Any]] = [{k: v for k, v in r.items() if k != "numjobs"} for r in _rows(4)]
    rows[1]["read_size"] = "8k"
    rows[2]["write_size"] = None
    rows[3]["numjobs"] = 4
    body = _parse(_BATCH, json.dumps({"device": DEVICE, "workloads": rows}).encode())
    cols = workload_columns(body)
    assert np.array_equal(cols["read_size"], [np.nan, 8192, np.nan, np.nan], equal_nan=True)
    assert np.array_equal(cols["numjobs"], [np.nan, np.nan, np.nan, 4], equal_nan=True)
    assert np.isnan(cols["write_size"]).all() and np.isnan(cols["read_randomness"]).all()
    columns = {
        f: [r.get(f) for r in rows] for f in ("write_ratio", "queue_depth", "request_size", "randomness")
    }
    columns.update(numjobs=[1, 1, 1, 4], read_size=[None, "8k", None, None])  # numjobs defaults to 1
    by_rows = api.post("/v1/predict/batch", json={"device": DEVICE, "workloads": rows})
    by_cols = api.post("/v1/predict/batch", json={"device": DEVICE, "columns": columns})
    assert by_rows.status_code == 200 and by_cols.status_code == 200, by_cols.text
    assert by_cols.json() == by_rows.json()


def test_scopes_of_a_big_batch_are_those_of_its_rows() -> None:
    # past 256 rows the regions present are found by counting codes, below by a set of ints
    base = MetricSpec("iops", "direct", {}, auto_regions=frozenset({REGION_NAMES[1], REGION_NAMES[6]}))
    codes = np.random.default_rng(3).choice([0, 1, 3, 6], size=300)
    for n in (300, 200):  # the counting and the set path
        got = base.scope_rows(codes[:n], "auto", DEVICE, "iops")
        assert set(got) == {"global", REGION_NAMES[1], REGION_NAMES[6]}
        for scope, code in ((REGION_NAMES[1], 1), (REGION_NAMES[6], 6)):
            assert got[scope].tolist() == np.flatnonzero(codes[:n] == code).tolist()
        assert got["global"].tolist() == np.flatnonzero(np.isin(codes[:n], [0, 3])).tolist()
    only = base.scope_rows(np.full(300, 3), "auto", DEVICE, "iops")
    assert list(only) == ["global"] and only["global"] == slice(0, 300)


def test_one_and_batch_answers_of_a_bimodal_tail_carry_its_note(
    home: Any, make_app: Any
) -> None:
    """A p99 on a slow mode for a random quarter of the workloads: the single answer and the
    batch both say so, for that metric only (the batch said nothing before)."""
    from modeling.training.train import train_device
    from tests.modeling.conftest import fast_candidates, synthetic_rows
    from tests.modeling.test_percentile_ladder import known_tail

    rows = known_tail(synthetic_rows(noise=0.02, seed=11))
    slow = np.random.default_rng(7).random(len(rows)) < 0.25
    rows = rows.assign(latency_p99_us=np.where(slow, 20 * rows["latency_p90_us"], rows["latency_p99_us"]))
    datadir = DataDir(home)
    datadir.catalog.ensure_device("bimodal")
    datadir.catalog.add_measurements("bimodal", rows.to_dict("records"))
    train_device(datadir, "bimodal", folds=3, candidates=fast_candidates(), regions=False)
    with TestClient(make_app()) as client:
        wl = {"write_ratio": 0.0, "queue_depth": 4, "request_size": 4096, "randomness": 1.0}
        one = client.post("/v1/predict", json={"device": "bimodal", "workload": wl}).json()
        assert set(one["notes"]) == {"latency_p99_us"} and "bimodal" in one["notes"]["latency_p99_us"]
        batch = client.post("/v1/predict/batch", json={"device": "bimodal", "workloads": [wl, wl]}).json()
        assert batch["notes"] == one["notes"]
        p50 = client.post("/v1/predict/batch", json={"device": "bimodal", "workloads": [wl],
                                                     "metrics": ["latency_p50_us"]}).json()
        assert "notes" not in p50 and "derived" not in p50
