"""Rebuild a damaged or lost catalog from the Parquet measurements and the model files.

What each holds (see :mod:`modeling.store.files.parquet_meta` and :mod:`modeling.registry`):

* ``measurements/<device>/sweep-<id>.parquet`` -- every row of a complete sweep, plus the
  sweep's and the device's catalog records (class, metadata, plan, provenance);
* ``models/<device>/<version>/manifest.json`` -- the model version's manifest, exactly
  the catalog's copy; ``models/<device>/ACTIVE`` -- the active version's name.

Rows are not copied back into the catalog's ``points`` table: like an import's, they
live in the Parquet file alone.  The new catalog is built beside the old one and renamed
into place at the end, so an interrupted rebuild changes nothing; the damaged file is kept as
``catalog.sqlite3.damaged-<time>``.  Lost for good: sweeps that were still running (their
points lived in the catalog only), the raw fio JSON of each point, the job history and
the record of scratch files (a sweep of one then needs ``--destroy-data``), and the device
class, metadata and provenance of sweeps imported by ``ingest`` (their Parquet files are
written by the importer without the records; they come back as class ssd).  Sweep ids
are kept, since model manifests name the sweeps they learned from.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from modeling.store.catalog import Catalog
from modeling.store.files.datadir import DataDir
from modeling.store.names import validate_name
from modeling.store.model_versions import ACTIVE_MARKER
from modeling.store.files.parquet_meta import read_sweep_record
from modeling.store.records import utcnow

_SWEEP_FILE = re.compile(r"^sweep-(\d+)\.parquet$")


@dataclass
class RebuildReport:
    """What a rebuild restored and what it could not."""

    devices: int = 0
    sweeps: int = 0
    points: int = 0
    models: int = 0
    active: dict[str, str] = field(default_factory=dict)
    damaged_copy: str | None = None
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def rebuild_catalog(datadir: DataDir) -> RebuildReport:
    """Rebuild ``datadir``'s catalog from its files (see the module docstring)."""
    report = RebuildReport()
    devices = sorted({p.name for p in (datadir.measurements_dir, datadir.models_dir) if p.is_dir()
                      for p in p.iterdir() if p.is_dir()})
    locks = []
    try:
        for name in devices:
            try:
                validate_name(name)
            except Exception:
                report.skipped.append(f"{name}/: not a device name")
                continue
            locks.append(datadir.device_lock(name, "rebuild").acquire())
        tmp = datadir.root / "catalog.sqlite3.rebuilding"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{tmp}{suffix}").unlink(missing_ok=True)
        catalog = Catalog(tmp, datadir.measurements_dir, datadir.models_dir, new=True)
        known: set[str] = set()
        for name in devices:
            if any(skip.startswith(f"{name}/: ") for skip in report.skipped):
                continue
            _restore_sweeps(catalog, datadir, name, known, report)
            _restore_models(catalog, datadir, name, known, report)
        report.devices = len(known)
        report.damaged_copy = _set_aside(datadir.catalog_path)
        os.replace(tmp, datadir.catalog_path)
        datadir.__dict__.pop("catalog", None)  # the cached Catalog was the damaged one
    finally:
        for lock in locks:
            lock.release()
    return report


def _ensure_device(catalog: Catalog, name: str, record: dict[str, Any] | None, known: set[str]) -> None:
    record = record or {}
    with catalog.connect() as conn:
        if name in known:
            if record:  # a later sweep's record is the newer state of the device
                conn.execute("UPDATE devices SET class = ?, metadata = ? WHERE name = ?",
                             (record.get("class", "ssd"), json.dumps(record.get("metadata") or {},
                                                                     sort_keys=True), name))
            return
        conn.execute(
            "INSERT INTO devices (name, class, metadata, created_at) VALUES (?, ?, ?, ?)",
            (name, record.get("class", "ssd"), json.dumps(record.get("metadata") or {}, sort_keys=True),
             record.get("created_at") or utcnow()),
        )
    known.add(name)


def _restore_sweeps(catalog: Catalog, datadir: DataDir, name: str, known: set[str],
                    report: RebuildReport) -> None:
    folder = datadir.measurements_dir / name
    if not folder.is_dir():
        return
    files = sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := _SWEEP_FILE.match(p.name)))
    for sweep_id, path in files:
        relative = f"{name}/{path.name}"
        try:
            record = read_sweep_record(path)
            frame = pd.read_parquet(path)
        except Exception as exc:  # a damaged file must not stop the others from coming back
            report.skipped.append(f"{relative}: unreadable ({type(exc).__name__}: {exc})")
            continue
        if record is None:
            report.notes.append(f"{relative}: written before sweeps carried their records; restored "
                                "with source 'ingest', class ssd and no provenance")
        _ensure_device(catalog, name, (record or {}).get("device"), known)
        sweep = (record or {}).get("sweep") or {}
        now = utcnow()
        n_rows = len(frame)
        with catalog.connect() as conn:
            device_id = conn.execute("SELECT id FROM devices WHERE name = ?", (name,)).fetchone()["id"]
            # The rows stay in the Parquet file alone (as for an import): ``n_rows`` counts them.
            info = {**(sweep.get("info") or {}), "n_rows": n_rows, "rebuilt_at": now}
            conn.execute(
                "INSERT INTO sweeps (id, device_id, source, plan_key, plan, target, n_planned, status,"
                " info, parquet, created_at, finished_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, 'complete', ?, ?, ?, ?)",
                (sweep_id, device_id, sweep.get("source", "ingest"), sweep.get("plan_key"),
                 json.dumps(sweep.get("plan") or {}, sort_keys=True), sweep.get("target"),
                 int(sweep.get("n_planned") or n_rows), json.dumps(info, sort_keys=True, default=str),
                 relative, sweep.get("created_at") or now, sweep.get("finished_at") or now),
            )
        report.sweeps += 1
        report.points += n_rows


def _restore_models(catalog: Catalog, datadir: DataDir, name: str, known: set[str],
                    report: RebuildReport) -> None:
    folder = datadir.models_dir / name
    if not folder.is_dir():
        return
    restored: list[str] = []
    for version_dir in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        relative = f"{name}/{version_dir.name}"
        try:
            manifest = json.loads((version_dir / "manifest.json").read_bytes())
            ok = (isinstance(manifest, dict) and manifest.get("format") == "ssdpredict-model"
                  and manifest.get("device") == name and manifest.get("version") == version_dir.name)
        except (OSError, ValueError) as exc:
            report.skipped.append(f"models/{relative}: unreadable manifest ({exc})")
            continue
        if not ok:
            report.skipped.append(f"models/{relative}: not an ssdpredict model of {name}")
            continue
        _ensure_device(catalog, name, None, known)
        with catalog.connect() as conn:
            device_id = conn.execute("SELECT id FROM devices WHERE name = ?", (name,)).fetchone()["id"]
            conn.execute(
                "INSERT INTO models (version, device_id, active, path, manifest, created_at)"
                " VALUES (?, ?, 0, ?, ?, ?)",
                (version_dir.name, device_id, relative, json.dumps(manifest, sort_keys=True),
                 _created_at(manifest)),
            )
        restored.append(version_dir.name)
        report.models += 1
    if not restored:
        return
    marker = folder / ACTIVE_MARKER
    active = marker.read_text().strip() if marker.is_file() else None
    if active not in restored:
        active = max(restored)  # versions are named by creation time
        report.notes.append(f"{name}: no record of the active version; activated the newest, {active}")
    catalog.activate_model(name, active)
    report.active[name] = active


def _created_at(manifest: dict[str, Any]) -> str:
    value = manifest.get("created_at")
    return str(value) if value else utcnow()


def _set_aside(path: Path) -> str | None:
    """Rename the old catalog (and its WAL files) aside; returns the new name, if there was one."""
    if not path.exists():
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    for suffix in ("-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        if side.exists():
            os.replace(side, f"{aside}{suffix}")
    os.replace(path, aside)
    return aside.name
