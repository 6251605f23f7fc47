"""Refuse to write to a target that may hold someone's data.

A sweep writes to its target.  A regular file is written only when the sweep creates it,
when it is empty, or when it is the product's own scratch file (the caller says which
files those are, see :mod:`modeling.store.files.scratch`); any other existing file is
refused.  A scratch file is created or grown only when it fits in the free space of its
filesystem (with a reserve), and a failed creation leaves nothing behind.  On a block
device a sweep destroys whatever is there, so a block device is refused when it is
mounted, used as swap, held by another device (md, LVM, dm-crypt), has partitions, or
carries a filesystem / partition-table / RAID signature.  Both refusals are lifted by
``destroy_data=True`` (``--destroy-data``).  Signatures are found with
``blkid -p`` (low-level probe, not the cache) and, independently, by reading the magic
bytes of the common formats, so a missing ``blkid`` does not weaken the check.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from modeling.errors import InvalidInput, NoSpace, UnsafeTarget

CHUNK = 1024 * 1024
MIB = 1024 * 1024
GIB = 1024 * MIB
# Free space a scratch file must leave on its filesystem: a full root filesystem breaks
# the machine (logs, package manager, the catalog itself).
RESERVE_BYTES = GIB
RESERVE_FRACTION = 0.05

# (offset, magic bytes, what it is)
MAGICS: tuple[tuple[int, bytes, str], ...] = (
    (1080, b"\x53\xef", "ext2/3/4 filesystem"),
    (0, b"XFSB", "XFS filesystem"),
    (65600, b"_BHRfS_M", "btrfs filesystem"),
    (512, b"EFI PART", "GPT partition table"),
    (4096, b"EFI PART", "GPT partition table (4K sectors)"),
    (512, b"LABELONE", "LVM physical volume"),
    (4086, b"SWAPSPACE2", "swap space"),
    (4096, b"\xfc\x4e\x2b\xa9", "Linux md RAID member"),
    (3, b"NTFS    ", "NTFS filesystem"),
    (82, b"FAT32   ", "FAT32 filesystem"),
    (54, b"FAT", "FAT filesystem"),
    (32769, b"CD001", "ISO 9660 filesystem"),
    (0, b"LUKS\xba\xbe", "LUKS encrypted volume"),
    (1024, b"\x10\x20\xf5\xf2", "F2FS filesystem"),
)


@dataclass(frozen=True)
class TargetInfo:
    """What a sweep target is: a regular file or a block device, and its size."""

    path: str
    kind: str  # "file" or "block"
    size: int
    details: dict[str, str] = field(default_factory=dict)


Runner = Callable[..., subprocess.CompletedProcess[str]]
Owned = Callable[[Path, os.stat_result], bool]


def _never(path: Path, st: os.stat_result) -> bool:
    return False


def _refuse(path: str, reasons: list[str]) -> UnsafeTarget:
    return UnsafeTarget(
        f"refusing to write to {path}: it {'; it '.join(reasons)}. A sweep overwrites its target; "
        "if its data may be destroyed, run again with --destroy-data",
        details={"target": path, "reasons": reasons},
    )


def check_target(path: str | Path, destroy_data: bool = False, *, owned: Owned = _never,
                 sys_root: Path = Path("/sys"), proc_root: Path = Path("/proc"),
                 run: Runner = subprocess.run) -> TargetInfo:
    """Check that a sweep may write to ``path``; raise ``UnsafeTarget`` saying why not.

    ``owned(path, stat)`` says whether an existing regular file is the product's own
    scratch file.
    """
    text = str(path)
    if not text or "\n" in text:
        raise InvalidInput("the target must be a path")
    try:
        return _check(text, destroy_data, owned, sys_root, proc_root, run)
    except PermissionError as exc:
        raise UnsafeTarget(
            f"cannot open {text}: permission denied; a sweep needs read and write access to its "
            "target (run as a user who may write it)",
            details={"target": text, "reasons": [f"permission denied: {exc.strerror}"]},
        ) from None
    except OSError as exc:
        raise InvalidInput(f"cannot use target {text}: {exc.strerror or exc}") from None


# What fio takes in a job file's filename (its ':' separates files; ',', quotes and spaces
# are refused by the job whitelist): checked before any file is made, not after.
_FIO_PATH = re.compile(r"/[A-Za-z0-9._/+@-]{0,4095}")


def _fio_can_take(text: str, real: Path) -> None:
    """Refuse a target whose resolved path (what fio is given) fio's filename cannot hold."""
    if not _FIO_PATH.fullmatch(str(real)):
        odd = sorted({ch for ch in str(real) if not (ch.isascii() and (ch.isalnum() or ch in "._/+@-"))})
        which = "this path" if str(real) == os.path.abspath(text) else f"its resolved path {real}"
        raise InvalidInput(
            f"target {text}: fio cannot take {which} (it holds {' '.join(repr(c) for c in odd)}); "
            "use a path of letters, digits and . _ / + @ -"
        )


def _check(text: str, destroy_data: bool, owned: Owned, sys_root: Path, proc_root: Path,
           run: Runner) -> TargetInfo:
    real = Path(os.path.realpath(text))
    _fio_can_take(text, real)
    if not real.exists():
        if real.parts[:2] == ("/", "dev"):
            # a mistyped device name must not become a regular file in /dev (RAM)
            raise InvalidInput(f"target {text} does not exist")
        if Path(text).is_symlink():
            # following it would create a file wherever it points (root, in a shared /tmp)
            raise UnsafeTarget(f"refusing to write to {text}: it is a symlink to {os.readlink(text)}, "
                               "which does not exist; name the file itself",
                               details={"target": text, "reasons": ["dangling symlink"]})
        if not real.parent.is_dir():
            raise InvalidInput(f"target {text}: folder {real.parent} does not exist; create it first "
                               "(a sweep makes its scratch file, not folders)")
        return TargetInfo(str(real), "file", 0, {"exists": "no"})
    st = real.stat()
    if stat.S_ISREG(st.st_mode):
        if st.st_size == 0 or owned(real, st):
            return TargetInfo(str(real), "file", st.st_size)
        if not destroy_data:
            raise _refuse(text, [f"is an existing file of {st.st_size} bytes that ssdpredict did not "
                                 "create as its scratch file"])
        return TargetInfo(str(real), "file", st.st_size, {"warnings": "overwriting an existing file"})
    if not stat.S_ISBLK(st.st_mode):
        raise InvalidInput(f"target {text} is neither a regular file nor a block device")
    with open(real, "rb+"):  # fail now, as a domain error, when we may not write it
        pass
    reasons = block_device_problems(real, sys_root=sys_root, proc_root=proc_root, run=run)
    if reasons and not destroy_data:
        raise _refuse(text, reasons)
    return TargetInfo(str(real), "block", _block_size(real), {"warnings": "; ".join(reasons)})


def block_device_problems(dev: Path, *, sys_root: Path = Path("/sys"), proc_root: Path = Path("/proc"),
                          run: Runner = subprocess.run) -> list[str]:
    """Every reason why writing to the block device ``dev`` could destroy data."""
    reasons: list[str] = []
    rdev = dev.stat().st_rdev
    major, minor = os.major(rdev), os.minor(rdev)
    sysdir = sys_root / "dev" / "block" / f"{major}:{minor}"
    mounts = _mounted_at(dev, f"{major}:{minor}", proc_root)
    if mounts:
        reasons.append(f"is mounted at {', '.join(sorted(mounts))}")
    if _in_swaps(dev, proc_root):
        reasons.append("is in use as swap")
    if sysdir.exists():
        name = sysdir.resolve().name
        parts = sorted(p.name for p in sysdir.resolve().iterdir()
                       if p.name.startswith(name) and (p / "partition").exists())
        if parts:
            reasons.append(f"has partitions ({', '.join(parts)})")
        holders = sysdir / "holders"
        if holders.is_dir() and any(holders.iterdir()):
            reasons.append(f"is in use by {', '.join(sorted(h.name for h in holders.iterdir()))}")
    reasons += signatures(dev, run=run)
    return reasons


def signatures(dev: Path, *, run: Runner = subprocess.run) -> list[str]:
    """Filesystem, partition-table and RAID signatures found on ``dev`` (blkid and magic bytes)."""
    found: list[str] = []
    blkid = shutil.which("blkid")
    if blkid:
        proc = run([blkid, "-p", "-o", "export", str(dev)], capture_output=True, text=True, timeout=30)
        if proc.returncode == 0:
            fields = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
            for key in ("TYPE", "PTTYPE"):
                if fields.get(key):
                    found.append(f"carries a {fields[key]} signature (blkid {key})")
        elif proc.returncode != 2:  # 2 means "nothing found"; anything else: be careful
            found.append(f"could not be probed by blkid (exit {proc.returncode})")
    if not found:  # blkid missing or blind to it: the magic bytes still speak
        found += [f"carries a {what} signature (magic bytes)" for what in magic_signatures(dev)]
    return found


def magic_signatures(path: Path) -> list[str]:
    """Known magic bytes at their offsets in the first 64 KiB of ``path``."""
    with open(path, "rb") as fh:
        head = fh.read(70 * 1024)
    found = [what for offset, magic, what in MAGICS if head[offset:offset + len(magic)] == magic]
    if len(head) >= 512 and head[510:512] == b"\x55\xaa" and any(head[446:510]):
        found.append("MBR partition table")
    return list(dict.fromkeys(found))


def _mounted_at(dev: Path, majmin: str, proc_root: Path) -> set[str]:
    points: set[str] = set()
    mountinfo = proc_root / "self" / "mountinfo"
    if mountinfo.exists():
        for line in mountinfo.read_text().splitlines():
            fields = line.split()
            if len(fields) > 4 and fields[2] == majmin:
                points.add(fields[4])
    mounts = proc_root / "mounts"
    if mounts.exists():
        for line in mounts.read_text().splitlines():
            fields = line.split()
            if fields and os.path.realpath(fields[0]) == str(dev):
                points.add(fields[1])
    return points


def _in_swaps(dev: Path, proc_root: Path) -> bool:
    swaps = proc_root / "swaps"
    if not swaps.exists():
        return False
    return any(line.split()[0] == str(dev) for line in swaps.read_text().splitlines()[1:] if line.strip())


def _block_size(dev: Path) -> int:
    with open(dev, "rb") as fh:
        return fh.seek(0, os.SEEK_END)


def prepare_file(path: str | Path, size: int, *, created: Callable[[Path], None] | None = None,
                 removed: Callable[[Path], None] | None = None) -> None:
    """Create (or grow) a regular file to ``size`` bytes of real data, if it fits.

    Real data rather than a sparse file: reads of holes return zeros without touching the
    disk, and would measure nothing.  Raises ``NoSpace`` (with the numbers) before writing
    when the growth would not leave the filesystem's reserve free.  On any failure a file
    created here is removed, and a grown one is cut back to its old size.  ``created`` is
    called with the new (still empty) file, so it can be recorded as the product's own;
    ``removed`` when it is removed again.
    """
    target = Path(path)
    current = target.stat().st_size if target.exists() else 0
    if current >= size:
        return
    check_free_space(target.parent, size - current, what=str(target), size=size)
    new = not target.exists()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | (os.O_EXCL if new else 0), 0o644)
    try:
        if new and created is not None:
            created(target)
        block = os.urandom(CHUNK)
        os.lseek(fd, current, os.SEEK_SET)
        remaining = size - current
        while remaining > 0:
            remaining -= os.write(fd, block[:min(CHUNK, remaining)])
        os.fsync(fd)
    except BaseException as exc:
        os.close(fd)
        fd = -1
        if new:
            target.unlink(missing_ok=True)
            if removed is not None:
                removed(target)
        else:
            os.truncate(target, current)
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise NoSpace(f"could not write {target} to {_human(size)}: {exc.strerror}; "
                          f"{'it was removed' if new else 'it was cut back to its old size'}") from None
        raise
    finally:
        if fd >= 0:
            os.close(fd)


def check_free_space(folder: Path, needed: int, *, what: str, size: int) -> None:
    """Raise ``NoSpace`` unless ``needed`` bytes fit in ``folder``'s filesystem beside its reserve."""
    fs = os.statvfs(folder)
    free = fs.f_bavail * fs.f_frsize
    reserve = min(RESERVE_BYTES, int(RESERVE_FRACTION * fs.f_blocks * fs.f_frsize))
    if needed > free - reserve:
        raise NoSpace(
            f"refusing to create {what} at {_human(size)}: it needs {_human(needed)} more and its "
            f"filesystem has {_human(free)} free, of which {_human(reserve)} is kept free; "
            "use a smaller --size or another place",
            details={"target": what, "needed_bytes": needed, "free_bytes": free, "reserve_bytes": reserve},
        )


def _human(n: int) -> str:
    for unit, mult in (("TiB", 1024 * GIB), ("GiB", GIB), ("MiB", MIB)):
        if n >= mult:
            return f"{n / mult:.1f} {unit}"
    return f"{n} bytes"
