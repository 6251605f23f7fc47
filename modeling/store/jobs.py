"""The catalog's job table: background jobs (retrains) and their states.

Jobs live in the catalog rather than in files of their own, so that the end of a retrain
and the model version it registered are one transaction
(:meth:`~modeling.store.model_versions.ModelVersionTable.add_model_version` with a
``job_id``): after a crash at any moment, either the version is registered and its job
says ``succeeded``, or neither.  A job left ``queued`` or ``running`` by a process that
died is marked ``interrupted`` (see :meth:`JobTable.interrupt_orphans`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from modeling.errors import NotFound
from modeling.store.records import load_json, utcnow

JOB_STATES = ("queued", "running", "succeeded", "failed", "interrupted")
FINAL_STATES = ("succeeded", "failed", "interrupted")
INTERRUPTED = {"code": "interrupted", "message": "the process running the job stopped before it ended",
               "details": None}


@dataclass
class Job:
    """The public state of one job (``device`` is ``*`` for a job over ``devices``)."""

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
    devices: list[str] | None = None  # a job over many devices: which (stored with its options)


MANY_DEVICES = "*"
"""The ``device`` of a job over many devices: not a valid device name, so never one."""


def _job_from_row(row: sqlite3.Row) -> Job:
    return Job(
        id=row["id"], kind=row["kind"], device=row["device"], state=row["state"], stage=row["stage"],
        progress=float(row["progress"]), created_at=row["created_at"], started_at=row["started_at"],
        finished_at=row["finished_at"],
        result=None if row["result"] is None else load_json(row["result"], "job result"),
        error=None if row["error"] is None else load_json(row["error"], "job error"),
        devices=load_json(row["options"], "job options").get("devices") if row["device"] == MANY_DEVICES
        else None,
    )


def finish_job_sql(conn: sqlite3.Connection, job_id: str, state: str, *, result: Any = None,
                   error: Any = None) -> None:
    """Record a job's end inside the caller's transaction."""
    conn.execute(
        "UPDATE jobs SET state = ?, finished_at = ?, result = ?, error = ?,"
        " progress = CASE WHEN ? = 'succeeded' THEN 1.0 ELSE progress END WHERE id = ?",
        (state, utcnow(), None if result is None else json.dumps(result, sort_keys=True),
         None if error is None else json.dumps(error, sort_keys=True), state, job_id),
    )


class JobTable:
    """Mixin of :class:`~modeling.store.catalog.Catalog` for the ``jobs`` table."""

    def connect(self) -> AbstractContextManager[sqlite3.Connection]:  # provided by Catalog
        raise NotImplementedError

    def add_job(self, job: Job, options: dict[str, Any] | None = None) -> Job:
        """Store a new job."""
        with self.connect() as conn:
            conn.execute(
                "INSERT INTO jobs (id, kind, device, state, stage, progress, options, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (job.id, job.kind, job.device, job.state, job.stage, job.progress,
                 json.dumps(options or {}, sort_keys=True), job.created_at),
            )
        return job

    def get_job(self, job_id: str) -> Job:
        """A job by id; raises ``NotFound``."""
        with self.connect() as conn:
            row = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFound(f"no job with id {job_id!r}")
        return _job_from_row(row)

    def start_job(self, job_id: str) -> None:
        """Mark a job running."""
        with self.connect() as conn:
            conn.execute(
                "UPDATE jobs SET state = 'running', started_at = ? WHERE id = ? AND state = 'queued'",
                (utcnow(), job_id),
            )

    def job_progress(self, job_id: str, stage: str | None, progress: float) -> None:
        """Record a running job's stage and progress."""
        with self.connect() as conn:
            conn.execute("UPDATE jobs SET stage = ?, progress = ? WHERE id = ? AND state = 'running'",
                         (stage, progress, job_id))

    def finish_job(self, job_id: str, state: str, *, result: Any = None, error: Any = None) -> Job:
        """Record a job's end (a job already ended is left as it is)."""
        with self.connect() as conn:
            row = conn.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is not None and row["state"] not in FINAL_STATES:
                finish_job_sql(conn, job_id, state, result=result, error=error)
        return self.get_job(job_id)

    def interrupt_orphans(self, alive: Callable[[Job], bool]) -> list[Job]:
        """Mark ``interrupted`` every unfinished job for which ``alive(job)`` is false."""
        with self.connect() as conn:
            rows = conn.execute("SELECT * FROM jobs WHERE state IN ('queued', 'running')").fetchall()
        orphans = [job for job in map(_job_from_row, rows) if not alive(job)]
        for job in orphans:
            with self.connect() as conn:
                # only if it is still unfinished: it may have ended since it was read
                conn.execute(
                    "UPDATE jobs SET state = 'interrupted', finished_at = ?, error = ?"
                    " WHERE id = ? AND state IN ('queued', 'running')",
                    (utcnow(), json.dumps(INTERRUPTED, sort_keys=True), job.id),
                )
        return [self.get_job(job.id) for job in orphans]
