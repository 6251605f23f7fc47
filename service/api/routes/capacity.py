"""Routes: the most IO/s of a mix a device takes under a latency target, for one device or many.

Read-only computations like predict: no token.  Each search costs milliseconds of CPU, so
the handlers are plain functions (FastAPI runs them in its thread pool, off the event loop).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from modeling.errors import TooLarge
from modeling.store import validate_name
from modeling.store.device_selection import select_devices
from service.api.deps import StateDep
from service.api.schemas import error_responses
from service.api.schemas.capacity import (
    CapacityRequest,
    CapacityResponse,
    FleetCapacityRequest,
    FleetCapacityResponse,
)
from traces.capacity.device import device_capacity, mix_from_mapping, mix_table
from traces.capacity.fleet import fleet_capacity
from traces.capacity.slo import parse_slo

router = APIRouter(prefix="/v1", tags=["capacity"])

_ERRORS = error_responses(
    {
        400: "an SLO or mix the search cannot use (the message says why)",
        404: "unknown device, or no model yet (fleet: no device could answer)",
        413: "fleet: more searches (mixes x devices) than one request may ask",
        422: "invalid request (the message names the field)",
    }
)
MAX_FLEET_SEARCHES = 2_000
"""Mixes x devices in one fleet request: each a search of 15-40 ms on this machine's cores."""


def _mixes(workloads: list[Any]) -> Any:
    return mix_table([mix_from_mapping(w.model_dump(exclude_none=True)) for w in workloads])


@router.post("/capacity", response_model=CapacityResponse, responses=_ERRORS)
def capacity(body: CapacityRequest, state: StateDep) -> dict[str, Any]:
    """The largest offered IO/s of each mix whose predicted open-loop latency meets every target.

    Per mix: IO/s and MiB/s, an interval from the model's bounds, the in-flight count and
    utilisation there, the binding target, and whether the answer lies beyond what was
    measured.  A device that meets the targets even at saturation answers its capacity
    (`outcome: saturation`); one that cannot meet them at any load answers 0 and its
    lightest-load latency (`outcome: never`).
    """
    slo = parse_slo(body.slo)
    result = device_capacity(
        state.datadir,
        validate_name(body.device),
        _mixes(body.workloads),
        slo,
        body.burstiness,
        state.registry,
    )
    return result.to_dict()


@router.post("/fleet/capacity", response_model=FleetCapacityResponse, responses=_ERRORS)
def fleet_capacity_route(body: FleetCapacityRequest, state: StateDep) -> dict[str, Any]:
    """Rank devices by headroom: per mix, the most IO/s each takes under the targets, best first.

    A device without open-loop points is ranked but listed in `without_open_loop_points`; a
    device without a usable model is listed in `skipped` with the reason; only when no device
    at all can answer is the answer a 404.
    """
    slo = parse_slo(body.slo)
    devices = select_devices(state.datadir, body.devices or (), all_devices=body.all_devices)
    mixes = _mixes(body.workloads)
    distinct = len(mixes.drop_duplicates())  # a mix asked twice is searched once
    searches = len(devices) * distinct
    if searches > MAX_FLEET_SEARCHES:
        raise TooLarge(
            f"{len(devices)} devices x {distinct} distinct mixes is {searches} searches; the limit is "
            f"{MAX_FLEET_SEARCHES}: name fewer devices or mixes",
            details={"max": MAX_FLEET_SEARCHES},
        )
    result = fleet_capacity(state.datadir, devices, mixes, slo, body.burstiness, state.registry)
    return result.to_dict()
