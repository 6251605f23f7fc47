"""Micro-batching: concurrent single predictions share one model call and get their own answers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from modeling.errors import NotFound
from modeling.serving import device_model
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from modeling.workload import Workload
from service.api.batcher import PredictionBatcher
from tests.service.utils import DEVICE

WORKLOADS = [
    Workload(write_ratio=wr, queue_depth=qd, request_size=4096, randomness=1.0, numjobs=nj)
    for wr, qd, nj in [(0.0, 1, 1), (1.0, 32, 8), (0.5, 4, 2), (0.0, 64, 32), (1.0, 1, 1)]
]


def _as_dict(prediction: Any) -> dict[str, Any]:
    return {
        m: {
            "value": p.value,
            "lower": p.lower,
            "upper": p.upper,
            "extrapolated": p.extrapolated,
            "model": p.model,
        }
        for m, p in prediction.predictions.items()
    }


def _paths(monkeypatch: Any) -> list[str]:
    """The paths DeviceModel.predict takes from now on, one entry per call of either."""
    calls: list[str] = []
    for name in ("matrix", "row"):
        real = getattr(device_model, f"predict_{name}")

        def counting(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            calls.append(_name)
            return _real(*a, **k)

        monkeypatch.setattr(device_model, f"predict_{name}", counting)
    return calls


def test_concurrent_predictions_match_one_at_a_time(trained: DataDir, monkeypatch: Any) -> None:
    model = ModelRegistry(trained).load(DEVICE)
    batcher = PredictionBatcher()
    calls = _paths(monkeypatch)

    async def run() -> list[dict[str, Any]]:
        return await asyncio.gather(*(batcher.predict(model, w, None, "auto") for w in WORKLOADS))

    results = asyncio.run(run())
    assert calls == ["matrix"]  # one vectorised call for the five requests
    monkeypatch.undo()
    for workload, result in zip(WORKLOADS, results, strict=True):
        expected = _as_dict(model.predict_one(workload))
        assert result.keys() == expected.keys()
        for metric, want in expected.items():
            got = dict(result[metric])
            far = model.predict_one(workload).extrapolation
            assert got.pop("extrapolation") == (far if got["extrapolated"] else {})
            assert got == pytest.approx(want)


def test_a_pair_takes_the_row_path_with_the_same_answers(trained: DataDir, monkeypatch: Any) -> None:
    model = ModelRegistry(trained).load(DEVICE)
    batcher = PredictionBatcher()
    calls = _paths(monkeypatch)

    async def run() -> list[dict[str, Any]]:
        return await asyncio.gather(*(batcher.predict(model, w, None, "auto") for w in WORKLOADS[:2]))

    results = asyncio.run(run())
    assert calls == ["row", "row"]
    monkeypatch.undo()
    for workload, result in zip(WORKLOADS[:2], results, strict=True):
        one = model.predict_one(workload)
        for metric, want in _as_dict(one).items():
            got = dict(result[metric])
            assert got.pop("extrapolation") == (one.extrapolation if got["extrapolated"] else {})
            assert got == pytest.approx(want)


def test_groups_split_by_metrics_and_model_choice(trained: DataDir) -> None:
    model = ModelRegistry(trained).load(DEVICE)
    batcher = PredictionBatcher()

    async def run() -> list[Any]:
        return await asyncio.gather(
            batcher.predict(model, WORKLOADS[0], ["iops"], "auto"),
            batcher.predict(model, WORKLOADS[1], None, "global"),
            batcher.predict(model, WORKLOADS[2], None, "write-sequential-large"),
            return_exceptions=True,
        )

    only_iops, global_model, missing = asyncio.run(run())
    assert list(only_iops) == ["iops"]
    assert {p["model"] for p in global_model.values()} == {"global"}
    assert isinstance(missing, NotFound)  # that region has no model; the others still answered


def test_a_whatif_device_answers_through_the_same_entry_point() -> None:
    """The registry may hand the batcher a derived (what-if) model: it answers ``predict`` too."""
    from modeling.derived.model import DerivedModel
    from tests.modeling.derived.analytic import AnalyticMember

    spec = {"kind": "raid", "base": "analytic", "level": 0, "members": 2, "chunk": 65536,
            "ceiling_iops": None, "ceiling_mib_s": None}
    model = DerivedModel("r0", "whatif-1", spec, AnalyticMember())
    batcher = PredictionBatcher()

    async def run(group: list[Workload]) -> list[dict[str, Any]]:
        return await asyncio.gather(*(batcher.predict(model, w, ["iops"], "auto") for w in group))

    for group in (WORKLOADS[:1], WORKLOADS):
        for workload, result in zip(group, asyncio.run(run(group)), strict=True):
            want = model.predict_one(workload, ["iops"]).predictions["iops"]
            assert result["iops"]["value"] == pytest.approx(want.value)
            assert result["iops"]["model"] == "whatif" and result["iops"]["lower"] is None
