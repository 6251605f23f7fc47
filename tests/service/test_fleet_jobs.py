"""POST /v1/retrain: many devices in one job on Dask, registered by the service process."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.testclient import TestClient

from modeling.store import DataDir
from tests.service.test_jobs import wait_job
from tests.service.utils import DEVICE, assert_error, fio_files, ingest_fio

QUICK = {"candidates": ["cart"], "folds": 2}


def test_retrain_many_devices_in_one_job(trained: DataDir, make_app: Callable[..., FastAPI]):
    ingest_fio(trained, "intel-copy", fio_files())
    ingest_fio(trained, "tiny", fio_files(3))
    old = trained.catalog.active_model_version(DEVICE).version
    with TestClient(make_app(fleet_workers=1, api_token="s3cret")) as api:
        body = {"devices": ["intel-*", "tiny"], **QUICK}
        assert_error(api.post("/v1/retrain", json=body), 401)
        auth = {"Authorization": "Bearer s3cret"}
        r = api.post("/v1/retrain", json=body, headers=auth)
        assert r.status_code == 202, r.text
        assert r.json()["devices"] == ["intel-copy", DEVICE, "tiny"] and r.json()["device"] is None
        job = wait_job(api, r.json()["id"], timeout=300)
        assert job["state"] == "failed" and job["error"]["code"] == "partial_failure"
        assert set(job["result"]["succeeded"]) == {DEVICE, "intel-copy"}
        assert list(job["result"]["failed"]) == ["tiny"] and "at least" in job["result"]["failed"]["tiny"]
        new = job["result"]["succeeded"][DEVICE]
        assert new != old and trained.catalog.active_model_version(DEVICE).version == new
        served = api.post(
            "/v1/predict",
            json={
                "device": "intel-copy",
                "workload": {"write_ratio": 0, "queue_depth": 4, "request_size": 4096, "randomness": 1},
            },
        )
        assert (
            served.status_code == 200
            and served.json()["model_version"] == job["result"]["succeeded"]["intel-copy"]
        )


def test_retrain_many_needs_devices_or_all(api: TestClient):
    assert_error(api.post("/v1/retrain", json={}), 422)
    assert_error(api.post("/v1/retrain", json={"devices": ["x"], "all": True}), 422)
    assert_error(api.post("/v1/retrain", json={"devices": ["ghost"]}), 404, "unknown_device")
    assert_error(api.post("/v1/retrain", json={"devices": ["nothing-*"]}), 422)
    assert_error(api.post("/v1/retrain", json={"all": True, "candidates": ["forest"]}), 422)


def test_retrain_many_conflicts_with_a_running_retrain(api: TestClient):
    jobs = api.app.state.service.jobs
    fd = jobs._acquire(DEVICE, "f" * 32)  # as if a one-device retrain held the device
    try:
        assert_error(api.post("/v1/retrain", json={"all": True, **QUICK}), 409, "conflict")
    finally:
        import os

        os.close(fd)
