"""An uploaded trace as a temporary file, checked for size and emptiness (the API's routes)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from modeling.errors import NoData, TooLarge
from modeling.store import DataDir


@contextmanager
def uploaded_trace(datadir: DataDir, device: str, data: bytes, max_bytes: int | None) -> Iterator[Path]:
    """Yield the path of ``data`` written to the scratch folder; refuse it if too big or empty."""
    if max_bytes is not None and len(data) > max_bytes:
        raise TooLarge(f"trace upload of {len(data)} bytes exceeds the limit of {max_bytes} bytes")
    if not data:
        raise NoData("the uploaded trace is empty")
    datadir.catalog.get_device(device)
    scratch = datadir.scratch_dir
    scratch.mkdir(parents=True, exist_ok=True)
    # A blktrace per-CPU name would make the parser look for sibling files: use a plain name.
    with tempfile.NamedTemporaryFile(dir=scratch, prefix="upload-", suffix=".trace") as tmp:
        tmp.write(data)
        tmp.flush()
        yield Path(tmp.name)
