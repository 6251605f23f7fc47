"""Crash-safe file writes: write a temporary file beside the target, fsync, rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from collections.abc import Callable


def atomic_write(path: Path, writer: Callable[[Path], object]) -> Path:
    """Call ``writer(tmp_path)`` then atomically rename the result onto ``path``.

    A crash at any moment leaves either the old file or the new one, never a partial one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        writer(tmp)
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Atomically replace ``path`` with ``data``."""
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
