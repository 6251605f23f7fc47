"""POST /v1/capacity and /v1/fleet/capacity: answers, errors in the one shape, no token needed."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from modeling.store import DataDir
from service.api.schemas.capacity import CapacityResponse, FleetCapacityResponse
from tests.modeling.test_fleet_rank import ALL, fleet, fleet_template
from tests.service.utils import DEVICE, assert_error
from traces.capacity.device import device_capacity, mix_table, parse_mix
from traces.capacity.slo import parse_slo

__all__ = ["fleet", "fleet_template"]

MIX = {"write_ratio": 0.3, "request_size": "16k", "randomness": 1}
TOKEN = "capacity-token"


@pytest.fixture
def locked(trained: DataDir, make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    """The trained device behind an app that requires a token for its mutating endpoints."""
    with TestClient(make_app(api_token=TOKEN), raise_server_exceptions=False) as c:
        yield c


def test_capacity_answers_as_the_domain_does_without_a_token(locked: TestClient, trained: DataDir) -> None:
    body = {"device": DEVICE, "workloads": [MIX, {**MIX, "write_ratio": 0.0}], "slo": "p99<=2ms,mean<=1ms"}
    r = locked.post("/v1/capacity", json=body)  # read-only, like predict: no token
    assert r.status_code == 200, r.text
    doc = CapacityResponse.model_validate(r.json())
    assert doc.device == DEVICE and len(doc.answers) == 2
    direct = device_capacity(
        trained,
        DEVICE,
        mix_table([parse_mix("write_ratio=0.3,request_size=16k,randomness=1")]),
        parse_slo(body["slo"]),
    )
    assert doc.answers[0].iops == pytest.approx(direct.answers[0].iops)
    assert doc.answers[0].outcome == direct.answers[0].outcome
    assert doc.answers[0].workload["request_size"] == 16384


@pytest.mark.parametrize(
    ("change", "status", "code", "words"),
    [
        ({"device": "nope"}, 404, "unknown_device", "nope"),
        ({"slo": "p95<=1ms"}, 422, None, "cannot target 'p95'"),
        ({"slo": "p99<=1"}, 422, None, "give the limit a unit"),
        ({"workloads": [{**MIX, "queue_depth": 4}]}, 422, "validation_error", "queue_depth"),
        ({"workloads": [{**MIX, "write_ratio": 2}]}, 422, "validation_error", "write_ratio"),
        ({"workloads": []}, 422, "validation_error", "workloads"),
        ({"burstiness": 0}, 422, "validation_error", "burstiness"),
        ({"colour": "blue"}, 422, "validation_error", "colour"),
    ],
)
def test_capacity_errors_are_the_predict_errors(
    api: TestClient, change: dict, status: int, code: str | None, words: str
) -> None:
    r = api.post("/v1/capacity", json={"device": DEVICE, "workloads": [MIX], "slo": "p99<=1ms", **change})
    err = assert_error(r, status, code)
    assert words in err["message"], err


def test_fleet_capacity_ranks_and_lists_the_skipped(fleet: DataDir, make_app: Callable[..., FastAPI]) -> None:
    with TestClient(make_app(), raise_server_exceptions=False) as api:
        r = api.post("/v1/fleet/capacity", json={"devices": ALL, "workloads": [MIX], "slo": "p99<=5ms"})
        assert r.status_code == 200, r.text
        doc = FleetCapacityResponse.model_validate(r.json())
        (mix,) = doc.mixes
        assert [a.device for a in mix.ranking] == ["fast", "mid", "slow"]
        assert [a.rank for a in mix.ranking] == [1, 2, 3]
        assert mix.ranking[0].iops >= mix.ranking[1].iops >= mix.ranking[2].iops
        assert sorted(doc.without_open_loop_points) == ["fast", "mid", "slow"]
        skipped = {s.device: s for s in doc.skipped}
        assert skipped["untrained"].code == "no_model"
        assert skipped["iops-only"].code == "not_found" and "latency" in skipped["iops-only"].reason
        r = api.post(
            "/v1/fleet/capacity", json={"devices": ["untrained"], "workloads": [MIX], "slo": "p99<=5ms"}
        )
        assert_error(r, 404, "no_model")
        r = api.post("/v1/fleet/capacity", json={"devices": ["zz*"], "workloads": [MIX], "slo": "p99<=5ms"})
        assert_error(r, 404, "no_device")  # a well-formed request that selects nothing
        r = api.post("/v1/fleet/capacity", json={"workloads": [MIX], "slo": "p99<=5ms"})
        assert_error(r, 422, "validation_error")


def test_repeated_mixes_get_the_same_answer_and_the_fleet_has_a_budget(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = api.post("/v1/capacity", json={"device": DEVICE, "workloads": [MIX] * 3, "slo": "p99<=2ms"})
    assert r.status_code == 200, r.text
    answers = r.json()["answers"]
    assert len(answers) == 3 and answers[0] == answers[1] == answers[2]
    monkeypatch.setattr("service.api.routes.capacity.MAX_FLEET_SEARCHES", 1)
    two = [MIX, {**MIX, "write_ratio": 1.0}, MIX]  # three mixes asked, two distinct
    r = api.post("/v1/fleet/capacity", json={"all_devices": True, "workloads": two, "slo": "p99<=2ms"})
    found = re.match(
        r"(\d+) devices x (\d+) distinct mixes is (\d+) searches", assert_error(r, 413)["message"]
    )
    assert found, r.text
    devices, mixes, searches = (int(g) for g in found.groups())
    assert mixes == 2 and searches == 2 * devices  # what is counted is what the message says
    # a mix asked three times is one search a device
    monkeypatch.setattr("service.api.routes.capacity.MAX_FLEET_SEARCHES", devices)
    r = api.post("/v1/fleet/capacity", json={"all_devices": True, "workloads": [MIX] * 3, "slo": "p99<=2ms"})
    assert r.status_code == 200, r.text


def test_the_openapi_schema_holds_the_response_models(api: TestClient) -> None:
    spec = api.get("/openapi.json").json()
    for path, model in (
        ("/v1/capacity", "CapacityResponse"),
        ("/v1/fleet/capacity", "FleetCapacityResponse"),
    ):
        ok = spec["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok["$ref"].endswith(model)
        assert "422" in spec["paths"][path]["post"]["responses"]
    assert "queue_depth" not in spec["components"]["schemas"]["WorkloadMix"]["properties"]
