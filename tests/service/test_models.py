"""Workload regions, model versions and activation (rollback)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from modeling.store import DataDir
from modeling.workload import REGIONS
from tests.service.utils import DEVICE, assert_error, quick_train

WORKLOAD = {"write_ratio": 0.0, "queue_depth": 4, "request_size": 4096, "randomness": 1.0}


def test_workload_models_lists_the_eight_regions(client: TestClient) -> None:
    body = client.get("/v1/workload-models").json()
    assert [r["name"] for r in body["regions"]] == [r.name for r in REGIONS]
    assert body["regions"][0]["definition"] == REGIONS[0].description
    assert body["choices"][:2] == ["auto", "global"] and len(body["choices"]) == 10


def test_versions_and_rollback(api: TestClient, trained: DataDir) -> None:
    first = trained.catalog.active_model_version(DEVICE)
    assert first is not None
    second = quick_train(trained, DEVICE)
    body = api.get(f"/v1/devices/{DEVICE}/models").json()
    assert [v["version"] for v in body["versions"]] == [first.version, second.version]
    assert body["active"] == second.version and [v["active"] for v in body["versions"]] == [False, True]

    r = api.post(f"/v1/devices/{DEVICE}/models/{first.version}/activate")
    assert r.status_code == 200, r.text
    assert r.json()["version"] == first.version and r.json()["active"] is True
    # The registry notices at once: the next prediction comes from the rolled-back version.
    p = api.post("/v1/predict", json={"device": DEVICE, "workload": WORKLOAD}).json()
    assert p["model_version"] == first.version
    assert api.get(f"/v1/devices/{DEVICE}/models").json()["active"] == first.version
    assert api.get("/readyz").json()["models"] == {DEVICE: first.version}


def test_activate_errors(api: TestClient, trained: DataDir) -> None:
    assert_error(api.post(f"/v1/devices/{DEVICE}/models/v-none/activate"), 404, "not_found")
    assert_error(api.post("/v1/devices/nope/models/v1/activate"), 404, "unknown_device")
    assert_error(api.post(f"/v1/devices/{DEVICE}/models/..%2F..%2Fx/activate"), 404)
    assert_error(api.post(f"/v1/devices/{DEVICE}/models/.v/activate"), 422)
    assert_error(api.get("/v1/devices/nope/models"), 404, "unknown_device")


def test_tampered_model_is_refused_and_not_activated(trained: DataDir, make_app: Any) -> None:
    first = trained.catalog.active_model_version(DEVICE)
    assert first is not None
    second = quick_train(trained, DEVICE)
    (trained.models_dir / first.path / "models.json").write_text("{}")
    with TestClient(make_app(), raise_server_exceptions=False) as api:
        error = assert_error(
            api.post(f"/v1/devices/{DEVICE}/models/{first.version}/activate"), 503, "corrupt_model"
        )
    assert "checksum" in error["message"]
    active = trained.catalog.active_model_version(DEVICE)
    assert active is not None and active.version == second.version
