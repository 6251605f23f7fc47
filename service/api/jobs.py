"""Retrain jobs: one background thread per job, one writer per device.

A job's state lives in the catalog's ``jobs`` table (:mod:`modeling.store.jobs`), so any
worker process of the service can answer ``GET /v1/jobs/{id}``.  "One retrain per
device" is the device's writer lock (:mod:`modeling.store.files.locks`), which also excludes
a CLI sweep, ingest, train or delete of the device; it holds across worker processes,
and the kernel releases it if the process dies, which is how a job orphaned by a crash
is recognised: it is marked ``interrupted`` when a worker starts, and when it is read.

Training (``modeling.training.train.train_device``) writes the new version completely, then
registers (and maybe activates) it and marks the job succeeded in one catalog
transaction, so the job's state and the active version agree after a crash at any
moment; a failed job never touches the active model.

A retrain of many devices (``start_fleet``) is one job too, run as ``train --all`` runs:
on Dask (``SSDPREDICT_SCHEDULER``, else a local cluster), holding each device's writer
lock until its version is registered, plus a lock of its own for as long as it runs (how
another worker process tells it is alive).  Each device's outcome is in the job's result;
one failed device does not stop the others, and fails the job at the end.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from modeling.errors import SsdPredictError
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir, validate_name
from modeling.store.jobs import MANY_DEVICES, Job
from modeling.store.files.locks import DeviceLock, DeviceLockSet, job_lock, job_running
from modeling.training.fleet import DeviceResult, FleetReport, dask_client, train_fleet, with_reference
from modeling.training.selection import candidates_of_kinds
from modeling.training.train import train_device
from modeling.training.transfer import check_reference
from service.api.metrics import ServiceMetrics

log = logging.getLogger("ssdpredict.jobs")

_SAVE_EVERY_S = 0.25  # progress is persisted at most this often

__all__ = ["Job", "RetrainJobs"]


class RetrainJobs:
    """Starts retrain jobs and reports on them."""

    def __init__(
        self,
        datadir: DataDir,
        registry: ModelRegistry,
        metrics: ServiceMetrics,
        on_model: Callable[[str, str], None] = lambda device, version: None,
        *,
        scheduler: str | None = None,
        fleet_workers: int | None = None,
    ) -> None:
        self.datadir = datadir
        self.registry = registry
        self.metrics = metrics
        self.on_model = on_model  # told (device, version) when a retrain made a new version active
        self.scheduler = scheduler  # where a retrain of many devices runs (None: a local cluster)
        self.fleet_workers = fleet_workers
        self._jobs: dict[str, Job] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def recover(self) -> list[Job]:
        """Mark ``interrupted`` the jobs whose process died (run when a worker starts)."""
        return self.datadir.catalog.interrupt_orphans(self._alive)

    def start(
        self, device: str, *, folds: int = 5, time_budget_s: float | None = None, activate: bool = True,
        force_activate: bool = False, reference: str | None = None,
    ) -> Job:
        """Start retraining ``device``; raises ``UnknownDevice``, or ``DeviceBusy`` if it has a writer.

        With ``reference`` it must be another device with a model (``UnknownDevice``, ``NoModel``).
        """
        validate_name(device)
        catalog = self.datadir.catalog
        catalog.get_device(device)
        if reference is not None:
            check_reference(self.datadir, device, reference)
        job = Job(id=uuid.uuid4().hex, kind="retrain", device=device)
        lock = self.datadir.device_lock(device, "train", detail=job.id).acquire()
        try:
            options = {"folds": folds, "time_budget_s": time_budget_s, "activate": activate,
                       "force_activate": force_activate, "reference": reference}
            catalog.add_job(job, options)
            self._launch(job, self._run, (job, lock, options), f"retrain-{device}")
        except BaseException:
            lock.release()
            raise
        self.metrics.job_state("started")
        return Job(**asdict(job))

    def start_fleet(
        self, devices: list[str], *, folds: int = 5, time_budget_s: float | None = None,
        activate: bool = True, force_activate: bool = False, reference: str | None = None,
        candidates: list[str] | None = None,
    ) -> Job:
        """Start retraining many devices (already selected) in one job.

        Every device's writer lock is taken here: ``DeviceBusy`` (and nothing started) if
        any has a writer.  With ``reference`` every device transfers from it and it is
        left out (``UnknownDevice``, ``NoModel``, ``InvalidInput`` if it is all there is).
        ``candidates``: estimator kinds, trained untuned (``InvalidInput`` for an unknown one).
        """
        if candidates is not None:
            candidates_of_kinds(candidates)  # an unknown kind is refused now, not in the job
        devices, _ = with_reference(self.datadir, devices, reference)
        job = Job(id=uuid.uuid4().hex, kind="retrain", device=MANY_DEVICES, devices=devices)
        running = job_lock(self.datadir.root, job.id, "train").acquire()
        locks = self.datadir.device_locks(devices, "train", detail=job.id)
        try:
            locks.acquire()
            options = {"folds": folds, "time_budget_s": time_budget_s, "activate": activate,
                       "force_activate": force_activate, "reference": reference, "devices": devices,
                       "candidates": candidates}
            self.datadir.catalog.add_job(job, options)
            self._launch(job, self._run_fleet, (job, running, locks, options), "retrain-fleet")
        except BaseException:
            locks.release_all()
            _stop_running(running)
            raise
        self.metrics.job_state("started")
        return Job(**asdict(job))

    def _launch(self, job: Job, target: Callable[..., None], args: tuple[Any, ...], name: str) -> None:
        with self._lock:
            self._jobs[job.id] = job
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._lock:
            self._threads[job.id] = thread
        thread.start()

    def get(self, job_id: str) -> Job:
        """A job of this or another worker; raises ``NotFound``."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None:
                return Job(**asdict(job))  # a snapshot: the thread keeps mutating the original
        job = self.datadir.catalog.get_job(job_id)
        if job.state in ("queued", "running") and not self._alive(job):
            self.recover()
            job = self.datadir.catalog.get_job(job_id)
        return job

    def wait(self, timeout: float | None = None) -> None:
        """Wait for this process's running jobs (used at shutdown and in tests)."""
        with self._lock:
            threads = list(self._threads.values())
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def _alive(self, job: Job) -> bool:
        with self._lock:
            if job.id in self._threads:
                return True
        if job.device == MANY_DEVICES:
            return job_running(self.datadir.root, job.id)
        holder = self.datadir.lock_holder(job.device)
        return holder is not None and holder.get("detail") == job.id

    # -- the job thread ------------------------------------------------------------------

    def _progress(self, job: Job) -> Callable[[str, float], None]:
        """A progress callback that updates the job and persists it at most every ``_SAVE_EVERY_S``."""
        last_save = 0.0

        def progress(stage: str, fraction: float) -> None:
            nonlocal last_save
            with self._lock:
                job.stage = stage
                job.progress = max(0.0, min(1.0, float(fraction)))
            now = time.monotonic()
            if now - last_save >= _SAVE_EVERY_S:
                last_save = now
                try:
                    self.datadir.catalog.job_progress(job.id, job.stage, job.progress)
                except SsdPredictError:  # progress is a courtesy; the job goes on
                    log.warning("could not persist the progress of job %s", job.id, exc_info=True)

        return progress

    def _run(self, job: Job, lock: DeviceLock, options: dict[str, Any]) -> None:
        catalog = self.datadir.catalog
        progress = self._progress(job)
        try:
            catalog.start_job(job.id)
            with self._lock:
                job.state = "running"
                job.started_at = catalog.get_job(job.id).started_at
            mv = train_device(
                self.datadir, job.device, folds=options["folds"], time_budget_s=options["time_budget_s"],
                progress=progress, activate=options["activate"], force_activate=options["force_activate"],
                lock=lock, job_id=job.id, reference=options.get("reference"),
            )
            if mv.active:
                # Load the new version here, in the job's thread, so the first prediction
                # after the swap finds it cached instead of reading files on the event loop.
                self.registry.load(job.device, mv.version)
                self.registry.invalidate(job.device)
                self.on_model(job.device, mv.version)
            self._done(catalog.get_job(job.id))  # the catalog marked it succeeded with the version
        except SsdPredictError as exc:
            self._finish(job, "failed", {"code": exc.code, "message": exc.message, "details": exc.details})
        except Exception as exc:  # a bug or a damaged file: report it on the job, log the traceback
            log.exception("retrain of %s failed", job.device)
            message = f"retrain failed: {type(exc).__name__}: {exc}"
            self._finish(job, "failed", {"code": "internal_error", "message": message, "details": None})
        finally:
            lock.release()
            with self._lock:
                self._threads.pop(job.id, None)

    def _run_fleet(
        self, job: Job, running: DeviceLock, locks: DeviceLockSet, options: dict[str, Any]
    ) -> None:
        catalog = self.datadir.catalog
        progress = self._progress(job)

        def each(result: DeviceResult, done: int, total: int) -> None:
            progress(f"{done}/{total} devices", done / total)

        try:
            catalog.start_job(job.id)
            with self._lock:
                job.state = "running"
                job.started_at = catalog.get_job(job.id).started_at
            kinds = options["candidates"]
            fit_kw: dict[str, Any] = {} if kinds is None else {"candidates": candidates_of_kinds(kinds)}
            with dask_client(self.scheduler, workers=self.fleet_workers) as client:
                report = train_fleet(
                    self.datadir, options["devices"], client, locks=locks, progress=each,
                    activate=options["activate"], force_activate=options["force_activate"],
                    folds=options["folds"], time_budget_s=options["time_budget_s"],
                    reference=options["reference"],
                    **fit_kw,
                )
            self.registry.invalidate()
            for r in report.succeeded:
                if r.value.active:
                    self._preload(r.device, r.value.version)
            result, error = fleet_outcome(report)
            state = "failed" if error else "succeeded"
            self._done(catalog.finish_job(job.id, state, result=result, error=error))
        except SsdPredictError as exc:
            self._finish(job, "failed", {"code": exc.code, "message": exc.message, "details": exc.details})
        except Exception as exc:  # a bug or a lost cluster: report it on the job, log the traceback
            log.exception("retrain of %d devices failed", len(options["devices"]))
            message = f"retrain failed: {type(exc).__name__}: {exc}"
            self._finish(job, "failed", {"code": "internal_error", "message": message, "details": None})
        finally:
            locks.release_all()
            _stop_running(running)
            with self._lock:
                self._threads.pop(job.id, None)

    def _preload(self, device: str, version: str) -> None:
        """Load a newly active version here, as a one-device retrain does, so that the first
        prediction finds it cached; one that does not load is left to the request to report."""
        try:
            self.registry.load(device, version)
        except SsdPredictError:
            log.warning("the new version %s of %s does not load", version, device, exc_info=True)
            return
        self.on_model(device, version)

    def _finish(self, job: Job, state: str, error: dict[str, Any]) -> None:
        try:
            stored = self.datadir.catalog.finish_job(job.id, state, error=error)
        except SsdPredictError:  # e.g. the catalog is damaged: this worker still answers
            log.warning("could not persist the end of job %s", job.id, exc_info=True)
            stored = Job(**{**asdict(job), "state": state, "error": error})
        self._done(stored)

    def _done(self, stored: Job) -> None:
        with self._lock:
            job = self._jobs[stored.id]
            for name, value in asdict(stored).items():
                setattr(job, name, value)
        self.metrics.job_state(stored.state)


def _stop_running(running: DeviceLock) -> None:
    """Release a fleet job's own lock and remove its file (one per job would pile up)."""
    running.release()
    running.path.unlink(missing_ok=True)


def fleet_outcome(report: FleetReport) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A fleet retrain's job result (every device's outcome) and its error when any device failed."""
    devices: dict[str, dict[str, Any]] = {}
    for r in report.results:
        if r.ok:
            devices[r.device] = {"state": "succeeded", "model_version": r.value.version,
                                 "active": r.value.active, "seconds": round(r.seconds, 3),
                                 "activation": r.value.manifest.get("activation")}
        else:
            devices[r.device] = {"state": "failed", "error": r.error, "seconds": round(r.seconds, 3)}
    failed = sorted(r.device for r in report.failed)
    result = {"devices": devices, "succeeded": len(report.succeeded), "failed": len(failed),
              "workers": report.workers, "seconds": round(report.seconds, 3)}
    if not failed:
        return result, None
    return result, {
        "code": "devices_failed",
        "message": f"{len(failed)} of {len(report.results)} devices failed: " + ", ".join(failed[:10])
        + (", ..." if len(failed) > 10 else "") + "; every device's outcome is in the result",
        "details": {"failed": failed},
    }
