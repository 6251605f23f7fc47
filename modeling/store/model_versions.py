"""The catalog's model-version table: register, activate (rollback), list."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from modeling.errors import NotFound, UnknownDevice
from modeling.store.records import Device, ModelVersion, model_from_row, utcnow


class ModelVersionTable:
    """Mixin of :class:`~modeling.store.catalog.Catalog` for the ``models`` table."""

    def connect(self) -> AbstractContextManager[sqlite3.Connection]:  # provided by Catalog
        raise NotImplementedError

    def get_device(self, name: str) -> Device:  # provided by Catalog
        raise NotImplementedError

    def add_model_version(
        self, device: str, version: str, path: str, manifest: dict[str, Any], *, activate: bool
    ) -> ModelVersion:
        """Record a stored model version; with ``activate`` it becomes the active one atomically."""
        return self.add_model_versions([(device, version, path, manifest)], activate=activate)[0]

    def add_model_versions(
        self, entries: Sequence[tuple[str, str, str, dict[str, Any]]], *, activate: bool
    ) -> list[ModelVersion]:
        """Record stored versions ``(device, version, path, manifest)`` in one transaction.

        A fleet's client registers whatever its workers finished since it last looked in
        one commit: a commit costs far more than the rows in it.  All or none are recorded;
        raises ``UnknownDevice`` for a device not in the catalog.
        """
        created = utcnow()
        with self.connect() as conn:  # an exception inside rolls every row back
            for device, version, path, manifest in entries:
                row = conn.execute("SELECT id FROM devices WHERE name = ?", (device,)).fetchone()
                if row is None:
                    raise UnknownDevice(device)
                device_id = row[0]
                conn.execute(
                    "INSERT INTO models (version, device_id, active, path, manifest, created_at)"
                    " VALUES (?, ?, 0, ?, ?, ?)",
                    (version, device_id, path, json.dumps(manifest, sort_keys=True), created),
                )
                if activate:
                    conn.execute("UPDATE models SET active = 0 WHERE device_id = ?", (device_id,))
                    conn.execute("UPDATE models SET active = 1 WHERE version = ?", (version,))
        # the manifests as the catalog holds them (JSON round trip), like a re-read would give
        return [
            ModelVersion(version, device, activate, path, json.loads(json.dumps(m, sort_keys=True)), created)
            for device, version, path, m in entries
        ]

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
            conn.execute("UPDATE models SET active = 0 WHERE device_id = ?", (dev.id,))
            conn.execute("UPDATE models SET active = 1 WHERE version = ?", (version,))
        return self.get_model_version(device, version)

    def get_model_version(self, device: str, version: str) -> ModelVersion:
        """One model version of a device; raises ``NotFound``."""
        dev = self.get_device(device)
        with self.connect() as conn:
            row = conn.execute(
                "SELECT * FROM models WHERE device_id = ? AND version = ?", (dev.id, version)
            ).fetchone()
        if row is None:
            raise NotFound(f"device {device!r} has no model version {version!r}")
        return model_from_row(row, dev.name)

    def active_model_version(self, device: str) -> ModelVersion | None:
        """The device's active model version, or ``None`` if it has none."""
        dev = self.get_device(device)
        with self.connect() as conn:
            row = conn.execute(
                "SELECT * FROM models WHERE device_id = ? AND active = 1", (dev.id,)
            ).fetchone()
        return None if row is None else model_from_row(row, dev.name)

    def list_model_versions(self, device: str) -> list[ModelVersion]:
        """All model versions of a device, oldest first."""
        dev = self.get_device(device)
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT * FROM models WHERE device_id = ? ORDER BY created_at, version", (dev.id,)
            ).fetchall()
        return [model_from_row(r, dev.name) for r in rows]

