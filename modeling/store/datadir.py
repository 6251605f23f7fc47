"""Paths inside the data directory."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from modeling.store.catalog import Catalog
from modeling.store.names import validate_name


class DataDir:
    """The on-disk home of catalog, measurements, models and scratch files."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()
        self.root.mkdir(parents=True, exist_ok=True)

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

    @cached_property
    def catalog(self) -> Catalog:
        """The SQLite catalog (created on first use)."""
        return Catalog(self.catalog_path, self.measurements_dir)

    def __repr__(self) -> str:
        return f"DataDir({str(self.root)!r})"
