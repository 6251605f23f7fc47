"""The fleet endpoints: POST /v1/fleet/predict (rank devices) and POST /v1/retrain (many devices, one job).

The fleet is the modeling tests' one ("fast" 4x "mid" 4x "slow", an untrained device, a
device trained on IOPS only), built through the real training code.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from modeling.store import DataDir
from tests.modeling.conftest import synthetic_rows
from tests.modeling.test_fleet_rank import WORKLOADS, fleet, fleet_template
from tests.service.utils import assert_error

__all__ = ["fleet", "fleet_template"]

ROWS = WORKLOADS.to_dict("records")
TOKEN = "fleet-token"


@pytest.fixture
def api(fleet: DataDir, make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    """A client of an app (token required, one-process local cluster) over the fleet."""
    with TestClient(make_app(api_token=TOKEN, fleet_workers=1), raise_server_exceptions=False) as c:
        yield c


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_fleet_predict_ranks_devices_with_batch_predictions(api: TestClient) -> None:
    r = api.post("/v1/fleet/predict", json={"devices": ["*"], "workloads": ROWS})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rank_by"] == "latency_p99_us" and body["higher_is_better"] is False and body["count"] == 4
    assert body["ranking"] == [["fast", "mid", "slow"]] * 4
    skipped = {s["device"]: s["code"] for s in body["skipped"]}
    assert skipped == {"untrained": "no_model", "iops-only": "not_found"}
    for device in ("fast", "mid", "slow"):
        batch = api.post("/v1/predict/batch", json={"device": device, "workloads": ROWS}).json()
        assert body["devices"][device] == {"model_version": batch["model_version"],
                                           "predictions": batch["predictions"]}

    columns = {c: WORKLOADS[c].tolist() for c in WORKLOADS.columns}
    r = api.post("/v1/fleet/predict", json={"all_devices": True, "columns": columns, "rank_by": "iops",
                                            "top": 1, "metrics": ["iops"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["higher_is_better"] is True and body["ranking"] == [["iops-only"]] * 4
    assert all(set(d["predictions"]) == {"iops"} for d in body["devices"].values())


def test_fleet_predict_errors(api: TestClient, make_app: Callable[..., FastAPI]) -> None:
    one = {"workloads": ROWS[:1]}
    assert_error(api.post("/v1/fleet/predict", json={**one, "devices": ["fast"], "all_devices": True}), 422)
    assert_error(api.post("/v1/fleet/predict", json=one), 422)
    assert_error(api.post("/v1/fleet/predict", json={**one, "devices": ["../x"]}), 422)
    assert_error(api.post("/v1/fleet/predict", json={**one, "devices": ["fast"], "rank_by": "speed"}), 422)
    assert_error(api.post("/v1/fleet/predict", json={**one, "devices": ["ghost"]}), 404, "unknown_device")
    none = api.post("/v1/fleet/predict", json={**one, "devices": ["untrained"]})
    error = assert_error(none, 404, "no_model")
    assert error["details"]["skipped"][0]["device"] == "untrained"
    with TestClient(make_app(max_batch=3), raise_server_exceptions=False) as small:
        assert_error(small.post("/v1/fleet/predict", json={"devices": ["fast"], "workloads": ROWS}), 413)


def test_openapi_documents_the_fleet_endpoints(api: TestClient) -> None:
    doc = api.get("/openapi.json").json()
    fleet_post = doc["paths"]["/v1/fleet/predict"]["post"]
    assert fleet_post["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "FleetPredictRequest")
    assert fleet_post["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "FleetPredictResponse")
    retrain = doc["paths"]["/v1/retrain"]["post"]
    assert {"202", "401", "403", "404", "409", "422"} <= set(retrain["responses"])
    assert retrain["security"]  # the bearer token is documented
    assert "rank_by" in doc["components"]["schemas"]["FleetPredictRequest"]["properties"]


def test_retrain_many_needs_the_token_and_refuses_a_busy_device(api: TestClient, fleet: DataDir) -> None:
    body = {"devices": ["fast", "mid"], "candidates": ["cart"], "folds": 2}
    assert_error(api.post("/v1/retrain", json=body), 401)
    assert_error(api.post("/v1/retrain", json=body, headers={"Authorization": "Bearer wrong"}), 403)
    assert_error(api.post("/v1/retrain", json={**body, "candidates": ["forest"]}, headers=AUTH), 422)
    assert_error(api.post("/v1/retrain", json={"devices": ["fast"], "all_devices": True}, headers=AUTH), 422)
    with fleet.device_lock("mid", "sweep", detail="a sweep"):
        error = assert_error(api.post("/v1/retrain", json=body, headers=AUTH), 409, "device_busy")
        assert error["details"]["operation"] == "sweep"
        assert fleet.lock_holder("fast") is None  # nothing was started, no lock kept
    assert fleet.catalog.list_model_versions("fast")[-1].active  # still the one version


def _wait(client: TestClient, job_id: str, timeout: float = 300.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["state"] not in ("queued", "running"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not finish in {timeout} s")


@pytest.mark.slow
def test_retrain_many_in_one_job_a_failed_device_does_not_stop_the_others(
    api: TestClient, fleet: DataDir
) -> None:
    fleet.catalog.ensure_device("tiny")  # too few points to train: fails alone
    fleet.catalog.add_measurements("tiny", synthetic_rows(seed=9).head(4).to_dict("records"))
    before = {d: fleet.catalog.active_model_version(d).version for d in ("fast", "slow")}  # type: ignore[union-attr]
    r = api.post("/v1/retrain", headers=AUTH, json={"devices": ["fast", "slow", "untrained", "tiny"],
                                                     "candidates": ["cart"], "folds": 2, "activate": True})
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["device"] == "*" and job["devices"] == ["fast", "slow", "untrained", "tiny"]
    # while it runs, every device of the job is held by it (or already done)
    conflict = api.post("/v1/devices/fast/retrain", headers=AUTH, json={"folds": 2})
    assert conflict.status_code in (202, 409)
    if conflict.status_code == 409:
        assert conflict.json()["error"]["details"]["detail"] == job["id"]
    else:  # the fleet was already done with "fast": wait for that retrain too
        _wait(api, conflict.json()["id"])
    done = _wait(api, job["id"])
    assert done["state"] == "failed" and done["error"]["code"] == "devices_failed", done
    assert done["error"]["details"]["failed"] == ["tiny"]
    outcome = done["result"]["devices"]
    assert outcome["tiny"]["state"] == "failed" and "at least" in outcome["tiny"]["error"]
    for device in ("fast", "slow", "untrained"):
        assert outcome[device]["state"] == "succeeded" and outcome[device]["active"], outcome[device]
        active = fleet.catalog.active_model_version(device)
        assert active is not None and active.version == outcome[device]["model_version"]
        assert active.version != before.get(device)
        served = api.post("/v1/predict", json={"device": device, "workload": ROWS[0]}).json()
        assert served["model_version"] == active.version
    assert done["result"]["succeeded"] == 3 and done["result"]["failed"] == 1
    assert all(fleet.lock_holder(d) is None for d in job["devices"])
    assert not list((fleet.root / "locks" / "jobs").glob("*.lock"))  # the job's own lock is gone
