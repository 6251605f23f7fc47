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


def test_a_base_with_whatifs_is_not_deleted_and_a_whatif_takes_no_measurements(
    trained: DataDir, api: TestClient
) -> None:
    """Issue 25, small ones: deleting a base left its what-ifs computing from nothing, and a
    what-if's name took an ingest (its class silently became ssd)."""
    register_derived(
        trained, "arr", {"kind": "raid", "base": DEVICE, "level": 0, "members": 2, "chunk": 65536}
    )
    error = assert_error(api.delete(f"/v1/devices/{DEVICE}"), 409, "conflict")
    assert "base of the what-if device(s) 'arr'" in error["message"] and error["details"] == {
        "whatif_devices": ["arr"]}
    assert trained.catalog.has_device(DEVICE) and trained.catalog.list_sweeps(DEVICE)
    csv = b"write_ratio,queue_depth,request_size,randomness,iops\n0,1,4096,1,9000\n"
    r = api.post("/v1/devices/arr/sweeps", files={"file": ("m.csv", csv)}, data={"metadata": '{"a": 1}'})
    error = assert_error(r, 422, "invalid_input")
    assert "'arr' is a what-if device (computed from" in error["message"]
    arr = trained.catalog.get_device("arr")
    assert arr.device_class == "raid" and "a" not in arr.metadata and trained.catalog.list_sweeps("arr") == []
    # the what-if first, then its base
    assert api.delete("/v1/devices/arr").status_code == 200
    assert api.delete(f"/v1/devices/{DEVICE}").status_code == 200
