"""Delete a device or one sweep: catalog rows, Parquet measurements and model files together.

Both hold the device's writer lock, so nothing measures, imports or trains the device
meanwhile.  The catalog rows go first, in one transaction; the files after it.  A crash
in between leaves only files that nothing refers to (the device or sweep is gone either
way); the next delete of the same device, or ``ssdpredict catalog rebuild``, sees them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass

from modeling.errors import Conflict, NotFound
from modeling.store.files.datadir import DataDir
from modeling.store.files.parquet_meta import sidecar_path


@dataclass(frozen=True)
class Deleted:
    """What a delete removed."""

    device: str
    sweeps: int
    points: int
    models: int


def delete_device(datadir: DataDir, name: str, *, wait: bool = False,
                  on_wait: Callable[[str], None] | None = None) -> Deleted:
    """Remove a device with all its sweeps, points, model versions and files; raises ``UnknownDevice``.

    A device that what-if devices are built on is refused (``Conflict``, naming them): they
    would be left computing from nothing.  Delete the what-ifs first.
    """
    catalog = datadir.catalog
    with datadir.device_lock(name, "delete", wait=wait, on_wait=on_wait):
        dev = catalog.get_device(name)
        built_on = [d.name for d in catalog.list_devices()
                    if isinstance(spec := d.metadata.get("derived"), dict) and spec.get("base") == name]
        if built_on:
            raise Conflict(
                f"device {name!r} is the base of the what-if device(s) {', '.join(map(repr, built_on))}: "
                f"delete {'it' if len(built_on) == 1 else 'them'} first; nothing was deleted",
                details={"whatif_devices": built_on})
        sweeps = catalog.list_sweeps(name)
        points = sum(s.n_points for s in sweeps)  # imports keep their rows in Parquet alone
        with catalog.connect() as conn:
            models = conn.execute("DELETE FROM models WHERE device_id = ?", (dev.id,)).rowcount
            conn.execute("DELETE FROM points WHERE sweep_id IN (SELECT id FROM sweeps WHERE device_id = ?)",
                         (dev.id,))
            conn.execute("DELETE FROM sweeps WHERE device_id = ?", (dev.id,))
            conn.execute("DELETE FROM devices WHERE id = ?", (dev.id,))
        shutil.rmtree(datadir.measurements_dir / dev.name, ignore_errors=True)
        shutil.rmtree(datadir.device_models_dir(dev.name), ignore_errors=True)
    return Deleted(dev.name, len(sweeps), int(points), int(models))


def delete_sweep(datadir: DataDir, sweep_id: int, *, device: str | None = None, wait: bool = False,
                 on_wait: Callable[[str], None] | None = None) -> Deleted:
    """Remove one sweep (its points and Parquet file); raises ``NotFound``.

    ``device``, when given, must be the sweep's device (the API names both).  Model
    versions trained on the sweep stay: they are complete models, and their manifests
    list the sweeps they learned from.
    """
    catalog = datadir.catalog
    sweep = catalog.get_sweep(sweep_id)
    name = catalog.device_name(sweep.device_id)
    if device is not None and device != name:
        raise NotFound(f"device {device!r} has no sweep with id {sweep_id}")
    with datadir.device_lock(name, "delete", wait=wait, on_wait=on_wait):
        with catalog.connect() as conn:
            row = conn.execute("SELECT parquet FROM sweeps WHERE id = ?", (sweep_id,)).fetchone()
            if row is None:  # deleted while we waited for the lock
                raise NotFound(f"no sweep with id {sweep_id}")
            conn.execute("DELETE FROM points WHERE sweep_id = ?", (sweep_id,))
            conn.execute("DELETE FROM sweeps WHERE id = ?", (sweep_id,))
        points = sweep.n_points
        if row["parquet"]:
            path = catalog.measurements_dir / row["parquet"]
            path.unlink(missing_ok=True)
            sidecar_path(path).unlink(missing_ok=True)
    return Deleted(name, 1, int(points), 0)
