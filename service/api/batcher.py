"""Micro-batching of single predictions: concurrent requests share one vectorised model call.

A model call costs nearly the same for one workload as for a few dozen (numpy overhead
dominates), so single-workload requests that arrive in the same event-loop turn for the
same model object, metrics and model choice are predicted together.  A lone request
waits one loop turn (microseconds); under concurrency each request's share of the model
call shrinks.  Every request of a group uses the same ``DeviceModel`` object, so a
response still comes from exactly one model version.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from modeling.device_model import DeviceModel
from modeling.workload import WORKLOAD_FIELDS, Workload

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
            w = np.array([[float(getattr(wl, f)) for f in WORKLOAD_FIELDS] for wl, _ in group])
            out = model.predict_matrix(w, metrics, choice)
        except Exception as exc:  # the same input error for every request of the group
            for _, future in group:
                if not future.done():
                    future.set_exception(exc)
            return
        for i, (_, future) in enumerate(group):
            if future.done():  # the client went away
                continue
            future.set_result(
                {
                    metric: {
                        "value": float(value[i]),
                        "lower": _finite(lower[i]),
                        "upper": _finite(upper[i]),
                        "extrapolated": bool(extrapolated[i]),
                        "model": str(scope[i]),
                    }
                    for metric, (value, lower, upper, extrapolated, scope) in out.items()
                }
            )


def _finite(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else x
