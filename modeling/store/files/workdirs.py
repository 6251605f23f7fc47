"""Temporary working folders that a crashed owner leaves behind, and their removal.

An import stages its rows in ``measurements/.staging-*`` and a trace replay writes its
iologs and fio's latency logs in ``/tmp/ssdpredict-replay-*``.  Both remove their
folder when they end, but ``kill -9`` (or a power cut) runs no cleanup, so each folder
holds an ``.owner`` file on which its owner keeps an exclusive ``flock``.  The kernel
drops that lock when the owner dies, however it dies, so the next start of the same
kind removes exactly the folders whose lock it can take: never a live owner's, whether
that owner is another process or another thread of this one (a ``flock`` belongs to an
open file, not to a process), and immune to PID reuse, unlike a PID written in a name.
A folder without an ``.owner`` file is either being created this instant or was made by
an older version without one, whose owner may still be running (a replay may run for an
hour); its owner cannot be known, so it is removed only once it is older than
:data:`UNOWNED_GRACE_S`.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

OWNER = ".owner"
UNOWNED_GRACE_S = 86400.0


@contextmanager
def owned_workdir(parent: Path, prefix: str) -> Iterator[Path]:
    """A new folder ``parent/prefix*``, locked as this owner's while in use and removed after."""
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    # locked under another name, then renamed (the lock stays with the file): a cleaner never
    # sees an ``.owner`` that is not locked yet
    fd = os.open(folder / f"{OWNER}-new", os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{os.getpid()}\n".encode())  # for a person looking; the lock is what counts
        os.rename(folder / f"{OWNER}-new", folder / OWNER)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(fd)


def remove_stale_workdirs(parent: Path, prefix: str) -> list[Path]:
    """Remove the ``parent/prefix*`` folders whose owner has died; returns what was removed."""
    removed: list[Path] = []
    try:
        candidates = sorted(parent.glob(f"{prefix}*"))
    except OSError:
        return removed
    for folder in candidates:
        if folder.is_symlink() or not folder.is_dir():
            continue
        if _owner_is_dead(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _owner_is_dead(folder: Path) -> bool:
    try:
        fd = os.open(folder / OWNER, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        try:
            return time.time() - folder.stat().st_mtime > UNOWNED_GRACE_S
        except OSError:
            return False
    except OSError:
        return False  # not ours to judge (another user's, say): leave it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        # closing drops the lock we may have taken; the folder is removed just after, and an
        # owner never re-locks a folder it did not create, so no one can claim it meanwhile
        os.close(fd)
    return True
