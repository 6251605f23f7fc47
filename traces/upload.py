"""An uploaded trace as a temporary file, checked for size and emptiness (the API's routes).

The client named its file; the server's scratch path is none of its business: errors
raised while the upload is open, and answers built from it, name the client's file.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from modeling.errors import NoData, SsdPredictError, TooLarge
from modeling.store import DataDir


@dataclass(frozen=True)
class TraceUpload:
    """An uploaded trace (bytes or a readable binary stream, the client's file name) and how to
    window and predict it.  A stream is copied to scratch in pieces, never held whole."""

    data: bytes | IO[bytes]
    filename: str = ""
    fmt: str = "auto"
    window_s: float | None = 1.0
    window_requests: int | None = None
    method: str = "open-loop"
    max_bytes: int | None = None


def answer_upload(
    datadir: DataDir, device: str, upload: TraceUpload, answer: Callable[[Path], dict[str, Any]]
) -> dict[str, Any]:
    """``answer`` (a JSON-ready dict) of the upload written to scratch, naming the client's file."""
    public = upload.filename or "upload"
    with uploaded_trace(datadir, device, upload.data, upload.max_bytes, public) as path:
        out = scrub_path(answer(path), path, public)
    out["filename"] = upload.filename
    out["summary"]["trace"]["paths"] = [upload.filename]
    return out


COPY_BYTES = 1 << 20


def _copy_capped(src: IO[bytes], dst: IO[bytes], max_bytes: int | None) -> int:
    """Copy ``src`` to ``dst`` a piece at a time; refuse it the moment it passes ``max_bytes``."""
    total = 0
    while piece := src.read(COPY_BYTES):
        total += len(piece)
        if max_bytes is not None and total > max_bytes:
            raise TooLarge(f"trace upload of over {max_bytes} bytes exceeds the limit of {max_bytes} bytes")
        dst.write(piece)
    return total


@contextmanager
def uploaded_trace(
    datadir: DataDir, device: str, data: bytes | IO[bytes], max_bytes: int | None, public: str = "upload"
) -> Iterator[Path]:
    """Yield the path of ``data`` written to the scratch folder; refuse it if too big or empty.

    A domain error raised inside the block has the scratch path replaced by ``public``.
    """
    if isinstance(data, bytes):
        if max_bytes is not None and len(data) > max_bytes:
            raise TooLarge(f"trace upload of {len(data)} bytes exceeds the limit of {max_bytes} bytes")
        data = io.BytesIO(data)
    datadir.catalog.get_device(device)
    scratch = datadir.scratch_dir
    scratch.mkdir(parents=True, exist_ok=True)
    # A blktrace per-CPU name would make the parser look for sibling files: use a plain name.
    with tempfile.NamedTemporaryFile(dir=scratch, prefix="upload-", suffix=".trace") as tmp:
        if not _copy_capped(data, tmp, max_bytes):
            raise NoData("the uploaded trace is empty")
        tmp.flush()
        try:
            yield Path(tmp.name)
        except SsdPredictError as exc:
            exc.message = scrub_path(exc.message, tmp.name, public)
            exc.args = (exc.message,)
            exc.details = scrub_path(exc.details, tmp.name, public)
            raise


def scrub_path(value: Any, secret: str | Path, public: str) -> Any:
    """``value`` with every mention of the path ``secret`` (or its folder) replaced."""
    secret = str(secret)
    if isinstance(value, str):
        return value.replace(secret, public).replace(str(Path(secret).parent), "<scratch>")
    if isinstance(value, dict):
        return {k: scrub_path(v, secret, public) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_path(v, secret, public) for v in value]
    return value
