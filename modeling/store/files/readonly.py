"""A data directory that cannot be written (a read-only mount, a folder of another user).

Reads still work there: the catalog is opened read-only (``immutable`` when no write-ahead
log is pending, since SQLite cannot create the ``-shm`` file beside it), and every write
is refused with one message naming the folder and why.
"""

from __future__ import annotations

import atexit
import errno
import os
import shutil
import tempfile
import threading
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
    no write-ahead log holds committed pages (none does after the last writer closed).  A
    log that does hold pages needs its ``-shm`` file: when that is missing too (a copy, a
    crash) and cannot be made here, the catalog is read from a private copy of it and its
    log in a temporary folder, where SQLite can make one.
    """
    wal = Path(f"{path}-wal")
    pending = wal.exists() and wal.stat().st_size > 0
    if pending and not Path(f"{path}-shm").exists():
        return f"file:{quote(str(_snapshot(Path(path), wal)))}?mode=ro"
    return f"file:{quote(str(path))}?mode=ro" + ("" if pending else "&immutable=1")


_SNAPSHOTS: dict[tuple[str, int, int, int, int], Path] = {}
_SNAPSHOTS_LOCK = threading.Lock()


def _snapshot(path: Path, wal: Path) -> Path:
    """A copy of the catalog and its write-ahead log in a temporary folder (one per state of
    the two files, removed at exit)."""
    db_stat, wal_stat = path.stat(), wal.stat()
    key = (str(path), db_stat.st_mtime_ns, db_stat.st_size, wal_stat.st_mtime_ns, wal_stat.st_size)
    with _SNAPSHOTS_LOCK:
        copy = _SNAPSHOTS.get(key)
        if copy is None or not copy.exists():
            folder = Path(tempfile.mkdtemp(prefix="ssdpredict-catalog-"))
            atexit.register(shutil.rmtree, folder, True)
            copy = folder / path.name
            shutil.copyfile(wal, folder / wal.name)  # the log first: a writer may check it into the file
            shutil.copyfile(path, copy)
            _SNAPSHOTS[key] = copy
        return copy
