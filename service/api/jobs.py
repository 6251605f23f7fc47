"""Retrain jobs: one background thread per job, at most one running retrain per device.

A job's state lives in memory and in ``<home>/jobs/<id>.json`` (written atomically), so
any worker process of the service can answer ``GET /v1/jobs/{id}``.  "One retrain per
device" is an exclusive ``flock`` on ``<home>/jobs/locks/<device>.lock``: it holds across
worker processes, and the kernel releases it if the process dies, which is also how a job
orphaned by a crash is recognised.

Training itself (``modeling.training.train.train_device``) writes the new version completely and
then activates it in one catalog transaction, so a failed job never touches the active
model; the registry is told to re-read the active version when a job succeeds.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

from modeling.errors import Conflict, NotFound, SsdPredictError
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir, validate_name
from modeling.store.atomic import atomic_write_bytes
from modeling.store.catalog import utcnow
from modeling.training.train import train_device
from service.api.metrics import ServiceMetrics

log = logging.getLogger("ssdpredict.jobs")

_SAVE_EVERY_S = 0.25  # progress is persisted at most this often


@dataclass
class Job:
    """The public state of one job."""

    id: str
    kind: str
    device: str
    state: str = "queued"
    stage: str | None = None
    progress: float = 0.0
    created_at: str = field(default_factory=utcnow)
    started_at: str | None = None
    finished_at: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


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
        self.folder = datadir.root / "jobs"
        self._jobs: dict[str, Job] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def start(self, device: str, *, folds: int = 5, time_budget_s: float | None = None) -> Job:
        """Start retraining ``device``; raises ``UnknownDevice``, or ``Conflict`` if one is running."""
        validate_name(device)
        self.datadir.catalog.get_device(device)
        job = Job(id=uuid.uuid4().hex, kind="retrain", device=device)
        fd = self._acquire(device, job.id)
        try:
            with self._lock:
                self._jobs[job.id] = job
            self._save(job)
            thread = threading.Thread(
                target=self._run, args=(job, fd, folds, time_budget_s), name=f"retrain-{device}", daemon=True
            )
            with self._lock:
                self._threads[job.id] = thread
            thread.start()
        except BaseException:
            os.close(fd)
            raise
        self.metrics.job_state("started")
        return job

    def get(self, job_id: str) -> Job:
        """A job of this or another worker; raises ``NotFound``."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None:
                return Job(**asdict(job))  # a snapshot: the thread keeps mutating the original
        return self._load(job_id)

    def wait(self, timeout: float | None = None) -> None:
        """Wait for this process's running jobs (used at shutdown and in tests)."""
        with self._lock:
            threads = list(self._threads.values())
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    # -- the job thread ------------------------------------------------------------------

    def _run(self, job: Job, fd: int, folds: int, time_budget_s: float | None) -> None:
        last_save = 0.0

        def progress(stage: str, fraction: float) -> None:
            nonlocal last_save
            with self._lock:
                job.stage = stage
                job.progress = max(0.0, min(1.0, float(fraction)))
            now = time.monotonic()
            if now - last_save >= _SAVE_EVERY_S:
                last_save = now
                self._save(job)

        try:
            with self._lock:
                job.state = "running"
                job.started_at = utcnow()
            self._save(job)
            mv = train_device(
                self.datadir,
                job.device,
                folds=folds,
                time_budget_s=time_budget_s,
                progress=progress,
                activate=True,
            )
            # Load the new version here, in the job's thread, so the first prediction after
            # the swap finds it cached instead of reading files on the event loop.
            self.registry.load(job.device, mv.version)
            self.registry.invalidate(job.device)
            self.on_model(job.device, mv.version)
            result = {
                "model_version": mv.version,
                "active": mv.active,
                "accuracy": mv.manifest.get("cv_mre", {}),
                "n_rows": mv.manifest.get("data", {}).get("n_rows"),
            }
            self._finish(job, "succeeded", result=result)
        except SsdPredictError as exc:
            self._finish(
                job, "failed", error={"code": exc.code, "message": exc.message, "details": exc.details}
            )
        except Exception as exc:  # a bug or a damaged file: report it on the job, log the traceback
            log.exception("retrain of %s failed", job.device)
            message = f"retrain failed: {type(exc).__name__}: {exc}"
            self._finish(job, "failed", error={"code": "internal_error", "message": message, "details": None})
        finally:
            os.close(fd)  # releases the device's retrain lock
            with self._lock:
                self._threads.pop(job.id, None)

    def _finish(self, job: Job, state: str, **fields: Any) -> None:
        with self._lock:
            job.state = state
            job.finished_at = utcnow()
            if state == "succeeded":
                job.progress = 1.0
            for name, value in fields.items():
                setattr(job, name, value)
        self._save(job)
        self.metrics.job_state(state)

    # -- persistence and locking ---------------------------------------------------------

    def _path(self, job_id: str) -> Path:
        return self.folder / f"{job_id}.json"

    def _save(self, job: Job) -> None:
        with self._lock:
            data = json.dumps(asdict(job), sort_keys=True).encode()
        try:
            atomic_write_bytes(self._path(job.id), data)
        except OSError:  # the in-memory state still answers for this worker
            log.warning("could not persist job %s", job.id, exc_info=True)

    def _load(self, job_id: str) -> Job:
        try:
            job = Job(**json.loads(self._path(job_id).read_bytes()))
        except FileNotFoundError:
            raise NotFound(f"no job with id {job_id!r}") from None
        except (OSError, ValueError, TypeError) as exc:
            raise NotFound(f"job {job_id!r} cannot be read: {exc}") from None
        if job.state in ("queued", "running") and not self._lock_held_by(job.device, job.id):
            # The worker that ran it died: its flock is gone, so the job can never finish.
            job.state = "failed"
            job.error = {
                "code": "interrupted",
                "message": "the service stopped while the job ran",
                "details": None,
            }
        return job

    def _lock_path(self, device: str) -> Path:
        return self.folder / "locks" / f"{validate_name(device)}.lock"

    def _acquire(self, device: str, job_id: str) -> int:
        path = self._lock_path(device)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            running = os.pread(fd, 64, 0).decode(errors="replace").strip() or None
            os.close(fd)
            raise Conflict(
                f"a retrain of {device!r} is already running", details={"job_id": running}
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, job_id.encode(), 0)
        return fd

    def _lock_held_by(self, device: str, job_id: str) -> bool:
        path = self._lock_path(device)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 64, 0).decode(errors="replace").strip() == job_id
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)
