"""Derived (what-if) devices through the API: listed, predicted one and batch, marked derived."""

from __future__ import annotations

from fastapi.testclient import TestClient

from modeling.derived.store import register_derived
from modeling.store import DataDir
from tests.service.utils import DEVICE, assert_error

WORKLOAD = {"write_ratio": 0.0, "queue_depth": 4, "request_size": 4096, "randomness": 1.0, "numjobs": 4}


def test_devices_predict_and_batch_mark_the_whatif(trained: DataDir, api: TestClient) -> None:
    register_derived(
        trained, "arr", {"kind": "raid", "base": DEVICE, "level": 10, "members": 4, "chunk": 65536}
    )
    listed = {d["name"]: d for d in api.get("/v1/devices").json()["devices"]}
    assert listed["arr"]["derived"]["level"] == 10 and listed["arr"]["class"] == "raid"
    assert listed[DEVICE]["derived"] is None
    one = api.post("/v1/predict", json={"device": "arr", "workload": WORKLOAD})
    assert one.status_code == 200, one.text
    body = one.json()
    assert body["derived"]["base"] == DEVICE and "raid10 of 4" in body["derived"]["law"]
    assert body["predictions"]["iops"]["model"] == "whatif" and body["predictions"]["iops"]["value"] > 0
    assert "derived" not in api.post("/v1/predict", json={"device": DEVICE, "workload": WORKLOAD}).json()
    batch = api.post(
        "/v1/predict/batch", json={"device": "arr", "workloads": [WORKLOAD, {**WORKLOAD, "numjobs": 16}]}
    )
    assert batch.status_code == 200, batch.text
    iops = batch.json()["predictions"]["iops"]["value"]
    assert batch.json()["derived"]["kind"] == "raid" and iops[1] >= iops[0]


def test_whatif_of_a_device_without_model_is_a_json_error(trained: DataDir, api: TestClient) -> None:
    trained.catalog.ensure_device("bare")
    register_derived(
        trained,
        "arr2",
        {"kind": "fabric", "base": "bare", "transport": "tcp", "added_latency_us": 20.0, "link_gbps": 25.0},
    )
    r = api.post("/v1/predict", json={"device": "arr2", "workload": WORKLOAD})
    assert_error(r, 404, "no_model")


def test_a_whatif_device_is_ranked_beside_its_base(trained: DataDir, api: TestClient) -> None:
    """Fleet ranking reads each device's metrics, not a measured model's specs (a what-if has none)."""
    register_derived(
        trained, "arr3", {"kind": "raid", "base": DEVICE, "level": 0, "members": 3, "chunk": 65536}
    )
    r = api.post("/v1/fleet/predict", json={"devices": [DEVICE, "arr3"], "workloads": [WORKLOAD]})
    assert r.status_code == 200, r.text
    assert "arr3" in r.text and not r.json().get("skipped")
