"""Hostile uploads (issue 12, items 11 and 13): malformed fio JSON and absurd metadata get a
4xx in the one error shape, nothing is stored, and the server never answers 500."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from modeling.errors import UnknownDevice
from modeling.store import DataDir
from tests.collectors.test_fio_hostile import VALUES
from tests.service.utils import assert_error

CSV = "write_ratio,queue_depth,request_size,randomness,iops\n0,1,4096,1,9000\n"


def _csv_file() -> dict[str, tuple[str, bytes]]:
    return {"file": ("m.csv", CSV.encode())}


@pytest.mark.parametrize("text,field", VALUES.values(), ids=VALUES.keys())
def test_malformed_fio_upload_is_422_and_stores_nothing(
    client: TestClient, datadir: DataDir, text: str, field: str
) -> None:
    res = client.post("/v1/devices/dev/sweeps", files={"file": ("up.json", text.encode())})
    error = assert_error(res, 422, "bad_fio_output")
    assert "up.json" in error["message"] and field in error["message"]
    with pytest.raises(UnknownDevice):
        datadir.catalog.get_device("dev")


@pytest.mark.parametrize("depth", [17, 1000, 30_000])
def test_deeply_nested_metadata_is_refused_before_parsing(client: TestClient, depth: int) -> None:
    meta = '{"a": ' + "[" * depth + "]" * depth + "}"
    res = client.post("/v1/devices/dev/sweeps", files=_csv_file(), data={"metadata": meta})
    error = assert_error(res, 422, "invalid_input")
    assert "levels deep" in error["message"] and error["details"] == {"field": "metadata"}


def test_nested_metadata_within_the_bound_and_brackets_in_strings_are_accepted(
    client: TestClient, datadir: DataDir
) -> None:
    meta = {"controller": {"cache": [[["]]]]]]]]]]]]]]]]]]]]]"]]]}, "note": "[[[[[[[[[[[[[[[[[[[[[[["}
    res = client.post(
        "/v1/devices/dev/sweeps", files={"file": ("m.csv", CSV.encode())}, data={"metadata": json.dumps(meta)}
    )
    assert res.status_code == 201, res.text
    assert datadir.catalog.get_device("dev").metadata == meta


def test_oversized_metadata_is_refused(client: TestClient) -> None:
    meta = json.dumps({"x": "a" * 70_000})
    res = client.post("/v1/devices/dev/sweeps", files=_csv_file(), data={"metadata": meta})
    assert_error(res, 422)
