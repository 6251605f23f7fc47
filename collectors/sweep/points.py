"""Measuring one sweep point: the fio run(s) per device class and the row they produce.

Kept apart from :mod:`collectors.sweep.run` (which owns ordering, storing and resuming) so
that the class-specific paths -- a CSD's internal and concurrent paths, the PTS
steady-state rounds -- stay small and readable.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from collectors.devices import csd, pmem, raid
from collectors.fio.engines import resolve_engine
from collectors.fio.jobs import JobSettings, build_job, effective_workload
from collectors.fio.results import load_fio_json, parse_fio_document
from collectors.sweep.quality import SteadyStateRule, fio_steady_fields, repeat_cv, run_until_steady
from collectors.sweep.settings import SweepSettings
from modeling.store import Catalog
from modeling.store.catalog import utcnow
from modeling.workload import Workload

Measure = Callable[[Workload], tuple[dict[str, Any], str]]

def _row(text: str, workload: Workload, job: JobSettings, *, source: str) -> dict[str, Any]:
    doc = load_fio_json(text, source=source)
    row = dict(parse_fio_document(doc, source=source)[0].row)
    # the planned workload (at fio's percent granularity) is the truth; results.py can only
    # approximate a mix's request_size from bs=R,W.
    row.update(effective_workload(workload).as_row())
    row["engine"] = job.engine
    row.update(fio_steady_fields(doc))
    return row


def point_measurer(settings: SweepSettings, job: JobSettings, run: Callable[..., str]) -> Measure:
    """A function that measures one workload with ``run`` (one fio job) -> ``(row, raw fio JSON)``."""
    remote = settings.job_remote
    timeout = (job.runtime_ms + job.ramp_ms) / 1000.0 + settings.point_timeout_s
    uname = platform.uname()
    provenance = {"target": job.target, "kernel": uname.release, "host": uname.node,
                  "remote": remote, "csd_path": settings.csd_path}

    def single(workload: Workload) -> tuple[dict[str, Any], str]:
        text = run(build_job(workload, job), remote=remote, timeout=timeout)
        # fio --client prints job banners before the JSON; keep the JSON document only
        return _row(text, workload, job, source="fio"), text[max(text.find("{"), 0):]

    measure: Measure = single
    if settings.csd_path == "concurrent":
        measure = _concurrent(settings, job, timeout, run)
    if settings.steady_state and settings.steady_state_rule == "pts":
        inner = measure

        def steady(workload: Workload) -> tuple[dict[str, Any], str]:
            row, raw, summary = run_until_steady(lambda: inner(workload),
                                                SteadyStateRule(max_rounds=settings.steady_state_rounds))
            return {**row, **summary}, raw

        measure = steady

    def with_provenance(workload: Workload) -> tuple[dict[str, Any], str]:
        row, raw = measure(workload)
        return {**row, **provenance, "measured_at": utcnow()}, raw

    return with_provenance


def _concurrent(settings: SweepSettings, job: JobSettings, timeout: float,
                run: Callable[..., str]) -> Measure:
    """Host-side and in-drive fio at the same time; stores both sides and their sum."""
    remote = settings.remote
    assert remote is not None  # SweepSettings refuses a concurrent path without --remote
    internal_target = settings.internal_target or settings.target
    internal = replace(job, target=internal_target,
                       engine=resolve_engine(settings.engine, internal_target, remote=remote, runner=run,
                                             spdk_plugin_path=settings.spdk_plugin))

    def measure(workload: Workload) -> tuple[dict[str, Any], str]:
        ext_text, int_text = csd.run_concurrent(
            build_job(workload, job), build_job(workload, internal), remote, timeout=timeout, runner=run
        )
        ext_row = _row(ext_text, workload, job, source="external fio")
        int_row = _row(int_text, workload, internal, source="internal fio")
        row = dict(csd.combine_concurrent(ext_row, int_row))
        row.update(effective_workload(workload).as_row())
        raw = json.dumps({"external": json.loads(ext_text[ext_text.find("{"):]),
                          "internal": json.loads(int_text[int_text.find("{"):])})
        return row, raw

    return measure


def cv_columns(catalog: Catalog, sweep_id: int, seq: int, row: dict[str, Any]) -> dict[str, float]:
    """``repeat_cv_<metric>`` over the earlier repeats of point ``seq`` and ``row``."""
    frame = catalog.sweep_points(sweep_id)
    earlier = frame[frame["seq"] == seq].to_dict("records") if not frame.empty else []
    return {f"repeat_cv_{m}": v for m, v in repeat_cv([*earlier, row]).items()}


def sweep_spread(catalog: Catalog, sweep_id: int) -> list[dict[str, float]]:
    """Per-point CV between repeats for every point of a sweep."""
    frame = catalog.sweep_points(sweep_id)
    if frame.empty:
        return []
    return [repeat_cv(group.to_dict("records")) for _, group in frame.groupby("seq") if len(group) > 1]


def class_metadata(settings: SweepSettings, *, sysfs_root: Path = Path("/sys"),
                   run: Callable[..., Any] | None = None) -> dict[str, Any]:
    """What the catalog records about a device of each class (read where it can be)."""
    device_class = settings.device_class
    meta: dict[str, Any] = {"target": settings.target}
    if settings.remote:
        meta["remote"] = settings.remote
    if device_class == "raid":
        user = settings.raid.given() if settings.raid is not None else {}
        if settings.remote:  # the host's sysfs says nothing about a remote array
            meta.update(raid.user_raid_metadata(**user) if "level" in user else {})
        else:
            extra = {"run": run} if run is not None else {}
            meta.update(raid.raid_metadata(settings.target, user=user, sysfs_root=sysfs_root, **extra))
    elif device_class == "nvmeof" and settings.nvmeof is not None:
        meta.update({f"nvmeof_{k}": v for k, v in settings.nvmeof.model_dump().items()})
    elif device_class == "csd":
        meta["csd_internal_target"] = settings.internal_target
    elif device_class == "pmem":
        facts = (pmem.pmem_facts(settings.target, sysfs_root=sysfs_root, run=run) if run is not None
                 else pmem.pmem_facts(settings.target, sysfs_root=sysfs_root))
        meta.update(facts)
    block = sysfs_root / "class" / "block" / Path(settings.target).name
    if settings.target.startswith("/dev/") and not settings.remote and block.exists():
        for name in ("device/model", "device/serial", "queue/rotational", "size"):
            path = block / name
            if path.exists():
                meta[f"sys_{name.replace('/', '_')}"] = path.read_text().strip()
    return meta
