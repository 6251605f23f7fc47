"""Bearer token on mutating endpoints; CORS only when configured."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from modeling.store import DataDir
from tests.service.utils import DEVICE, assert_error

TOKEN = "s3cret-token"
CSV = b"write_ratio,queue_depth,request_size,randomness,iops\n0,1,4096,1,9000\n"


@pytest.fixture
def secured(trained: DataDir, make_app: Any) -> Iterator[TestClient]:
    with TestClient(make_app(api_token=TOKEN), raise_server_exceptions=False) as c:
        yield c


def _mutations(version: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("/v1/devices/up/sweeps", {"files": {"file": ("m.csv", CSV)}}),
        # "up" exists once the upload succeeded; one row is too few, so the job ends at once.
        ("/v1/devices/up/retrain", {"json": {"folds": 2}}),
        (f"/v1/devices/{DEVICE}/models/{version}/activate", {}),
    ]


def test_mutating_endpoints_need_the_token(secured: TestClient, trained: DataDir) -> None:
    version = trained.catalog.active_model_version(DEVICE).version  # type: ignore[union-attr]
    for path, kwargs in _mutations(version):
        missing = assert_error(secured.post(path, **kwargs), 401, "unauthorized")
        assert "Bearer" in missing["message"]
        assert_error(
            secured.post(path, headers={"Authorization": "Bearer wrong"}, **kwargs), 403, "forbidden"
        )
        assert_error(secured.post(path, headers={"Authorization": f"Basic {TOKEN}"}, **kwargs), 401)
        ok = secured.post(path, headers={"Authorization": f"Bearer {TOKEN}"}, **kwargs)
        assert ok.status_code in (200, 201, 202), ok.text
    assert secured.post(_mutations(version)[0][0]).headers["www-authenticate"] == "Bearer"


def test_reads_and_predictions_need_no_token(secured: TestClient) -> None:
    workload = {"write_ratio": 0, "queue_depth": 1, "request_size": 4096, "randomness": 1}
    assert secured.post("/v1/predict", json={"device": DEVICE, "workload": workload}).status_code == 200
    assert secured.get(f"/v1/devices/{DEVICE}").status_code == 200
    assert secured.get("/v1/devices").status_code == 200


def test_without_a_token_setting_mutations_are_open(api: TestClient) -> None:
    r = api.post("/v1/devices/up/sweeps", files={"file": ("m.csv", CSV)})
    assert r.status_code == 201, r.text


def test_openapi_documents_the_bearer_scheme(secured: TestClient) -> None:
    schema = secured.get("/openapi.json").json()
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert "security" in schema["paths"]["/v1/devices/{device}/retrain"]["post"]
    assert "security" not in schema["paths"]["/v1/predict"]["post"]


def test_cors_is_off_unless_configured(api: TestClient, trained: DataDir, make_app: Any) -> None:
    preflight = {"Origin": "https://ui.example", "Access-Control-Request-Method": "POST"}
    assert "access-control-allow-origin" not in api.options("/v1/predict", headers=preflight).headers
    assert (
        "access-control-allow-origin"
        not in api.get("/v1/devices", headers={"Origin": "https://ui.example"}).headers
    )
    with TestClient(make_app(cors_origins='["https://ui.example"]')) as c:
        r = c.options("/v1/predict", headers=preflight)
        assert r.headers["access-control-allow-origin"] == "https://ui.example"
        assert (
            "access-control-allow-origin"
            not in c.options("/v1/predict", headers={**preflight, "Origin": "https://evil.example"}).headers
        )


def test_validate_needs_the_token_and_its_errors_show_no_server_path(
    secured: TestClient, trained: DataDir
) -> None:
    path = f"/v1/devices/{DEVICE}/validate"
    upload = {"files": {"file": ("my.trace", b"not a trace at all\n\x00\x01")}}
    assert_error(secured.post(path, **upload), 401, "unauthorized")
    assert_error(secured.post(path, headers={"Authorization": "Bearer wrong"}, **upload), 403, "forbidden")
    r = secured.post(path, headers={"Authorization": f"Bearer {TOKEN}"}, **upload)
    assert r.status_code == 422, r.text
    assert str(trained.root) not in r.text and "upload-" not in r.text and "/tmp" not in r.text
    assert "my.trace" in r.text
