"""The catalog's model-version table: register, activate (rollback), list."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from pathlib import Path

from modeling.errors import NotFound, UnknownDevice
from modeling.store.files.atomic import atomic_write_bytes
from modeling.store.jobs import finish_job_sql
from modeling.store.records import Device, ModelVersion, model_from_row, utcnow


def version_summary(version: str, active: bool, manifest: dict[str, Any]) -> dict[str, Any]:
    """What a retrain job reports about the version it registered."""
    data = manifest.get("data")
    return {
        "model_version": version,
        "active": active,
        "accuracy": manifest.get("cv_mre", {}),
        "n_rows": data.get("n_rows") if isinstance(data, dict) else None,
        "activation": manifest.get("activation"),
    }


def insert_model_versions(
    conn: sqlite3.Connection, entries: Sequence[tuple[str, str, str, dict[str, Any], bool]]
) -> list[ModelVersion]:
    """Insert ``(device, version, path, manifest, activate)`` rows in the caller's transaction.

    Returns the versions as the catalog holds them (manifests through a JSON round trip,
    like a re-read); raises ``UnknownDevice`` for a device not in the catalog.
    """
    created = utcnow()
    added = []
    for device, version, path, manifest, activate in entries:
        row = conn.execute("SELECT id FROM devices WHERE name = ?", (device,)).fetchone()
        if row is None:
            raise UnknownDevice(device)
        text = json.dumps(manifest, sort_keys=True)
        conn.execute(
            "INSERT INTO models (version, device_id, active, path, manifest, created_at)"
            " VALUES (?, ?, 0, ?, ?, ?)",
            (version, row[0], path, text, created),
        )
        if activate:
            activate_sql(conn, row[0], version)
        added.append(ModelVersion(version, device, activate, path, json.loads(text), created))
    return added


def activate_sql(conn: sqlite3.Connection, device_id: int, version: str) -> None:
    """Make ``version`` its device's only active model, in the caller's transaction."""
    conn.execute("UPDATE models SET active = 0 WHERE device_id = ?", (device_id,))
    conn.execute("UPDATE models SET active = 1 WHERE version = ?", (version,))


ACTIVE_MARKER = "ACTIVE"
"""File in ``models/<device>/`` naming the active version, for ``catalog rebuild``."""


class ModelVersionTable:
    """Mixin of :class:`~modeling.store.catalog.Catalog` for the ``models`` table.

    After each activation the device's models folder gets an ``ACTIVE`` file naming the
    version, so a rebuilt catalog activates the same one (written after the commit: a
    crash in between leaves the previous name there, and a rebuild the previous version).
    """

    models_dir: Path  # provided by Catalog

    def connect(self) -> AbstractContextManager[sqlite3.Connection]:  # provided by Catalog
        raise NotImplementedError

    def get_device(self, name: str) -> Device:  # provided by Catalog
        raise NotImplementedError

    def add_model_version(
        self, device: str, version: str, path: str, manifest: dict[str, Any], *, activate: bool,
        job_id: str | None = None,
    ) -> ModelVersion:
        """Record a stored model version; with ``activate`` it becomes the active one atomically.

        ``job_id``: the job that trained it ends as ``succeeded`` in the same transaction, so
        a crash can never leave an active version with a job that says otherwise.
        """
        with self.connect() as conn:
            added = insert_model_versions(conn, [(device, version, path, manifest, activate)])
            if job_id is not None:
                finish_job_sql(conn, job_id, "succeeded", result=version_summary(version, activate, manifest))
        self._mark_activated(added)
        return added[0]

    def add_model_versions(
        self, entries: Sequence[tuple[str, str, str, dict[str, Any], bool]]
    ) -> list[ModelVersion]:
        """Record stored versions ``(device, version, path, manifest, activate)`` in one transaction.

        A fleet's client registers whatever its workers finished since it last looked in
        one commit: a commit costs far more than the rows in it.  All or none are recorded;
        raises ``UnknownDevice`` for a device not in the catalog.
        """
        with self.connect() as conn:  # an exception inside rolls every row back
            added = insert_model_versions(conn, entries)
        self._mark_activated(added)
        return added

    def _mark_activated(self, versions: list[ModelVersion]) -> None:
        for mv in versions:
            if mv.active:
                self._mark_active(mv.device, mv.version)

    def active_model_versions(self) -> dict[str, ModelVersion]:
        """Every device's active model version, in one query."""
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT m.*, d.name AS device_name FROM models m JOIN devices d ON d.id = m.device_id"
                " WHERE m.active = 1"
            ).fetchall()
        return {r["device_name"]: model_from_row(r, r["device_name"]) for r in rows}

    def model_version_names(self) -> set[str]:
        """Every version name in the catalog (names are unique across devices)."""
        with self.connect() as conn:
            return {row[0] for row in conn.execute("SELECT version FROM models")}

    def activate_model(self, device: str, version: str) -> ModelVersion:
        """Make ``version`` the device's active model (rollback or roll forward)."""
        dev = self.get_device(device)
        with self.connect() as conn:
            row = conn.execute(
                "SELECT version FROM models WHERE device_id = ? AND version = ?", (dev.id, version)
            ).fetchone()
            if row is None:
                raise NotFound(f"device {device!r} has no model version {version!r}")
            activate_sql(conn, dev.id, version)
        self._mark_active(dev.name, version)
        return self.get_model_version(device, version)

    def _mark_active(self, device: str, version: str) -> None:
        folder = self.models_dir / device
        if folder.is_dir():
            atomic_write_bytes(folder / ACTIVE_MARKER, version.encode())

    def get_model_version(self, device: str, version: str) -> ModelVersion:
        """One model version of a device; raises ``NotFound``."""
        mv = self._one_model(device, "version = ?", (version,))
        if mv is None:
            raise NotFound(f"device {device!r} has no model version {version!r}")
        return mv

    def active_model_version(self, device: str) -> ModelVersion | None:
        """The device's active model version, or ``None`` if it has none."""
        return self._one_model(device, "active = 1", ())

    def _one_model(self, device: str, where: str, args: tuple[Any, ...]) -> ModelVersion | None:
        """The device's model version matching ``where`` (a constant SQL condition), or None."""
        with self.connect() as conn:  # one connection: a cold fleet opens one per device for this
            dev = conn.execute("SELECT id, name FROM devices WHERE name = ?", (device,)).fetchone()
            if dev is None:
                raise UnknownDevice(device)
            row = conn.execute(
                f"SELECT * FROM models WHERE device_id = ? AND {where}", (dev["id"], *args)
            ).fetchone()
        return None if row is None else model_from_row(row, dev["name"])

    def list_model_versions(self, device: str) -> list[ModelVersion]:
        """All model versions of a device, oldest first."""
        dev = self.get_device(device)
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT * FROM models WHERE device_id = ? ORDER BY created_at, version", (dev.id,)
            ).fetchall()
        return [model_from_row(r, dev.name) for r in rows]

