"""Retrain jobs: one background thread per job, one writer per device.

A job's state lives in the catalog's ``jobs`` table (:mod:`modeling.store.jobs`), so any
worker process of the service can answer ``GET /v1/jobs/{id}``.  "One retrain per
device" is the device's writer lock (:mod:`modeling.store.locks`), which also excludes
a CLI sweep, ingest, train or delete of the device; it holds across worker processes,
and the kernel releases it if the process dies, which is how a job orphaned by a crash
is recognised: it is marked ``interrupted`` when a worker starts, and when it is read.

Training (``modeling.training.train.train_device``) writes the new version completely, then
registers (and maybe activates) it and marks the job succeeded in one catalog
transaction, so the job's state and the active version agree after a crash at any
moment; a failed job never touches the active model.
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
from modeling.store.jobs import Job
from modeling.store.locks import DeviceLock
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
    ) -> None:
        self.datadir = datadir
        self.registry = registry
        self.metrics = metrics
        self.on_model = on_model  # told (device, version) when a retrain made a new version active
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
            with self._lock:
                self._jobs[job.id] = job
            thread = threading.Thread(
                target=self._run, args=(job, lock, options), name=f"retrain-{device}", daemon=True
            )
            with self._lock:
                self._threads[job.id] = thread
            thread.start()
        except BaseException:
            lock.release()
            raise
        self.metrics.job_state("started")
        return Job(**asdict(job))

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
        holder = self.datadir.lock_holder(job.device)
        return holder is not None and holder.get("detail") == job.id

    # -- the job thread ------------------------------------------------------------------

    def _run(self, job: Job, lock: DeviceLock, options: dict[str, Any]) -> None:
        catalog = self.datadir.catalog
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
                    catalog.job_progress(job.id, job.stage, job.progress)
                except SsdPredictError:  # progress is a courtesy; the job goes on
                    log.warning("could not persist the progress of job %s", job.id, exc_info=True)

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
