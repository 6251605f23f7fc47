"""Routes: rank many devices for a batch of workloads (fleet prediction)."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Response

from modeling.serving.fleet_rank import rank_devices
from modeling.store.device_selection import select_devices
from service.api.deps import StateDep
from service.api.routes.predict import check_batch_size, workload_columns
from service.api.schemas import FleetPredictRequest, FleetPredictResponse, error_responses

router = APIRouter(prefix="/v1/fleet", tags=["fleet"])

_ERRORS = error_responses(
    {
        404: "a device named is unknown, or no device could be ranked",
        413: "more workloads than max_batch",
        422: "invalid request (the message names the field)",
    }
)


@router.post("/predict", response_model=FleetPredictResponse, responses=_ERRORS)
def fleet_predict(body: FleetPredictRequest, state: StateDep) -> Response:
    """Rank devices for each workload: which gives the lowest p99 (or the best `rank_by`).

    Each ranked device predicts the whole batch with its active model, column-wise as
    `/v1/predict/batch` answers; `ranking` lists, per workload, the devices best first
    (lowest first for the latencies, highest for `iops` and `bandwidth_mib_s`).  A device
    without a usable model (none trained yet, none of the `rank_by` metric or the region
    asked for) is listed in `skipped` with the reason; only when no device at all can be
    ranked is the answer a 404.
    """
    check_batch_size(body.count, state.settings.max_batch)
    devices = select_devices(state.datadir, body.devices or (), all_devices=body.all_devices)
    ranking = rank_devices(
        state.registry, devices, workload_columns(body), rank_by=body.rank_by, metrics=body.metrics,
        model=body.model, top=body.top,
    )
    for forecast in ranking.forecasts:
        state.metrics.count_predictions(forecast.device, ranking.count)
    # The shape is FleetPredictResponse by construction; orjson writes the numpy columns
    # directly (NaN -- no interval -- as null), as /v1/predict/batch does.
    return Response(orjson.dumps(ranking.as_json(), option=orjson.OPT_SERIALIZE_NUMPY),
                    media_type="application/json")
