"""Import measurement files into the catalog as one all-or-nothing sweep.

Every input is validated as it streams in and its rows are written to temporary Parquet
parts beside the measurements (CSV a chunk at a time, so memory stays bounded whatever the
file size).  Only when every file is good are the parts joined into the sweep's one
Parquet file, which the catalog moves into place in the transaction that records the
sweep.  A bad row anywhere removes the parts: the catalog and the measurements folder are
left as they were.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from collectors.devices import validate_device_class
from collectors.ingest.csv_stream import iter_csv_frames
from collectors.ingest.fio_files import parse_fio_input
from collectors.ingest.inputs import InputFile, bytes_input, check_size, collect_inputs, stream_input
from modeling.errors import InvalidInput, UnknownDevice
from modeling.store import DataDir, Sweep
from modeling.store.files.workdirs import owned_workdir, remove_stale_workdirs

MAX_REPORTED_ERRORS = 20


@dataclass
class Staged:
    """Validated rows of one import in temporary Parquet parts, ready to be stored together."""

    folder: Path
    parts: list[Path] = field(default_factory=list)
    n_rows: int = 0
    files: list[dict[str, Any]] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    fio_points: list[tuple[int, dict[str, Any], str]] = field(default_factory=list)

    def fio_versions(self) -> list[str]:
        """The fio versions that wrote the imported fio results."""
        return sorted({str(r["fio_version"]) for _, r, _ in self.fio_points if r.get("fio_version")})

    @property
    def content_sha256(self) -> str:
        """Identity of the imported content, independent of file names and order."""
        return hashlib.sha256("".join(sorted(self.digests)).encode()).hexdigest()

    def write_part(self, frames: Iterator[pd.DataFrame]) -> int:
        """Write frames (one schema) to a new part, numbering rows on from the last; rows written."""
        path = self.folder / f"part-{len(self.parts):05d}.parquet"
        writer: pq.ParquetWriter | None = None
        n = 0
        try:
            for frame in frames:
                frame = frame.assign(seq=range(self.n_rows + n, self.n_rows + n + len(frame)), repeat=0)
                table = pa.Table.from_pandas(frame, preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(path, table.schema)
                writer.write_table(table)
                n += len(frame)
        finally:
            if writer is not None:
                writer.close()
        if writer is not None:
            self.parts.append(path)
        self.n_rows += n
        return n

    def joined(self) -> Path:
        """One Parquet file of every part (the only part itself when there is one)."""
        if len(self.parts) == 1:
            return self.parts[0]
        schemas = [pq.read_schema(p) for p in self.parts]
        schema = pa.unify_schemas(schemas, promote_options="permissive")
        out = self.folder / "joined.parquet"
        with pq.ParquetWriter(out, schema) as writer:
            for path in self.parts:
                part = pq.ParquetFile(path)
                for i in range(part.num_row_groups):
                    table = part.read_row_group(i)
                    for col in schema:
                        if col.name not in table.column_names:
                            table = table.append_column(col.name, pa.nulls(len(table), col.type))
                    writer.write_table(table.select(schema.names).cast(schema))
        return out


STAGING_PREFIX = ".staging-"


@contextmanager
def staging(datadir: DataDir) -> Iterator[Staged]:
    """A staging folder beside the measurements (so the final move is a rename), removed after.

    The folders of imports killed before their cleanup ran are removed first (only those
    whose owner is dead, see :mod:`modeling.store.files.workdirs`).
    """
    remove_stale_workdirs(datadir.measurements_dir, STAGING_PREFIX)
    with owned_workdir(datadir.measurements_dir, STAGING_PREFIX) as folder:
        yield Staged(folder)


def stage_inputs(staged: Staged, inputs: Sequence[InputFile]) -> None:
    """Validate every input into ``staged``; raise one error listing the bad files if any is bad."""
    errors: list[InvalidInput] = []
    fio_rows: list[dict[str, Any]] = []

    def flush_fio() -> None:
        # Consecutive fio results share one part, so a folder of 500 files is not 500 parts.
        if fio_rows:
            staged.write_part(iter([pd.DataFrame.from_records(fio_rows)]))
            fio_rows.clear()

    for item in inputs:
        kind = item.resolved_kind()
        try:
            if kind == "fio":
                parsed = parse_fio_input(item)
                for row, raw in parsed:
                    staged.fio_points.append((staged.n_rows + len(fio_rows), row, raw))
                    fio_rows.append(row)
                n = len(parsed)
            else:
                if item.size == 0:
                    raise InvalidInput(f"{item.name}: empty file (expected a CSV header line)")
                flush_fio()
                frames = iter_csv_frames(item.open, item.name)
                n = staged.write_part(frame.assign(source_file=item.name) for frame in frames)
        except InvalidInput as exc:
            errors.append(exc)
            continue
        staged.files.append({"name": item.name, "format": kind, "points": n})
        staged.digests.append(item.sha256())
    flush_fio()
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more bad files)" if len(errors) > 1 else ""
        raise type(first)(
            f"{first.message}{more}; nothing was stored",
            details=[e.message for e in errors[:MAX_REPORTED_ERRORS]],
        )


def store_staged(
    datadir: DataDir,
    device: str,
    staged: Staged,
    *,
    device_class: str | None = None,
    metadata: dict[str, Any] | None = None,
    info: dict[str, Any] | None = None,
) -> Sweep:
    """Store validated rows as one complete sweep; an identical earlier import is reused."""
    catalog = datadir.catalog
    if device_class is not None:
        validate_device_class(device_class)
    digest = staged.content_sha256
    try:
        existing = catalog.get_device(device)
    except UnknownDevice:
        existing = None
    if existing is not None:
        if device_class is not None and device_class != existing.device_class:
            raise InvalidInput(
                f"device {device!r} is of class {existing.device_class!r}, not {device_class!r}"
            )
        for sweep in catalog.list_sweeps(device):
            if sweep.status == "complete" and sweep.info.get("content_sha256") == digest:
                # Importing the same data twice would weight it double in training.
                return dataclasses.replace(sweep, info={**sweep.info, "already_ingested": True})
    catalog.ensure_device(device, device_class or "ssd", metadata)
    full_info = {
        **(info or {}),
        "files": staged.files,
        "n_files": len(staged.files),
        "content_sha256": digest,
        "fio_versions": staged.fio_versions(),
    }
    return catalog.add_sweep_file(
        device, staged.joined(), staged.n_rows, source="ingest", info=full_info, points=staged.fio_points
    )


def ingest_inputs(
    datadir: DataDir,
    device: str,
    inputs: Sequence[InputFile],
    *,
    device_class: str | None = None,
    metadata: dict[str, Any] | None = None,
    max_bytes: int | None = None,
    info: dict[str, Any] | None = None,
) -> Sweep:
    """Validate and store inputs as one sweep of ``device``: all or nothing."""
    check_size(inputs, max_bytes)
    with staging(datadir) as staged:
        stage_inputs(staged, inputs)
        return store_staged(datadir, device, staged, device_class=device_class, metadata=metadata, info=info)


def ingest_paths(
    datadir: DataDir,
    device: str,
    paths: Sequence[Path | str],
    *,
    device_class: str | None = None,
    metadata: dict[str, Any] | None = None,
    max_bytes: int | None = None,
) -> Sweep:
    """Import fio JSON / CSV files and folders as one sweep of ``device``: all or nothing.

    ``device_class`` is used for a new device (default ``ssd``) and must match an existing
    one.  Re-importing identical content returns the earlier sweep (its ``info`` then has
    ``already_ingested``) instead of storing the points twice.  ``max_bytes`` limits the
    total size of the files, checked before any is read.
    """
    inputs = collect_inputs([Path(p) for p in paths])
    return ingest_inputs(
        datadir, device, inputs, device_class=device_class, metadata=metadata, max_bytes=max_bytes
    )


def ingest_bytes(
    datadir: DataDir,
    device: str,
    filename: str,
    data: bytes | BinaryIO,
    *,
    device_class: str | None = None,
    metadata: dict[str, Any] | None = None,
    max_bytes: int | None = None,
) -> Sweep:
    """Import one uploaded file (CSV or fio JSON, told apart by content): all or nothing.

    ``data``: the bytes, or a seekable stream (read in pieces, never held whole).
    """
    name = _safe_name(filename)
    return ingest_inputs(
        datadir,
        device,
        [bytes_input(data, name) if isinstance(data, bytes) else stream_input(data, name)],
        device_class=device_class,
        metadata=metadata,
        max_bytes=max_bytes,
        info={"upload": name},
    )


def _safe_name(filename: str) -> str:
    # The name is only echoed in messages and rows, never used as a path; keep it printable.
    base = Path(str(filename or "upload").replace("\\", "/")).name
    cleaned = "".join(ch for ch in base if ch.isprintable())[:200]
    return cleaned or "upload"
