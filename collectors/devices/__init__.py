"""Device classes and their metadata: SSD, RAID (md, hardware, GPU, software), CSD, NVMe-oF.

``raid``, ``nvmeof`` and ``csd`` hold what each class needs beyond an ordinary sweep;
this module holds the class names and a summary of the devices in the catalog.
"""

from __future__ import annotations

from typing import Any

from modeling.errors import InvalidInput
from modeling.store import Catalog

DEVICE_CLASSES: tuple[str, ...] = ("ssd", "raid", "csd", "nvmeof", "pmem")
"""Known device classes (``pmem``: persistent memory used as a block or DAX device)."""


def validate_device_class(device_class: str) -> str:
    """Return ``device_class`` if it is known, else raise ``InvalidInput``."""
    if device_class not in DEVICE_CLASSES:
        raise InvalidInput(
            f"unknown device class {device_class!r}; use one of {', '.join(DEVICE_CLASSES)}"
        )
    return device_class


def describe_device(catalog: Catalog, name: str, *, with_sweeps: bool = False) -> dict[str, Any]:
    """A device's class, metadata, sweep and point counts and active model, as a dict."""
    dev = catalog.get_device(name)
    sweeps = catalog.list_sweeps(name)
    active = catalog.active_model_version(name)
    summary: dict[str, Any] = {
        "name": dev.name,
        "class": dev.device_class,
        "metadata": dev.metadata,
        "created_at": dev.created_at,
        "sweeps": sum(1 for s in sweeps if s.status == "complete"),
        "points": sum(s.n_points for s in sweeps if s.status == "complete"),
        "incomplete_sweeps": sum(1 for s in sweeps if s.status != "complete"),
        "active_model": active.version if active else None,
        # a what-if device (modeling.derived): computed from its base device's model, never measured
        "derived": dev.metadata.get("derived"),
    }
    if with_sweeps:
        summary["sweep_list"] = [
            {
                "id": s.id,
                "source": s.source,
                "status": s.status,
                "points": s.n_points,
                "planned": s.n_planned,
                "target": s.target,
                "created_at": s.created_at,
                "finished_at": s.finished_at,
                "files": s.info.get("n_files"),
            }
            for s in sweeps
        ]
    return summary


def describe_devices(catalog: Catalog) -> list[dict[str, Any]]:
    """Summaries of every device in the catalog, by name."""
    return [describe_device(catalog, d.name) for d in catalog.list_devices()]
