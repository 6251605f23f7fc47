"""One writer per device at a time: sweep, ingest, train and delete, across processes.

Each device has a lock file ``<home>/locks/<device>.lock`` held with an exclusive
``flock`` for the whole operation.  ``flock`` locks belong to an open file description,
so they exclude other processes (CLI commands, API worker processes) and other threads
of one process alike, and the kernel drops them when the holder dies, even by
``kill -9``: a crashed writer never leaves a device locked.  The holder writes who it is
(operation, PID, start time) into the file, so a refused writer can say who is busy.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import resource
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from modeling.errors import DeviceBusy, InvalidInput
from modeling.store.files.readonly import WRITE_ERRNOS, refused_by
from modeling.store.records import utcnow

OPERATIONS = ("sweep", "ingest", "train", "delete", "rebuild")


def lock_path(root: Path, device: str) -> Path:
    """The lock file of ``device`` (a name already validated) under the data directory ``root``."""
    return Path(root) / "locks" / f"{device}.lock"


def job_lock_path(root: Path, job_id: str) -> Path:
    """The lock file a job over many devices holds while it runs (its devices' locks come and go)."""
    return Path(root) / "locks" / "jobs" / f"{job_id}.lock"


class DeviceLock:
    """An exclusive, process-wide lock on one device (a context manager).

    ``wait=False`` raises ``DeviceBusy`` at once when another writer holds the device;
    ``wait=True`` blocks until it is free, calling ``on_wait(message)`` first.
    """

    def __init__(self, root: Path, device: str, operation: str, *, wait: bool = False,
                 on_wait: Callable[[str], None] | None = None, detail: str | None = None,
                 path: Path | None = None) -> None:
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}")
        self.path = path or lock_path(root, device)
        self.device = device
        self.operation = operation
        self.wait = wait
        self.on_wait = on_wait
        self.detail = detail
        self._fd: int | None = None

    def acquire(self) -> DeviceLock:
        """Take the lock (see the class); returns ``self``."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            root = next((p.parent for p in self.path.parents if p.name == "locks"), self.path.parent)
            raise refused_by(root, exc, f"{self.operation} of {self.device}") or exc from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                busy = self._busy(fd)
                if not self.wait:
                    raise busy from None
                if self.on_wait is not None:
                    self.on_wait(f"{busy.message}; waiting")
                fcntl.flock(fd, fcntl.LOCK_EX)
            holder = json.dumps({"operation": self.operation, "pid": os.getpid(), "since": utcnow(),
                                 "detail": self.detail}).encode()
            # Overwrite in place, then cut what is left of a longer previous holder: emptying
            # the file first frees and reallocates its block, a journalled change that took
            # milliseconds per lock on a busy disk (a fleet takes thousands of locks).
            os.pwrite(fd, holder, 0)
            os.ftruncate(fd, len(holder))
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        """Give the lock up (closing the file releases the ``flock``)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._fd is not None

    def _busy(self, fd: int) -> DeviceBusy:
        holder = _read_holder(fd)
        if holder is None:
            return DeviceBusy(f"device {self.device!r} is busy: another writer holds it",
                              details={"device": self.device})
        what = holder.get("operation", "a writer")
        return DeviceBusy(
            f"device {self.device!r} is busy: {what} by PID {holder.get('pid')} since "
            f"{holder.get('since')}; try again when it is done (or pass --wait)",
            details={"device": self.device, **holder},
        )

    def __enter__(self) -> DeviceLock:
        return self if self.held else self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


class DeviceLockSet:
    """The writer locks of many devices, taken together and given back one by one (a context manager).

    What a fleet training holds: each device stays locked from before its data is listed
    until its new version is registered, then is released while the others go on.
    ``skip_busy=True`` leaves a busy device out (it is in :attr:`busy`, with the holder);
    otherwise the first busy device releases all those taken and raises ``DeviceBusy``.
    ``wait=True`` waits for each busy device instead.
    """

    def __init__(self, root: Path, devices: Sequence[str], operation: str, *, wait: bool = False,
                 skip_busy: bool = False, on_wait: Callable[[str], None] | None = None,
                 detail: str | None = None) -> None:
        self.locks = [DeviceLock(root, d, operation, wait=wait, on_wait=on_wait, detail=detail)
                      for d in dict.fromkeys(devices)]
        self.skip_busy = skip_busy
        self.held: dict[str, DeviceLock] = {}
        self.busy: dict[str, DeviceBusy] = {}
        self._taken = False

    def acquire(self) -> DeviceLockSet:
        """Take every lock (see the class), once; returns ``self``."""
        if self._taken:
            return self
        self._taken = True
        _allow_open_files(len(self.locks))
        try:
            for lock in self.locks:
                try:
                    self.held[lock.device] = lock.acquire()
                except DeviceBusy as exc:
                    if not self.skip_busy:
                        raise
                    self.busy[lock.device] = exc
        except BaseException:
            self.release_all()
            raise
        return self

    def release(self, device: str) -> None:
        """Give one device's lock back (nothing if it is not held)."""
        lock = self.held.pop(device, None)
        if lock is not None:
            lock.release()

    def release_all(self) -> None:
        """Give every lock still held back."""
        for device in list(self.held):
            self.release(device)

    def __enter__(self) -> DeviceLockSet:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release_all()


_SPARE_FILES = 256  # what the process needs besides the lock files (catalog, sockets, models)


def _allow_open_files(locks: int) -> None:
    """Make room for ``locks`` more open files: each held lock is an open file descriptor.

    The soft limit is often 1,024 while the hard one is far higher; a fleet of thousands of
    devices raises the soft limit, or says in one line why it cannot.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = locks + _SPARE_FILES
    if soft == resource.RLIM_INFINITY or need <= soft:
        return
    if hard != resource.RLIM_INFINITY and need > hard:
        raise InvalidInput(
            f"locking {locks} devices at once needs {need} open files, more than this process may"
            f" open ({hard}); raise `ulimit -n` or name fewer devices"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def _read_holder(fd: int) -> dict[str, Any] | None:
    try:
        holder = json.loads(os.pread(fd, 4096, 0) or b"null")
    except ValueError:
        return None
    return holder if isinstance(holder, dict) else None


def lock_holder(root: Path, device: str) -> dict[str, Any] | None:
    """Who holds ``device``'s lock now (operation, pid, since, detail), or None if nobody."""
    return _holder_of(lock_path(root, device))


def job_lock(root: Path, job_id: str, operation: str) -> DeviceLock:
    """The lock (not yet taken) that says a job over many devices is running, whoever reads it."""
    return DeviceLock(root, job_id, operation, path=job_lock_path(root, job_id), detail=job_id)


class TargetLock(DeviceLock):
    """The lock of one sweep target (a resolved path): two device names on one file or block
    device would measure each other's I/O, so the second is refused like a busy device."""

    def __init__(self, root: Path, target: str, operation: str, *, device: str,
                 wait: bool = False, on_wait: Callable[[str], None] | None = None) -> None:
        digest = hashlib.sha256(target.encode()).hexdigest()[:32]
        super().__init__(root, device, operation, wait=wait, on_wait=on_wait, detail=device,
                         path=Path(root) / "locks" / "targets" / f"{digest}.lock")
        self.target = target

    def _busy(self, fd: int) -> DeviceBusy:
        holder = _read_holder(fd) or {}
        who = f"device {holder['detail']!r}" if holder.get("detail") else "another device"
        return DeviceBusy(
            f"target {self.target} is busy: {who} is using it ({holder.get('operation', 'a writer')} by "
            f"PID {holder.get('pid')} since {holder.get('since')}); two devices on one target would "
            "measure each other's I/O",
            details={"device": self.device, "target": self.target, **holder},
        )


def job_running(root: Path, job_id: str) -> bool:
    """Whether some process holds the job's lock (:func:`job_lock`) now."""
    return _holder_of(job_lock_path(root, job_id)) is not None


def _holder_of(path: Path) -> dict[str, Any] | None:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in WRITE_ERRNOS:
            return None  # a lock file nobody may write: no writer of this data directory holds it
        raise
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd) or {}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
