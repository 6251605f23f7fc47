"""Import measurement files into the catalog as one all-or-nothing sweep."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.devices import validate_device_class
from collectors.ingest.csv_rows import decode_text, parse_csv_measurements
from collectors.ingest.fio_files import parse_fio_bytes
from modeling.errors import InvalidInput, TooLarge, UnknownDevice
from modeling.store import DataDir, Sweep

SUFFIX_KINDS = {".json": "fio", ".csv": "csv"}
MAX_REPORTED_ERRORS = 20


@dataclass(frozen=True)
class InputFile:
    """One file to import: its path, the name used in messages and rows, and its format."""

    path: Path
    name: str
    kind: str | None  # "fio", "csv", or None: decide from the content


@dataclass
class Batch:
    """Validated rows of one import, ready to be stored together."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    raws: list[str | None] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)

    @property
    def content_sha256(self) -> str:
        """Identity of the imported content, independent of file names and order."""
        return hashlib.sha256("".join(sorted(self.digests)).encode()).hexdigest()


def collect_inputs(paths: Sequence[Path], *, kinds: Sequence[str] = ("fio", "csv")) -> list[InputFile]:
    """Expand folders (recursively, ``*.json``/``*.csv``, no hidden files) into input files."""
    if not paths:
        raise InvalidInput("no input paths given")
    inputs: list[InputFile] = []
    for path in paths:
        if path.is_dir():
            found = []
            # os.walk does not follow symlinked folders, so a link loop cannot recurse forever.
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for fname in sorted(files):
                    kind = SUFFIX_KINDS.get(Path(fname).suffix.lower())
                    if fname.startswith(".") or kind not in kinds:
                        continue
                    full = Path(root) / fname
                    rel = full.relative_to(path.parent) if path.parent != path else full
                    found.append(InputFile(full, rel.as_posix(), kind))
            if not found:
                wanted = " or ".join(f"*{s}" for s, k in SUFFIX_KINDS.items() if k in kinds)
                raise InvalidInput(f"{path}: no {wanted} files in this folder")
            inputs.extend(found)
        elif path.is_file():
            inputs.append(InputFile(path, path.name, SUFFIX_KINDS.get(path.suffix.lower())))
        else:
            raise InvalidInput(f"{path}: no such file or folder")
    return inputs


def sniff_kind(data: bytes) -> str:
    """``"fio"`` when the bytes look like fio JSON output, otherwise ``"csv"``."""
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    # fio may print warning lines before its JSON; its JSON always names "fio version".
    if head.startswith(b"{") or (b"{" in head and b'"fio version"' in head):
        return "fio"
    return "csv"


def parse_input(data: bytes, name: str, kind: str | None) -> list[tuple[dict[str, Any], str | None]]:
    """Validated rows of one file's bytes (with raw fio JSON where there is one)."""
    kind = kind or sniff_kind(data)
    if kind == "fio":
        return [({**row, "source_file": name}, raw) for row, raw in parse_fio_bytes(data, name)]
    if not data.strip():
        raise InvalidInput(f"{name}: empty file (expected a CSV header line)")
    rows = parse_csv_measurements(decode_text(data, name), source=name)
    return [({**row, "source_file": name}, None) for row in rows]


def load_batch(inputs: Sequence[tuple[bytes, str, str | None]]) -> Batch:
    """Validate every input; raise one error listing the bad files if any is bad."""
    batch = Batch()
    errors: list[InvalidInput] = []
    for data, name, kind in inputs:
        try:
            parsed = parse_input(data, name, kind)
        except InvalidInput as exc:
            errors.append(exc)
            continue
        for row, raw in parsed:
            batch.rows.append(row)
            batch.raws.append(raw)
        batch.files.append({"name": name, "format": kind or sniff_kind(data), "points": len(parsed)})
        batch.digests.append(hashlib.sha256(data).hexdigest())
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more bad files)" if len(errors) > 1 else ""
        raise type(first)(
            f"{first.message}{more}; nothing was stored",
            details=[e.message for e in errors[:MAX_REPORTED_ERRORS]],
        )
    return batch


def store_batch(
    datadir: DataDir,
    device: str,
    batch: Batch,
    *,
    device_class: str | None = None,
    metadata: dict[str, Any] | None = None,
    info: dict[str, Any] | None = None,
) -> Sweep:
    """Store a validated batch as one complete sweep; an identical earlier import is reused."""
    catalog = datadir.catalog
    if device_class is not None:
        validate_device_class(device_class)
    digest = batch.content_sha256
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
        "files": batch.files,
        "n_files": len(batch.files),
        "content_sha256": digest,
        "fio_versions": sorted({str(r["fio_version"]) for r in batch.rows if r.get("fio_version")}),
    }
    return catalog.add_measurements(device, batch.rows, source="ingest", info=full_info, raws=batch.raws)


def ingest_paths(
    datadir: DataDir,
    device: str,
    paths: Sequence[Path | str],
    *,
    device_class: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Sweep:
    """Import fio JSON / CSV files and folders as one sweep of ``device``: all or nothing.

    ``device_class`` is used for a new device (default ``ssd``) and must match an existing
    one.  Re-importing identical content returns the earlier sweep (its ``info`` then has
    ``already_ingested``) instead of storing the points twice.
    """
    inputs = collect_inputs([Path(p) for p in paths])
    loaded = [(item.path.read_bytes(), item.name, item.kind) for item in inputs]
    batch = load_batch(loaded)
    return store_batch(datadir, device, batch, device_class=device_class, metadata=metadata)


def ingest_bytes(
    datadir: DataDir,
    device: str,
    filename: str,
    data: bytes,
    *,
    device_class: str | None = None,
    metadata: dict[str, Any] | None = None,
    max_bytes: int | None = None,
) -> Sweep:
    """Import one uploaded file (CSV or fio JSON, told apart by content): all or nothing."""
    name = _safe_name(filename)
    if max_bytes is not None and len(data) > max_bytes:
        raise TooLarge(f"{name}: {len(data)} bytes is over the limit of {max_bytes} bytes")
    batch = load_batch([(data, name, None)])
    return store_batch(
        datadir, device, batch, device_class=device_class, metadata=metadata, info={"upload": name}
    )


def _safe_name(filename: str) -> str:
    # The name is only echoed in messages and rows, never used as a path; keep it printable.
    base = Path(str(filename or "upload").replace("\\", "/")).name
    cleaned = "".join(ch for ch in base if ch.isprintable())[:200]
    return cleaned or "upload"
