"""Micro-batching: concurrent single predictions share one model call and get their own answers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from modeling.errors import NotFound
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


def test_concurrent_predictions_match_one_at_a_time(trained: DataDir) -> None:
    model = ModelRegistry(trained).load(DEVICE)
    batcher = PredictionBatcher()
    calls = 0
    original = model.predict_matrix

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return original(*args, **kwargs)

    model.predict_matrix = counting  # type: ignore[method-assign]

    async def run() -> list[dict[str, Any]]:
        return await asyncio.gather(*(batcher.predict(model, w, None, "auto") for w in WORKLOADS))

    results = asyncio.run(run())
    assert calls == 1  # one vectorised call for the five requests
    model.predict_matrix = original  # type: ignore[method-assign]
    for workload, result in zip(WORKLOADS, results, strict=True):
        expected = _as_dict(model.predict_one(workload))
        assert result.keys() == expected.keys()
        for metric, want in expected.items():
            got = dict(result[metric])
            far = model.predict_one(workload).extrapolation
            assert got.pop("extrapolation") == (far if got["extrapolated"] else {})
            assert got == pytest.approx(want)


def test_a_pair_takes_the_row_path_with_the_same_answers(trained: DataDir) -> None:
    model = ModelRegistry(trained).load(DEVICE)
    batcher = PredictionBatcher()
    calls: list[str] = []
    matrix, row = model.predict_matrix, model.predict_row
    model.predict_matrix = lambda *a, **k: calls.append("matrix") or matrix(*a, **k)  # type: ignore[method-assign]
    model.predict_row = lambda *a, **k: calls.append("row") or row(*a, **k)  # type: ignore[method-assign]

    async def run() -> list[dict[str, Any]]:
        return await asyncio.gather(*(batcher.predict(model, w, None, "auto") for w in WORKLOADS[:2]))

    results = asyncio.run(run())
    assert calls == ["row", "row"]
    model.predict_matrix, model.predict_row = matrix, row  # type: ignore[method-assign]
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
