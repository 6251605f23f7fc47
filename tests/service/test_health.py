"""Health, readiness, Prometheus metrics, and the one error shape for framework errors."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from modeling.store import DataDir
from tests.service.utils import DEVICE, assert_error
from tests.service.utils import wait_ready as _ready

WORKLOAD = {"write_ratio": 0.0, "queue_depth": 4, "request_size": 4096, "randomness": 1.0}


def test_healthz(client: TestClient) -> None:
    assert client.get("/healthz").json()["status"] == "ok"


def test_readyz_lists_the_loaded_models(api: TestClient, trained: DataDir) -> None:
    r = _ready(api)
    assert r.status_code == 200, r.text
    active = trained.catalog.active_model_version(DEVICE)
    assert r.json() == {"ready": True, "models": {DEVICE: active.version}, "errors": {}}  # type: ignore[union-attr]


def test_readyz_is_503_when_a_model_cannot_load(trained: DataDir, make_app: Any) -> None:
    active = trained.catalog.active_model_version(DEVICE)
    assert active is not None
    (trained.models_dir / active.path / "manifest.json").write_text("{}")
    with TestClient(make_app(), raise_server_exceptions=False) as c:
        r = _ready(c)
        assert r.status_code == 503 and r.json()["ready"] is False
        assert "CorruptModel" in r.json()["errors"][DEVICE]
        assert_error(
            c.post("/v1/predict", json={"device": DEVICE, "workload": WORKLOAD}), 503, "corrupt_model"
        )


def test_metrics_count_routes_predictions_and_jobs(api: TestClient) -> None:
    api.post("/v1/predict", json={"device": DEVICE, "workload": WORKLOAD})
    api.post("/v1/predict/batch", json={"device": DEVICE, "workloads": [WORKLOAD] * 3})
    api.get("/v1/devices/nope")
    api.get("/no/such/path")
    api.post("/v1/devices/nope/retrain")
    text = api.get("/metrics").text
    assert 'ssdpredict_http_requests_total{method="POST",route="/v1/predict",status="200"} 1.0' in text
    assert (
        'ssdpredict_http_requests_total{method="GET",route="/v1/devices/{device}",status="404"} 1.0' in text
    )
    assert 'route="<unmatched>",status="404"' in text
    assert 'ssdpredict_http_request_duration_seconds_count{method="POST",route="/v1/predict"} 1.0' in text
    assert f'ssdpredict_predictions_total{{device="{DEVICE}"}} 4.0' in text
    assert "ssdpredict_retrain_jobs_running 0.0" in text


def test_framework_errors_use_the_error_shape(client: TestClient) -> None:
    assert_error(client.get("/v1/nothing"), 404, "not_found")
    assert_error(client.get("/v1/predict"), 405, "method_not_allowed")
    assert_error(client.post("/v1/predict", content=b"[]", headers={"content-type": "application/json"}), 422)


def test_unexpected_errors_are_a_bare_500(make_app: Any) -> None:
    app = make_app()

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("secret internals at /home/x")

    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/boom")
    error = assert_error(r, 500, "internal_error")
    assert "secret" not in r.text and "Traceback" not in r.text and error["details"] is None


def test_openapi_has_an_example_for_every_operation(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    components = schema["components"]["schemas"]

    def has_example(media: dict[str, Any]) -> bool:
        s = media.get("schema", {})
        ref = s.get("$ref", "").rsplit("/", 1)[-1]
        return bool(media.get("example") or media.get("examples") or components.get(ref, {}).get("examples"))

    missing = []
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            if path == "/metrics":
                continue
            body = op.get("requestBody", {}).get("content", {})
            ok_body = all(has_example(m) for ct, m in body.items() if ct == "application/json")
            ok_response = any(
                has_example(m)
                for code, r in op["responses"].items()
                if code.startswith("2")
                for m in r.get("content", {}).values()
            )
            params_ok = all(
                p.get("example") is not None or p.get("examples") or p["schema"].get("examples")
                for p in op.get("parameters", [])
                if p["in"] == "path"
            )
            if not (ok_body and ok_response and params_ok):
                missing.append(f"{method.upper()} {path}")
    assert not [m for m in missing if "validate" not in m], missing
