"""A data directory that cannot be written (a read-only mount, a folder of another user).

Reads still work there: the catalog is opened read-only (``immutable`` when no write-ahead
log is pending, since SQLite cannot create the ``-shm`` file beside it), and every write
is refused with one message naming the folder and why.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from urllib.parse import quote

from modeling.errors import ReadOnlyData

WRITE_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def read_only_reason(folder: Path) -> str | None:
    """Why ``folder`` cannot be written ("read-only file system", "permission denied"), or None."""
    if os.access(folder, os.W_OK | os.X_OK):
        return None
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return os.strerror(errno.EROFS).lower()
    except OSError:
        pass
    return os.strerror(errno.EACCES).lower()


def refused(root: Path, reason: str, what: str = "this command") -> ReadOnlyData:
    """The one-line refusal of a write to the data directory ``root``."""
    return ReadOnlyData(
        f"the data directory {root} is not writable ({reason}): {what} needs to write there; "
        "reads (devices, models, predict, report, export, serve) still work",
        details={"data_dir": str(root), "reason": reason},
    )


def refused_by(root: Path, exc: OSError, what: str = "this command") -> ReadOnlyData | None:
    """The refusal for ``exc`` when it is a write refused by the filesystem, else None."""
    if exc.errno not in WRITE_ERRNOS:
        return None
    return refused(root, (exc.strerror or os.strerror(exc.errno or 0)).lower(), what)


def read_only_uri(path: Path) -> str:
    """SQLite URI opening ``path`` read-only without creating any file beside it.

    ``immutable`` skips the ``-shm`` file a WAL database needs, which is right only when
    no write-ahead log holds committed pages (none does after the last writer closed).
    """
    wal = Path(f"{path}-wal")
    pending = wal.exists() and wal.stat().st_size > 0
    return f"file:{quote(str(path))}?mode=ro" + ("" if pending else "&immutable=1")
