"""Devices: list, detail, and measurement uploads (fio JSON, CSV, limits, bad input)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from modeling.store import DataDir
from modeling.workload import METRICS
from tests.service.utils import DEVICE, assert_error, fio_files

CSV = (
    "write_ratio,queue_depth,request_size,randomness,numjobs,iops,latency_mean_us\n"
    "0,1,4096,1,1,9000,110\n"
    "0,8,4k,1,2,60000,260\n"
    "1,4,16384,0,1,20000,200\n"
)


def test_list_devices(api: TestClient, trained: DataDir) -> None:
    body = api.get("/v1/devices").json()
    active = trained.catalog.active_model_version(DEVICE)
    assert active is not None
    assert body == {
        "devices": [
            {
                "name": DEVICE,
                "class": "ssd",
                "created_at": body["devices"][0]["created_at"],
                "active_model_version": active.version,
                "derived": None,
            }
        ],
        "count": 1,
    }


def test_device_detail_has_sweeps_and_active_model_accuracy(api: TestClient, trained: DataDir) -> None:
    body = api.get(f"/v1/devices/{DEVICE}").json()
    assert body["name"] == DEVICE and body["class"] == "ssd"
    assert [s["n_points"] for s in body["sweeps"]] == [len(fio_files())]
    assert body["sweeps"][0]["status"] == "complete"
    model = body["active_model"]
    assert model["active"] is True
    assert set(model["accuracy"]) == set(METRICS)
    assert all(0 <= v < 10 for v in model["accuracy"].values())
    assert model["n_rows"] == len(fio_files())


def test_unknown_device_is_404(client: TestClient) -> None:
    assert_error(client.get("/v1/devices/nope"), 404, "unknown_device")


@pytest.mark.parametrize("name", ["..", ".hidden", "a%2F..%2F..", "%2E%2E", "x" * 129, "a b"])
def test_bad_device_names_never_reach_the_data_directory(client: TestClient, name: str) -> None:
    r = client.get(f"/v1/devices/{name}")
    assert r.status_code in (404, 422)
    assert_error(r, r.status_code)


def test_upload_fio_json_creates_the_device(client: TestClient) -> None:
    path = fio_files(1)[0]
    r = client.post(
        "/v1/devices/new-ssd/sweeps",
        files={"file": (path.name, path.read_bytes(), "application/json")},
        data={"device_class": "raid", "metadata": json.dumps({"controller": "P420i"})},
    )
    assert r.status_code == 201, r.text
    assert r.json()["n_points"] == 1 and r.json()["source"] == "ingest"
    detail = client.get("/v1/devices/new-ssd").json()
    assert detail["class"] == "raid" and detail["metadata"] == {"controller": "P420i"}
    assert detail["active_model"] is None


def test_upload_csv(client: TestClient) -> None:
    r = client.post("/v1/devices/csvdev/sweeps", files={"file": ("m.csv", CSV.encode(), "text/csv")})
    assert r.status_code == 201, r.text
    assert r.json()["n_points"] == 3


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b'{"jobs": [', "fio"),
        (CSV.replace("numjobs", "num_jobs").encode(), "num_jobs"),
        (CSV.replace("0,8,4k", "0,0,4k").encode(), "line 3"),
        (b"\x80\x81 binary", "UTF-8"),
    ],
)
def test_bad_upload_is_422_and_stores_nothing(client: TestClient, content: bytes, fragment: str) -> None:
    error = assert_error(client.post("/v1/devices/bad/sweeps", files={"file": ("x", content)}), 422)
    assert fragment.lower() in error["message"].lower()
    assert_error(client.get("/v1/devices/bad"), 404)


@pytest.mark.parametrize(
    "data", [{"metadata": "{not json"}, {"metadata": "[1, 2]"}, {"device_class": "floppy"}]
)
def test_bad_form_fields_are_422(client: TestClient, data: dict[str, Any]) -> None:
    assert_error(client.post("/v1/devices/d/sweeps", files={"file": ("m.csv", CSV.encode())}, data=data), 422)


def test_upload_without_file_is_422(client: TestClient) -> None:
    assert (
        "file"
        in assert_error(client.post("/v1/devices/d/sweeps", data={"device_class": "ssd"}), 422)["message"]
    )


def test_oversized_upload_is_413_while_streaming(make_app: Any) -> None:
    limit = 4096
    with TestClient(make_app(max_upload_bytes=limit)) as c:
        ok = c.post("/v1/devices/d/sweeps", files={"file": ("m.csv", CSV.encode())})
        assert ok.status_code == 201, ok.text
        big = CSV.encode() + b"0,1,4096,1,1,9000,110\n" * 400

        # A chunked body has no Content-Length: the limit must cut the stream itself.
        def stream() -> Any:
            boundary = b'--b\r\nContent-Disposition: form-data; name="file"; filename="m.csv"\r\n\r\n'
            yield boundary
            for i in range(0, len(big), 1024):
                yield big[i : i + 1024]
            yield b"\r\n--b--\r\n"

        r = c.post(
            "/v1/devices/d2/sweeps",
            content=stream(),
            headers={"content-type": "multipart/form-data; boundary=b"},
        )
        assert_error(r, 413, "too_large")
        r = c.post("/v1/devices/d2/sweeps", files={"file": ("m.csv", big)})
        assert_error(r, 413, "too_large")
        assert_error(c.get("/v1/devices/d2"), 404)
