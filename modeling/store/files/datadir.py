"""Paths inside the data directory."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from modeling.store.catalog import Catalog
from modeling.store.files.readonly import read_only_reason
from modeling.store.files.locks import DeviceLock, DeviceLockSet, TargetLock, lock_holder
from modeling.store.names import validate_name


class DataDir:
    """The on-disk home of catalog, measurements, models and scratch files."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()
        if not self.root.is_dir():
            self.root.mkdir(parents=True, exist_ok=True)

    @cached_property
    def read_only(self) -> str | None:
        """Why the data directory cannot be written ("read-only file system" ...), or None."""
        return read_only_reason(self.root)

    @property
    def catalog_path(self) -> Path:
        return self.root / "catalog.sqlite3"

    @property
    def measurements_dir(self) -> Path:
        return self.root / "measurements"

    @property
    def models_dir(self) -> Path:
        return self.root / "models"

    @property
    def scratch_dir(self) -> Path:
        return self.root / "scratch"

    def device_models_dir(self, device: str) -> Path:
        """Folder of a device's model versions."""
        return self.models_dir / validate_name(device)

    def device_lock(self, device: str, operation: str, *, wait: bool = False,
                    on_wait: Callable[[str], None] | None = None, detail: str | None = None) -> DeviceLock:
        """The writer lock of ``device`` (not yet taken: use it in a ``with`` block)."""
        return DeviceLock(self.root, validate_name(device), operation, wait=wait, on_wait=on_wait,
                          detail=detail)

    def device_locks(self, devices: Sequence[str], operation: str, *, wait: bool = False,
                     skip_busy: bool = False, on_wait: Callable[[str], None] | None = None,
                     detail: str | None = None) -> DeviceLockSet:
        """The writer locks of many devices (not yet taken: see :class:`DeviceLockSet`)."""
        return DeviceLockSet(self.root, [validate_name(d) for d in devices], operation, wait=wait,
                             skip_busy=skip_busy, on_wait=on_wait, detail=detail)

    def target_lock(self, target: str, operation: str, *, device: str, wait: bool = False,
                    on_wait: Callable[[str], None] | None = None) -> TargetLock:
        """The lock of a sweep target (its resolved path), held beside the device's lock."""
        return TargetLock(self.root, target, operation, device=validate_name(device), wait=wait,
                          on_wait=on_wait)

    def lock_holder(self, device: str) -> dict[str, Any] | None:
        """Who holds ``device``'s writer lock now, or None."""
        return lock_holder(self.root, validate_name(device))

    @cached_property
    def catalog(self) -> Catalog:
        """The SQLite catalog (created on first use)."""
        return Catalog(self.catalog_path, self.measurements_dir, self.models_dir, read_only=self.read_only)

    def __repr__(self) -> str:
        return f"DataDir({str(self.root)!r})"
