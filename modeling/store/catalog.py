"""The SQLite catalog: devices, sweeps, points and model versions.

One short-lived connection per operation (WAL mode, busy timeout), so the catalog is safe
to use from several threads and processes at once.  See :mod:`modeling.store` for the
crash-safety rules.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from modeling.errors import InvalidInput, NotFound, UnknownDevice
from modeling.store.files.atomic import atomic_write, atomic_write_bytes
from modeling.store.files.readonly import read_only_uri, refused
from modeling.store.schema import damaged, is_damage, open_schema, undecodable
from modeling.store.jobs import JobTable
from modeling.store.model_versions import ModelVersionTable
from modeling.store.files.parquet_meta import sidecar_bytes, sidecar_path, sweep_record, write_sweep_parquet
from modeling.store.names import validate_name
from modeling.store.records import (
    Device,
    ModelVersion,
    Sweep,
    device_from_row,
    load_json,
    sweep_from_row,
    utcnow,
)

__all__ = ["Catalog", "Device", "ModelVersion", "Sweep", "utcnow"]



def read_measurement_files(
    folder: Path, files: Sequence[tuple[int, str]], columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """The rows of ``(sweep id, Parquet file relative to folder)`` files, concatenated.

    ``columns``: only those a file has (and ``sweep_id``), for a caller that reads a few of a
    device's dozens of columns (a cold capacity question: a third of its Parquet time).
    """
    frames = [_with_sweep_id(read_parquet(folder / name, columns), sweep_id) for sweep_id, name in files]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


def read_parquet(path: Path, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A Parquet file as ``pd.read_parquet`` gives it (the same frame: a test holds them equal),
    through the file reader alone: ``pd.read_parquet`` goes through pyarrow's dataset layer,
    half of a small file's 3.6 ms.  ``columns``: the ones of those the file has, in its order."""
    with pq.ParquetFile(path) as handle:
        if columns is not None:
            wanted = {*columns, "sweep_id"}
            columns = [c for c in handle.schema_arrow.names if c in wanted]
        table = handle.read(columns=columns, use_threads=False, use_pandas_metadata=True)
    return table.to_pandas()


# A sweep stored straight to Parquet (an import) keeps its row count in info.n_rows: its
# rows are not copied into the points table, which would grow the catalog by the whole CSV.
_N_POINTS = (
    "COALESCE(json_extract(s.info, '$.n_rows'), (SELECT COUNT(*) FROM points p WHERE p.sweep_id = s.id))"
)


def refuse_measurements(name: str, metadata: dict[str, Any]) -> None:
    """Raise ``InvalidInput`` when ``name`` is a what-if device: it is computed, never measured."""
    spec = metadata.get("derived")
    if spec is not None:
        base = spec.get("base") if isinstance(spec, dict) else None
        raise InvalidInput(
            f"device {name!r} is a what-if device (computed from {base!r}): it takes no measurements; "
            "sweep or ingest under another name", details={"device": name})


def data_files_exist(measurements_dir: Path, models_dir: Path) -> bool:
    """Whether Parquet measurements or model manifests exist (so a missing catalog was lost)."""
    # a sweep's file, not an import's work files (which are written before the catalog opens)
    return any(measurements_dir.glob("*/sweep-*.parquet")) or any(models_dir.glob("*/*/manifest.json"))


class Catalog(ModelVersionTable, JobTable):
    """Devices, sweeps, points and model versions in one SQLite file."""

    def __init__(self, path: Path, measurements_dir: Path, models_dir: Path | None = None, *,
                 new: bool = False, read_only: str | None = None) -> None:
        """Open (checking it for damage) or create the catalog at ``path``.

        A missing or empty catalog beside existing measurement or model files is a lost
        one and raises ``CatalogCorrupt``, unless ``new`` (a rebuild creates it on purpose).
        ``read_only``: why the folder cannot be written; the catalog is then opened for
        reading only, and a write raises ``ReadOnlyData`` naming the folder and the reason.
        """
        self.path = Path(path)
        self.measurements_dir = Path(measurements_dir)
        self.models_dir = Path(models_dir) if models_dir is not None else self.path.parent / "models"
        self.read_only = read_only
        if read_only is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        open_schema(self.path, has_data=not new and self._has_data_files(), read_only=read_only)

    def _has_data_files(self) -> bool:
        return data_files_exist(self.measurements_dir, self.models_dir)

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection whose ``with`` block is one transaction (commit or rollback)."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            # deleted or emptied under a running process: SQLite would start a new, empty one
            raise damaged(self.path, "it disappeared or was emptied while in use")
        try:
            if self.read_only is not None:
                conn = sqlite3.connect(read_only_uri(self.path), uri=True, timeout=30.0, isolation_level=None)
            else:
                conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            try:
                conn.row_factory = sqlite3.Row
                if self.read_only is None:
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA foreign_keys=ON")
                conn.execute("BEGIN IMMEDIATE" if self.read_only is None else "BEGIN")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise damaged(self.path, str(exc)) from None
            if self.read_only is not None and "readonly" in str(exc):
                raise refused(self.path.parent, self.read_only) from None
            raise
        except UnicodeDecodeError as exc:
            raise damaged(self.path, undecodable(exc)) from None

    # -- devices -------------------------------------------------------------------------

    def ensure_device(
        self, name: str, device_class: str = "ssd", metadata: dict[str, Any] | None = None
    ) -> Device:
        """Return the device called ``name``, creating it (or merging new metadata) if needed."""
        validate_name(name)
        with self.connect() as conn:
            row = conn.execute("SELECT * FROM devices WHERE name = ?", (name,)).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO devices (name, class, metadata, created_at) VALUES (?, ?, ?, ?)",
                    (name, device_class, json.dumps(metadata or {}, sort_keys=True), utcnow()),
                )
            elif metadata:
                merged = {**load_json(row["metadata"], "device metadata"), **metadata}
                if "derived" in merged and "derived" not in metadata:
                    refuse_measurements(name, merged)  # a sweep or import of a what-if's name
                conn.execute(
                    "UPDATE devices SET metadata = ?, class = ? WHERE id = ?",
                    (json.dumps(merged, sort_keys=True), device_class, row["id"]),
                )
            row = conn.execute("SELECT * FROM devices WHERE name = ?", (name,)).fetchone()
        return device_from_row(row)

    def get_device(self, name: str) -> Device:
        """The device called ``name``; raises ``UnknownDevice``."""
        with self.connect() as conn:
            row = conn.execute("SELECT * FROM devices WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise UnknownDevice(name)
        return device_from_row(row)

    def has_device(self, name: str) -> bool:
        """Whether a device called ``name`` is in the catalog."""
        with self.connect() as conn:
            return conn.execute("SELECT 1 FROM devices WHERE name = ?", (name,)).fetchone() is not None

    def list_devices(self) -> list[Device]:
        """All devices, by name."""
        with self.connect() as conn:
            rows = conn.execute("SELECT * FROM devices ORDER BY name").fetchall()
        return [device_from_row(r) for r in rows]

    # -- sweeps and points ---------------------------------------------------------------

    def create_sweep(
        self,
        device: str,
        *,
        source: str,
        plan: dict[str, Any] | None = None,
        plan_key: str | None = None,
        target: str | None = None,
        n_planned: int = 0,
        info: dict[str, Any] | None = None,
    ) -> Sweep:
        """Start a new sweep of an existing device (a measured one: not a what-if)."""
        dev = self.get_device(device)
        refuse_measurements(dev.name, dev.metadata)
        with self.connect() as conn:
            cur = conn.execute(
                "INSERT INTO sweeps (device_id, source, plan_key, plan, target, n_planned, status,"
                " info, created_at) VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?)",
                (
                    dev.id,
                    source,
                    plan_key,
                    json.dumps(plan or {}, sort_keys=True),
                    target,
                    n_planned,
                    json.dumps(info or {}, sort_keys=True),
                    utcnow(),
                ),
            )
            sweep_id = cur.lastrowid
        assert sweep_id is not None
        return self.get_sweep(sweep_id)

    def find_resumable_sweep(self, device: str, plan_key: str) -> Sweep | None:
        """The newest unfinished sweep of ``device`` with the same plan key, if any."""
        dev = self.get_device(device)
        with self.connect() as conn:
            row = conn.execute(
                "SELECT id FROM sweeps WHERE device_id = ? AND plan_key = ? AND status = 'running'"
                " ORDER BY id DESC LIMIT 1",
                (dev.id, plan_key),
            ).fetchone()
        return None if row is None else self.get_sweep(row["id"])

    def find_complete_sweep(self, device: str, plan_key: str) -> Sweep | None:
        """The newest complete sweep of ``device`` with the same plan key, if any."""
        dev = self.get_device(device)
        with self.connect() as conn:
            row = conn.execute(
                "SELECT id FROM sweeps WHERE device_id = ? AND plan_key = ? AND status = 'complete'"
                " ORDER BY id DESC LIMIT 1",
                (dev.id, plan_key),
            ).fetchone()
        return None if row is None else self.get_sweep(row["id"])

    def get_sweep(self, sweep_id: int) -> Sweep:
        """A sweep by id; raises ``NotFound``."""
        with self.connect() as conn:
            row = conn.execute(
                f"SELECT s.*, {_N_POINTS} AS n_points FROM sweeps s WHERE s.id = ?",
                (sweep_id,),
            ).fetchone()
        if row is None:
            raise NotFound(f"no sweep with id {sweep_id}")
        return sweep_from_row(row)

    def list_sweeps(self, device: str) -> list[Sweep]:
        """All sweeps of a device, oldest first."""
        dev = self.get_device(device)
        with self.connect() as conn:
            rows = conn.execute(
                f"SELECT s.*, {_N_POINTS} AS n_points FROM sweeps s WHERE s.device_id = ? ORDER BY s.id",
                (dev.id,),
            ).fetchall()
        return [sweep_from_row(r) for r in rows]

    def add_point(
        self,
        sweep_id: int,
        seq: int,
        data: dict[str, Any],
        *,
        repeat: int = 0,
        raw: str | bytes | None = None,
    ) -> bool:
        """Store one measured point in its own transaction; ``False`` if it was already stored."""
        blob = None
        if raw is not None:
            blob = zlib.compress(raw.encode() if isinstance(raw, str) else raw, 6)
        with self.connect() as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO points (sweep_id, seq, repeat, data, raw, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (sweep_id, seq, repeat, json.dumps(data, sort_keys=True), blob, utcnow()),
            )
            return cur.rowcount == 1

    def completed_points(self, sweep_id: int) -> set[tuple[int, int]]:
        """The ``(seq, repeat)`` pairs already stored for a sweep."""
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT seq, repeat FROM points WHERE sweep_id = ?", (sweep_id,)
            ).fetchall()
        return {(r["seq"], r["repeat"]) for r in rows}

    def sweep_points(self, sweep_id: int) -> pd.DataFrame:
        """The stored points of a sweep as rows (``sweep_id``, ``seq``, ``repeat`` + data)."""
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT seq, repeat, data FROM points WHERE sweep_id = ? ORDER BY seq, repeat",
                (sweep_id,),
            ).fetchall()
        records = [
            {"sweep_id": sweep_id, "seq": r["seq"], "repeat": r["repeat"], **load_json(r["data"], "point")}
            for r in rows
        ]
        return pd.DataFrame.from_records(records)

    def raw_result(self, sweep_id: int, seq: int, repeat: int = 0) -> str | None:
        """The raw fio JSON stored with a point, if any."""
        with self.connect() as conn:
            row = conn.execute(
                "SELECT raw FROM points WHERE sweep_id = ? AND seq = ? AND repeat = ?",
                (sweep_id, seq, repeat),
            ).fetchone()
        if row is None or row["raw"] is None:
            return None
        return zlib.decompress(row["raw"]).decode()

    def finish_sweep(self, sweep_id: int, info: dict[str, Any] | None = None) -> Sweep:
        """Write the sweep's rows to Parquet atomically, then mark it complete."""
        sweep = self.get_sweep(sweep_id)
        device = self.get_device(self.device_name(sweep.device_id))
        frame = self.sweep_points(sweep_id)
        relative = f"{device.name}/sweep-{sweep_id}.parquet"
        merged_info = {**sweep.info, **(info or {})}
        finished_at = utcnow()
        record = sweep_record(sweep, device, info=merged_info, finished_at=finished_at)
        atomic_write(self.measurements_dir / relative, lambda tmp: write_sweep_parquet(tmp, frame, record))
        with self.connect() as conn:
            conn.execute(
                "UPDATE sweeps SET status = 'complete', parquet = ?, finished_at = ?, info = ?"
                " WHERE id = ?",
                (relative, finished_at, json.dumps(merged_info, sort_keys=True), sweep_id),
            )
        return self.get_sweep(sweep_id)

    def add_measurements(
        self,
        device: str,
        rows: list[dict[str, Any]],
        *,
        source: str = "ingest",
        info: dict[str, Any] | None = None,
        raws: list[str | None] | None = None,
    ) -> Sweep:
        """Store a whole batch of already-validated rows as one complete sweep, atomically.

        Either every row is stored and visible, or (on any failure) none is.
        """
        if not rows:
            raise InvalidInput("nothing to store: no measurement rows")
        dev = self.get_device(device)
        refuse_measurements(dev.name, dev.metadata)
        now = utcnow()
        with self.connect() as conn:
            cur = conn.execute(
                "INSERT INTO sweeps (device_id, source, plan, n_planned, status, info, created_at)"
                " VALUES (?, ?, '{}', ?, 'running', ?, ?)",
                (dev.id, source, len(rows), json.dumps(info or {}, sort_keys=True), now),
            )
            sweep_id = cur.lastrowid
            raw_list = raws or [None] * len(rows)
            conn.executemany(
                "INSERT INTO points (sweep_id, seq, repeat, data, raw, created_at)"
                " VALUES (?, ?, 0, ?, ?, ?)",
                [
                    (
                        sweep_id,
                        i,
                        json.dumps(row, sort_keys=True),
                        None if raw is None else zlib.compress(raw.encode(), 6),
                        now,
                    )
                    for i, (row, raw) in enumerate(zip(rows, raw_list, strict=True))
                ],
            )
        assert sweep_id is not None
        return self.finish_sweep(sweep_id)

    def add_sweep_file(
        self,
        device: str,
        parquet: Path,
        n_rows: int,
        *,
        source: str = "ingest",
        info: dict[str, Any] | None = None,
        points: list[tuple[int, dict[str, Any], str]] | None = None,
    ) -> Sweep:
        """Store a validated Parquet file of ``n_rows`` rows as one complete sweep, atomically.

        The file is moved into the measurements folder inside the transaction that records
        the sweep, so either both exist or neither.  ``points`` are ``(seq, row, raw fio
        JSON)`` kept for provenance (fio results only; CSV rows live in the Parquet alone).
        """
        if n_rows <= 0:
            raise InvalidInput("nothing to store: no measurement rows")
        dev = self.get_device(device)
        refuse_measurements(dev.name, dev.metadata)
        now = utcnow()
        full_info = {**(info or {}), "n_rows": n_rows}
        with self.connect() as conn:
            cur = conn.execute(
                "INSERT INTO sweeps (device_id, source, plan, n_planned, status, info, created_at,"
                " finished_at) VALUES (?, ?, '{}', ?, 'complete', ?, ?, ?)",
                (dev.id, source, n_rows, json.dumps(full_info, sort_keys=True), now, now),
            )
            sweep_id = cur.lastrowid
            conn.executemany(
                "INSERT INTO points (sweep_id, seq, repeat, data, raw, created_at) VALUES (?, ?, 0, ?, ?, ?)",
                [
                    (sweep_id, seq, json.dumps(row, sort_keys=True), zlib.compress(raw.encode(), 6), now)
                    for seq, row, raw in points or []
                ],
            )
            relative = f"{device}/sweep-{sweep_id}.parquet"
            conn.execute("UPDATE sweeps SET parquet = ? WHERE id = ?", (relative, sweep_id))
            final = self.measurements_dir / relative
            final.parent.mkdir(parents=True, exist_ok=True)
            Path(parquet).replace(final)
        assert sweep_id is not None
        sweep = self.get_sweep(sweep_id)
        # the records a catalog rebuild needs (class, metadata, provenance), beside the file
        record = sweep_record(sweep, dev, info=full_info, finished_at=now)
        atomic_write_bytes(sidecar_path(final), sidecar_bytes(record))
        return sweep

    def measurements(self, device: str) -> pd.DataFrame:
        """Every measured row of a device's complete sweeps, with a ``sweep_id`` column."""
        return read_measurement_files(self.measurements_dir, self.measurement_files([device])[device])

    def measurement_files(self, devices: Sequence[str]) -> dict[str, list[tuple[int, str]]]:
        """Each device's ``(sweep id, Parquet file)`` pairs (relative to the measurements folder),
        complete sweeps only.

        One query for any number of devices: a fleet's client lists them for its workers,
        which then read files only and never open the catalog.  Raises ``UnknownDevice``.
        """
        wanted = list(dict.fromkeys(devices))
        names = json.dumps(wanted)  # the devices asked only: a fleet asking one device at a time stays linear
        files: dict[str, list[tuple[int, str]]] = {}
        with self.connect() as conn:
            for row in conn.execute("SELECT name FROM devices WHERE name IN (SELECT value FROM json_each(?))",
                                    (names,)):
                files[row["name"]] = []
            for row in conn.execute(
                "SELECT d.name, s.id, s.parquet FROM sweeps s JOIN devices d ON d.id = s.device_id"
                " WHERE d.name IN (SELECT value FROM json_each(?))"
                " AND s.status = 'complete' AND s.parquet IS NOT NULL ORDER BY s.id", (names,)
            ):
                files[row["name"]].append((int(row["id"]), str(row["parquet"])))
        missing = [d for d in wanted if d not in files]
        if missing:
            raise UnknownDevice(missing[0])
        return {d: files[d] for d in wanted}

    def device_name(self, device_id: int) -> str:
        """The name of the device with catalog id ``device_id``."""
        with self.connect() as conn:
            row = conn.execute("SELECT name FROM devices WHERE id = ?", (device_id,)).fetchone()
        return str(row["name"])


def _with_sweep_id(frame: pd.DataFrame, sweep_id: int) -> pd.DataFrame:
    # Imported Parquet files are written before their sweep has an id.
    if "sweep_id" not in frame.columns:
        frame.insert(0, "sweep_id", sweep_id)
    return frame
