"""Routes: a device's report, one self-contained HTML page."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from modeling.reporting import build_report
from modeling.store import validate_name
from traces.capacity.report import DEFAULT_SLO, capacity_section
from traces.capacity.slo import parse_slo
from service.api.deps import DataDirDep, DeviceDep, RegistryDep
from service.api.schemas import DeviceName, ErrorResponse, SloText

router = APIRouter(prefix="/v1/devices", tags=["reports"])

MAX_COMPARE = 4
"""Devices a report may put beside its subject (each adds a model refit and plots)."""

_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {"text/html": {"example": "<!DOCTYPE html><html><head><title>ssdpredict report: nvme0"
                                             "</title></head><body><h1>nvme0</h1>...</body></html>"}},
        "description": "the report page (plots embedded, no external URLs)",
    },
    404: {"model": ErrorResponse, "description": "unknown device"},
    422: {"model": ErrorResponse, "description": "a device without measurements, or named twice"},
}


# response_class=Response: the 200 is documented as text/html above, and the errors keep their
# application/json (with HTMLResponse as the class FastAPI documented them as text/html too).
@router.get("/{device}/report", response_class=Response, responses=_RESPONSES)
async def device_report(
    device: DeviceDep,
    datadir: DataDirDep,
    registry: RegistryDep,
    compare: Annotated[
        list[DeviceName] | None,
        Query(max_length=MAX_COMPARE, description="devices to put side by side with this one"),
    ] = None,
    slo: Annotated[SloText, Query(description="the capacity section's target(s): p99<=1ms")] = DEFAULT_SLO,
) -> HTMLResponse:
    """The device's report: KDiskMark-style summary, measured IOPS and latency against queue
    depth, measured vs predicted, error by workload region, interval coverage, noise floor, and
    each device's capacity under `slo` (latency against offered load for a few mixes).

    Takes seconds (the active model's configuration is refitted out of fold), so it runs
    off the event loop.
    """
    others = [validate_name(name) for name in compare or []]
    target = parse_slo(slo)
    section = await run_in_threadpool(capacity_section, datadir, [device, *others], target, registry)
    html = await run_in_threadpool(
        build_report, datadir, device, others, registry=registry, sections=[section]
    )
    return HTMLResponse(html)


__all__ = ["router"]
