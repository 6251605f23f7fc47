"""Run a sweep: measure every point of a plan with fio and store it, resumably.

Each measured point (and each repeat of it) is stored in its own catalog transaction,
with the raw fio JSON compressed beside it.  A sweep is identified by its *key*: the
device, the plan's key and every setting that changes what is measured.  Running the
same sweep again therefore continues an unfinished one (after Ctrl-C, ``kill -9`` or a
crash) from the first missing point, and returns a finished one without measuring.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from collectors import points as pointmod
from collectors.fio.engines import resolve_engine
from collectors.fio.jobs import JobSettings, parse_duration_ms, size_option
from collectors.fio.runner import fio_binary
from collectors.plans import Plan
from collectors.quality import STEADY_RULES, precondition, spread_summary
from collectors.safety import check_target, prepare_file
from modeling.errors import InvalidInput, UnsafeTarget
from modeling.store import Catalog, DataDir, Sweep
from modeling.store.scratch import forget_scratch_file, is_scratch_file, record_scratch_file
from modeling.store.catalog import utcnow
from modeling.workload import Workload

DEVICE_CLASSES = ("ssd", "raid", "csd", "nvmeof", "pmem")
CSD_PATHS = ("external", "internal", "concurrent")
Progress = Callable[[int, int, Workload], None]


@dataclass(frozen=True)
class SweepSettings:
    """How a sweep measures: target, engine, timing, span and quality options."""

    target: str
    engine: str | None = None
    runtime: str = "1s"
    ramp: str = "0ms"
    size: str = "256MiB"
    offset: str = "0"
    remote: str | None = None
    destroy_data: bool = False
    repeats: int = 1
    precondition: bool = False
    precondition_passes: int = 2
    steady_state: bool = False
    steady_state_rule: str = "fio"       # "fio" (fio's steadystate) or "pts" (rounds)
    steady_state_window: str = "5s"      # fio ss_dur
    steady_state_max: str = "30s"        # fio runtime cap while waiting for steady state
    steady_state_rounds: int = 25        # PTS rule: round cap
    csd_path: str | None = None          # external, internal or concurrent
    internal_target: str | None = None   # path inside a CSD for internal/concurrent
    nvmeof: Any = None                   # collectors.devices.nvmeof.NvmeofTarget to attach
    point_timeout_s: float = 600.0

    def validate(self) -> None:
        """Fail fast on settings that cannot work."""
        if not 1 <= self.repeats <= 100:
            raise InvalidInput("--repeats must be between 1 and 100")
        if not 5 <= self.steady_state_rounds <= 1000:
            raise InvalidInput("steady-state rounds must be between 5 (one window) and 1000")
        if self.steady_state_rule not in STEADY_RULES:
            raise InvalidInput(f"steady-state rule must be one of {', '.join(STEADY_RULES)}")
        if self.csd_path is not None and self.csd_path not in CSD_PATHS:
            raise InvalidInput(f"--csd-path must be one of {', '.join(CSD_PATHS)}")
        if self.csd_path in ("internal", "concurrent") and not self.remote:
            raise InvalidInput(f"--csd-path {self.csd_path} needs --remote HOST:PORT of the drive's "
                               "fio server")
        for name in ("runtime", "ramp", "steady_state_window", "steady_state_max"):
            parse_duration_ms(getattr(self, name))
        size_option(self.size)
        size_option(self.offset)

    def identity(self) -> dict[str, Any]:
        """The settings that change what is measured (so they are part of the sweep key)."""
        data = asdict(self) if self.nvmeof is None else {**asdict(replace(self, nvmeof=None)),
                                                         "nvmeof": _nvmeof_dict(self.nvmeof)}
        for name in ("destroy_data", "point_timeout_s"):
            data.pop(name)
        data["runtime"] = parse_duration_ms(self.runtime)
        data["ramp"] = parse_duration_ms(self.ramp)
        data["size"] = size_option(self.size)
        data["offset"] = size_option(self.offset)
        if self.nvmeof is not None:
            data["target"] = None  # the attached /dev/nvmeXnY name may differ between attaches
        elif not self.remote and self.target:
            data["target"] = os.path.abspath(self.target)  # same file from another directory
        return data


def _nvmeof_dict(target: Any) -> dict[str, Any]:
    if hasattr(target, "model_dump"):
        return dict(target.model_dump())
    return dict(asdict(target)) if target is not None else {}


def sweep_key(device: str, plan: Plan, settings: SweepSettings, device_class: str) -> str:
    """The identity of a sweep: device, class, plan points and measuring settings."""
    ident = {"device": device, "class": device_class, "plan": plan.key, "settings": settings.identity()}
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:24]


def run_sweep(datadir: DataDir, device: str, plan: Plan, settings: SweepSettings, *,
              device_class: str = "ssd", metadata: dict[str, Any] | None = None,
              progress: Progress | None = None, runner: Callable[..., str] | None = None,
              raid: dict[str, Any] | None = None, commands: Callable[..., Any] | None = None,
              sysfs_root: Path = Path("/sys"), wait: bool = False,
              on_wait: Callable[[str], None] | None = None) -> Sweep:
    """Measure every point of ``plan`` on ``settings.target`` and store it; resumable.

    ``raid`` holds user-given RAID facts (``level``, ``members``, ``chunk``, ``kind``,
    ``controller``, ``vendor``) for ``device_class="raid"``; md arrays are read from sysfs.
    ``commands`` (default ``subprocess.run``) and ``sysfs_root`` are where device commands
    (``nvme connect``, ``mdadm``) and sysfs reads go.  The device's writer lock is held
    throughout: another writer of the device raises ``DeviceBusy`` (or, with ``wait``,
    is waited for).
    """
    device_io: dict[str, Any] = {"sysfs_root": sysfs_root, "run": commands or subprocess.run}
    if device_class not in DEVICE_CLASSES:
        raise InvalidInput(f"unknown device class {device_class!r}; use one of {', '.join(DEVICE_CLASSES)}")
    settings.validate()
    if runner is None:
        fio_binary()  # fail before creating files when fio is missing
    if device_class == "csd" and settings.csd_path is None:
        settings = replace(settings, csd_path="external")
    catalog = datadir.catalog
    key = sweep_key(device, plan, settings, device_class)
    with ExitStack() as stack:
        stack.enter_context(datadir.device_lock(device, "sweep", wait=wait, on_wait=on_wait,
                                                detail=f"plan {plan.name}"))
        if settings.nvmeof is not None:
            from collectors.devices import nvmeof

            if settings.engine == "spdk":
                # SPDK reaches the namespace from user space: no kernel block device to attach
                settings = replace(settings, target=nvmeof.spdk_filename(settings.nvmeof))
            else:
                attached = stack.enter_context(nvmeof.attached(settings.nvmeof, **device_io))
                settings = replace(settings, target=str(attached))
        meta = {**pointmod.class_metadata(device_class, settings, raid, **device_io), **(metadata or {})}
        known = catalog.has_device(device)
        done = catalog.find_complete_sweep(device, key) if known else None
        if done is not None:
            catalog.ensure_device(device, device_class, metadata=meta)
            if progress and plan.points:
                progress(done.n_points, done.n_planned, plan.points[-1])
            return done
        job = _prepare(settings, runner, catalog)
        # only now, with a target that may be written, does the device enter the catalog
        catalog.ensure_device(device, device_class, metadata=meta)
        sweep = catalog.find_resumable_sweep(device, key)
        if sweep is None:
            info = _sweep_info(settings, job, plan, device_class)
            if settings.precondition:
                info["precondition"] = precondition(job, passes=settings.precondition_passes,
                                                    remote=_job_remote(settings), runner=runner)
            sweep = catalog.create_sweep(
                device, source="sweep", plan={**plan.to_dict(), "settings": settings.identity()},
                plan_key=key, target=settings.target, n_planned=len(plan) * settings.repeats, info=info,
            )
        return _measure(datadir, sweep, plan, settings, job, progress, runner)


def _job_remote(settings: SweepSettings) -> str | None:
    # a CSD's external path is the host's own block device, even when --remote names the drive
    return None if settings.csd_path == "external" else settings.remote


def _prepare(settings: SweepSettings, runner: Callable[..., str] | None, catalog: Catalog) -> JobSettings:
    """Check the target is safe, create a file target, choose the engine."""
    size = size_option(settings.size)
    target = settings.target
    remote = _job_remote(settings)
    if settings.csd_path == "internal":
        target = settings.internal_target or target
    if settings.nvmeof is not None and settings.engine == "spdk":
        if not settings.destroy_data:
            raise UnsafeTarget(
                f"refusing to write to NVMe-oF namespace {settings.nvmeof.nqn} through SPDK: its "
                "contents cannot be checked from here; if its data may be destroyed, run again "
                "with --destroy-data"
            )
    elif remote is None:
        info = check_target(target, settings.destroy_data,
                            owned=lambda path, st: is_scratch_file(catalog, path, st))
        target = info.path
        if info.kind == "file":
            prepare_file(target, size + size_option(settings.offset),
                         created=lambda path: record_scratch_file(catalog, path),
                         removed=lambda path: forget_scratch_file(catalog, path))
        else:
            size = min(size, info.size - size_option(settings.offset))
    elif target.startswith("/dev/") and not settings.destroy_data:
        raise UnsafeTarget(
            f"refusing to write to {target} on {remote}: a remote block device cannot be checked "
            "for mounts, partitions or filesystems from here; if its data may be destroyed, "
            "run again with --destroy-data"
        )
    engine = resolve_engine(settings.engine, target, remote=remote, runner=runner)
    ss = settings.steady_state and settings.steady_state_rule == "fio"
    runtime = parse_duration_ms(settings.steady_state_max if ss else settings.runtime)
    return JobSettings(
        target=target, engine=engine, size=size, offset=size_option(settings.offset),
        runtime_ms=runtime, ramp_ms=parse_duration_ms(settings.ramp),
        steady_state="iops:20%" if ss else None,
        ss_dur_ms=parse_duration_ms(settings.steady_state_window),
    )


def _sweep_info(settings: SweepSettings, job: JobSettings, plan: Plan, device_class: str) -> dict[str, Any]:
    from collectors.fio.runner import fio_version

    uname = platform.uname()
    warnings = []
    if job.engine == "psync" and any(w.queue_depth > 1 for w in plan.points):
        warnings.append("engine psync ignores iodepth: queue depths above 1 ran at depth 1")
    return {
        "warnings": warnings,
        "fio_version": fio_version(), "engine": job.engine, "target": job.target,
        "span_bytes": job.size, "kernel": uname.release, "host": uname.node,
        "os": f"{uname.system} {uname.release} {uname.version} {uname.machine}",
        "started_at": utcnow(), "plan_name": plan.name, "plan_seed": plan.seed,
        "plan_points": len(plan), "repeats": settings.repeats, "remote": settings.remote,
        "device_class": device_class, "csd_path": settings.csd_path,
        "steady_state": settings.steady_state_rule if settings.steady_state else None,
    }


def _measure(datadir: DataDir, sweep: Sweep, plan: Plan, settings: SweepSettings, job: JobSettings,
             progress: Progress | None, runner: Callable[..., str] | None) -> Sweep:
    catalog = datadir.catalog
    total = len(plan) * settings.repeats
    completed = catalog.completed_points(sweep.id)
    started = time.monotonic()
    if progress and plan.points:
        progress(len(completed), total, plan.points[0])
    measure = pointmod.point_measurer(settings, job, runner)
    for seq, workload in enumerate(plan.points):
        for repeat in range(settings.repeats):
            if (seq, repeat) in completed:
                continue
            row, raw = measure(workload)
            if repeat == settings.repeats - 1 and settings.repeats > 1:
                row.update(pointmod.cv_columns(catalog, sweep.id, seq, row))
            catalog.add_point(sweep.id, seq, row, repeat=repeat, raw=raw)
            completed.add((seq, repeat))
            if progress:
                progress(len(completed), total, workload)
    spread: list[dict[str, float]] = (
        pointmod.sweep_spread(catalog, sweep.id) if settings.repeats > 1 else []
    )
    return catalog.finish_sweep(sweep.id, info={
        "finished_at": utcnow(), "last_run_seconds": round(time.monotonic() - started, 3),
        **({"repeat_cv": spread_summary(spread)} if spread else {}),
    })
