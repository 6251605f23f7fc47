"""Run a sweep: measure every point of a plan with fio and store it, resumably.

Each measured point (and each repeat of it) is stored in its own catalog transaction,
with the raw fio JSON compressed beside it.  A sweep is identified by its *key*: the
device, the plan's key and every setting that changes what is measured.  Running the
same sweep again therefore continues an unfinished one (after Ctrl-C, ``kill -9`` or a
crash) from the first missing point, and returns a finished one without measuring.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from collectors.sweep import points as pointmod
from collectors.devices import nvmeof, pmem
from collectors.fio.engines import resolve_engine, spdk_plugin
from collectors.fio.jobs import JobSettings
from collectors.fio.runner import check_reachable, fio_binary, fio_version, run_fio
from collectors.plans.presets import Plan, build_plan
from collectors.sweep.quality import FIO_STEADY_CRITERION, precondition, spread_summary
from collectors.targets import claim_target
from collectors.sweep.settings import SweepSettings
from modeling.errors import InvalidInput, UnsafeTarget
from modeling.store import Catalog, DataDir, Sweep
from modeling.store.catalog import utcnow
from modeling.workload import Workload

Progress = Callable[[int, int, Workload], None]
Runner = Callable[..., str]


def sweep_key(device: str, plan: Plan, settings: SweepSettings, extra: dict[str, Any] | None = None) -> str:
    """The identity of a sweep: device, class, plan points and measuring settings (and ``extra``:
    what else the caller measures differently, e.g. ``--for-trace``'s priority)."""
    ident = {"device": device, "class": settings.device_class, "plan": plan.key,
             "settings": settings.identity(), **({"extra": extra} if extra else {})}
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:24]


def sweep_plan(datadir: DataDir, device: str, device_class: str, *, kind: str | None = None,
               values: dict[str, list[Any]] | None = None, budget: int | None = None,
               seed: int | None = None, points: int | None = None, reference: str | None = None) -> Plan:
    """The plan a sweep of ``device`` measures: ``kind`` (default quick, nvmeof for an NVMe-oF
    device, pmem for persistent memory), its value lists, ``budget`` points for sampled plans,
    cut to the first ``points``.

    An adaptive plan places its points where the model of the device's stored
    measurements is least certain or, with ``reference`` (another device with a model),
    where they best calibrate a transfer from that device's model.
    """
    kind = kind or {"nvmeof": "nvmeof", "pmem": "pmem"}.get(device_class, "quick")
    measurements = None
    if kind == "adaptive" and device in {d.name for d in datadir.catalog.list_devices()}:
        measurements = datadir.catalog.measurements(device)
    reference_model = None
    if reference is not None:
        if kind != "adaptive":
            raise InvalidInput("--reference needs --plan adaptive")
        from modeling.training.transfer import load_reference  # heavy (scikit-learn)

        reference_model = load_reference(datadir, device, reference)
    return build_plan(kind, values=values, n=budget, seed=seed, measurements=measurements,
                      reference_model=reference_model).head(points)


def run_sweep(datadir: DataDir, device: str, plan: Plan, settings: SweepSettings, *,
              metadata: dict[str, Any] | None = None, progress: Progress | None = None,
              runner: Runner | None = None, commands: Callable[..., Any] | None = None,
              sysfs_root: Path = Path("/sys"), wait: bool = False,
              on_wait: Callable[[str], None] | None = None, key_extra: dict[str, Any] | None = None) -> Sweep:
    """Measure every point of ``plan`` on ``settings.target`` and store it; resumable.

    ``runner`` runs one fio job (default: :func:`~collectors.fio.runner.run_fio` with the
    configured binary).  ``commands`` (default ``subprocess.run``) and ``sysfs_root`` are
    where device commands (``nvme connect``, ``mdadm``) and sysfs reads go.  The device's
    writer lock is held throughout: another writer of the device raises ``DeviceBusy``
    (or, with ``wait``, is waited for).  ``key_extra`` joins the sweep's key
    (:func:`sweep_key`): a rerun that measures differently does not resume the old sweep.
    """
    device_io: dict[str, Any] = {"sysfs_root": sysfs_root, "run": commands or subprocess.run}
    if runner is None:
        fio_binary(settings.fio)  # fail before creating files when fio is missing
        runner = _fio_runner(settings.fio)
    catalog = datadir.catalog
    key = sweep_key(device, plan, settings, key_extra)
    with ExitStack() as stack:
        stack.enter_context(datadir.device_lock(device, "sweep", wait=wait, on_wait=on_wait,
                                                detail=f"plan {plan.name}"))
        if settings.remote is None and settings.nvmeof is None:
            # the lock covers the target too: two device names on one file would share its I/O
            stack.enter_context(datadir.target_lock(os.path.realpath(settings.target), "sweep",
                                                    device=device, wait=wait, on_wait=on_wait))
        if settings.nvmeof is not None:
            if settings.engine == "spdk":
                # SPDK reaches the namespace from user space: no kernel block device to attach
                target = nvmeof.spdk_filename(settings.nvmeof)
            else:
                target = str(stack.enter_context(nvmeof.attached(settings.nvmeof, **device_io)))
            settings = settings.model_copy(update={"target": target})
        meta = {**pointmod.class_metadata(settings, **device_io), **(metadata or {})}
        if settings.device_class == "pmem":
            env = pmem.stand_in_env(meta)
            runner = runner if env is None else functools.partial(runner, env=env)
        known = catalog.has_device(device)
        done = catalog.find_complete_sweep(device, key) if known else None
        if done is not None:
            catalog.ensure_device(device, settings.device_class, metadata=meta)
            if progress and plan.points:
                progress(done.n_points, done.n_planned, plan.points[-1])
            return done
        job = _prepare_pmem(settings, meta, catalog) if settings.device_class == "pmem" else _prepare(
            settings, runner, catalog)
        # only now, with a target that may be written, does the device enter the catalog
        catalog.ensure_device(device, settings.device_class, metadata=meta)
        sweep = catalog.find_resumable_sweep(device, key)
        if sweep is None:
            info = _sweep_info(settings, job, plan, meta)
            if settings.precondition:
                info["precondition"] = precondition(job, passes=settings.precondition_passes,
                                                    remote=settings.job_remote, runner=runner)
            sweep = catalog.create_sweep(
                device, source="sweep", plan={**plan.to_dict(), "settings": settings.identity()},
                plan_key=key, target=settings.target, n_planned=len(plan) * settings.repeats, info=info,
            )
        return _measure(datadir, sweep, plan, settings, job, progress, runner)


@functools.lru_cache(maxsize=8)
def _fio_runner(binary: str | None) -> Runner:
    # one object per binary: the engine probe is cached per runner, so it runs once per process
    return run_fio if binary is None else functools.partial(run_fio, binary=binary)


def _prepare(settings: SweepSettings, runner: Runner, catalog: Catalog) -> JobSettings:
    """Check the target is safe, create a file target, choose the engine."""
    size, offset = settings.size_bytes, settings.offset_bytes
    target = settings.target
    remote = settings.job_remote
    if settings.csd_path == "internal":
        target = settings.internal_target or target
    if settings.remote is not None:
        check_reachable(settings.remote)
    if settings.nvmeof is not None and settings.engine == "spdk":
        if not settings.destroy_data:
            raise UnsafeTarget(
                f"refusing to write to NVMe-oF namespace {settings.nvmeof.nqn} through SPDK: its "
                "contents cannot be checked from here; if its data may be destroyed, run again "
                "with --destroy-data"
            )
    elif remote is None:
        info = claim_target(target, size + offset, destroy_data=settings.destroy_data, catalog=catalog)
        target = info.path
        if info.kind != "file":
            size = min(size, info.size - offset)
    elif target.startswith("/dev/") and not settings.destroy_data:
        raise UnsafeTarget(
            f"refusing to write to {target} on {remote}: a remote block device cannot be checked "
            "for mounts, partitions or filesystems from here; if its data may be destroyed, "
            "run again with --destroy-data"
        )
    engine = resolve_engine(settings.engine, target, remote=remote, runner=runner,
                            spdk_plugin_path=settings.spdk_plugin)
    ss = settings.steady_state and settings.steady_state_rule == "fio"
    return JobSettings(
        target=target, engine=engine, size=size, offset=offset,
        runtime_ms=settings.steady_state_max_ms if ss else settings.runtime_ms, ramp_ms=settings.ramp_ms,
        steady_state=FIO_STEADY_CRITERION if ss else None, ss_dur_ms=settings.steady_state_window_ms,
        spdk_plugin=spdk_plugin(settings.spdk_plugin) if engine == "spdk" else None,
    )


def _prepare_pmem(settings: SweepSettings, facts: dict[str, Any], catalog: Catalog) -> JobSettings:
    """A pmem target: device DAX needs --destroy-data, a DAX (or stand-in tmpfs) file is made; its engine."""
    size, target = settings.size_bytes, settings.target
    if facts["pmem_mode"] == "devdax":
        pmem.check_devdax(target, settings.destroy_data)
    else:
        if facts["pmem_stand_in"] and not os.path.exists(target):
            # /dev/shm is under /dev, where the target checks never create a file: the mount was checked
            open(target, "x").close()  # noqa: SIM115
        target = claim_target(target, size + settings.offset_bytes, destroy_data=settings.destroy_data,
                              catalog=catalog).path
    return JobSettings(target=target, engine=pmem.pmem_engine(facts, settings.engine), size=size,
                       offset=settings.offset_bytes, runtime_ms=settings.runtime_ms, ramp_ms=settings.ramp_ms)


def _sweep_info(
    settings: SweepSettings, job: JobSettings, plan: Plan, meta: dict[str, Any]
) -> dict[str, Any]:
    uname = platform.uname()
    warnings = []
    # the stand-in warning follows the facts the runner's environment came from (meta)
    if settings.device_class == "pmem" and pmem.stand_in_env(meta):
        warnings.append(pmem.STAND_IN_WARNING)
    if job.engine == "psync" and any(w.queue_depth > 1 for w in plan.points):
        warnings.append("engine psync ignores iodepth: queue depths above 1 ran at depth 1")
    return {
        "warnings": warnings,
        "fio_version": fio_version(settings.fio), "engine": job.engine, "target": job.target,
        "span_bytes": job.size, "kernel": uname.release, "host": uname.node,
        "os": f"{uname.system} {uname.release} {uname.version} {uname.machine}",
        "started_at": utcnow(), "plan_name": plan.name, "plan_seed": plan.seed,
        "plan_points": len(plan), "repeats": settings.repeats, "remote": settings.remote,
        "device_class": settings.device_class, "csd_path": settings.csd_path,
        "steady_state": settings.steady_state_rule if settings.steady_state else None,
    }


def _measure(datadir: DataDir, sweep: Sweep, plan: Plan, settings: SweepSettings, job: JobSettings,
             progress: Progress | None, runner: Runner) -> Sweep:
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
