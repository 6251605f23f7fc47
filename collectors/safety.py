"""Refuse to write to a target that may hold someone's data.

A sweep writes to its target.  On a regular file that is harmless (the file is ours, or
created at the requested size).  On a block device it destroys whatever is there, so a
block device is refused when it is mounted, used as swap, held by another device (md,
LVM, dm-crypt), has partitions, or carries a filesystem / partition-table / RAID
signature -- unless the caller passes ``destroy_data=True``.  Signatures are found with
``blkid -p`` (low-level probe, not the cache) and, independently, by reading the magic
bytes of the common formats, so a missing ``blkid`` does not weaken the check.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from modeling.errors import InvalidInput, UnsafeTarget

CHUNK = 1024 * 1024

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


def _refuse(path: str, reasons: list[str]) -> UnsafeTarget:
    return UnsafeTarget(
        f"refusing to write to {path}: it {'; it '.join(reasons)}. A sweep overwrites the device; "
        "if its data may be destroyed, run again with --destroy-data",
        details={"target": path, "reasons": reasons},
    )


def check_target(path: str | Path, destroy_data: bool = False, *, sys_root: Path = Path("/sys"),
                 proc_root: Path = Path("/proc"), run: Runner = subprocess.run) -> TargetInfo:
    """Check that a sweep may write to ``path``; raise ``UnsafeTarget`` saying why not."""
    text = str(path)
    if not text or "\n" in text:
        raise InvalidInput("the target must be a path")
    real = Path(os.path.realpath(text))
    if not real.exists():
        if real.parts[:2] == ("/", "dev"):
            # a mistyped device name must not become a regular file in /dev (RAM)
            raise InvalidInput(f"target {text} does not exist")
        return TargetInfo(str(real), "file", 0, {"exists": "no"})
    mode = real.stat().st_mode
    if stat.S_ISREG(mode):
        return TargetInfo(str(real), "file", real.stat().st_size)
    if not stat.S_ISBLK(mode):
        raise InvalidInput(f"target {text} is neither a regular file nor a block device")
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


def prepare_file(path: str | Path, size: int) -> None:
    """Create (or grow) a regular file to ``size`` bytes of real data.

    Real data rather than a sparse file: reads of holes return zeros without touching the
    disk, and would measure nothing.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    current = target.stat().st_size if target.exists() else 0
    if current >= size:
        return
    block = os.urandom(CHUNK)
    with open(target, "ab") as fh:
        remaining = size - current
        while remaining > 0:
            n = min(CHUNK, remaining)
            fh.write(block[:n])
            remaining -= n
        fh.flush()
        os.fsync(fh.fileno())
