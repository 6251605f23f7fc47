"""Micro-batching of single predictions: concurrent requests share one vectorised model call.

A model call costs nearly the same for one workload as for a few dozen (numpy overhead
dominates), so single-workload requests that arrive in the same event-loop turn for the
same model object, metrics and model choice are predicted together.  A lone request
waits one loop turn (microseconds); under concurrency each request's share of the model
call shrinks.  The model picks its path (``DeviceModel.predict``: a pair row by row, more
as a matrix); this module knows only that entry point.  Every request of a group uses
the same ``DeviceModel`` object, so a response still comes from exactly one model version.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

from modeling.serving.device_model import DeviceModel
from modeling.workload import Workload

_Key = tuple[DeviceModel, tuple[str, ...] | None, str]


class PredictionBatcher:
    """Coalesces concurrent single-workload predictions; use from one event loop."""

    def __init__(self) -> None:
        self._pending: dict[_Key, list[tuple[Workload, asyncio.Future[dict[str, Any]]]]] = {}

    async def predict(
        self, model: DeviceModel, workload: Workload, metrics: Sequence[str] | None, choice: str
    ) -> dict[str, Any]:
        """Per metric ``{"value", "lower", "upper", "extrapolated", "model"}`` for one workload."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        key = (model, tuple(metrics) if metrics else None, choice)
        group = self._pending.get(key)
        if group is None:
            group = self._pending[key] = []
            loop.call_soon(self._flush, key)  # after the requests already runnable in this turn
        group.append((workload, future))
        return await future

    def _flush(self, key: _Key) -> None:
        group = self._pending.pop(key)
        model, metrics, choice = key
        try:
            # the model picks its path: a small group row by row, a larger one as a matrix
            answers = model.predict([wl for wl, _ in group], metrics, choice)
            results = [_answer(answers.row(i), answers.far(i)) for i in range(len(group))]
        except Exception as exc:  # the same input error for every request of the group
            for _, future in group:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), result in zip(group, results, strict=True):
            if not future.done():  # else the client went away
                future.set_result(result)


def _answer(per_metric: dict[str, tuple[Any, ...]], far: dict[str, float]) -> dict[str, Any]:
    """The response's prediction objects from (value, lower, upper, extrapolated, scope) per metric.

    ``far`` is the workload's ``{field: factor}`` outside the measured range, given with
    every extrapolated metric.
    """
    return {
        metric: {
            "value": float(value),
            "lower": _finite(lower),
            "upper": _finite(upper),
            "extrapolated": bool(extrapolated),
            "model": str(scope),
            "extrapolation": far if extrapolated else {},
        }
        for metric, (value, lower, upper, extrapolated, scope) in per_metric.items()
    }


def _finite(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else x
