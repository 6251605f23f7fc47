"""A reference block device every Linux machine can make: zram, a loop device over tmpfs, or a file.

Trace validation needs a device that repeats: a virtual disk drifts by tens of percent
between runs, so a model cannot be judged on it.  In order of preference:

* ``zram``: a compressed RAM block device (``/sys/class/zram-control/hot_add``, then
  ``disksize``).  4 KiB logical sectors, so direct I/O must be 4 KiB aligned.  It
  completes I/O on the submitting CPU: it measures the CPU, quietly and repeatably.
* ``loop``: a loop device over a file in a tmpfs (``/dev/shm``), 512-byte sectors, buffered
  (``--direct-io=off``).  Unlike zram it queues after the submitter's issue timestamp: the loop
  driver serves one cgroup's requests from a single worker, one after the other, each a copy
  from tmpfs, so its latency rises gradually with the offered load (one server, a near-constant
  service time; bench/capacity_curve.py --kind loop, 2026-11-29: 64 KiB reads mean 57-64 us at
  0.3 of the capacity, 236-397 us at 0.9), where zram is flat until saturation.
* ``file``: a scratch file under ``/var/tmp``, the fallback where neither can be made
  (no root, no zram module, no loop devices); it goes through the page cache's disk and
  is as noisy as that disk, which :attr:`Reference.note` says.
* ``throttled`` (asked for by name, with ``iops``): zram under the kernel's block throttle,
  which behaves like a cloud volume with provisioned IOPS (a token bucket,
  :mod:`collectors.devices.throttle`); the throttle is recorded in the reference's
  ``throttle`` and every fio ssdpredict runs on the device joins its cgroup.

Every device made here is recorded in ``DATADIR/reference.json``; :func:`destroy_reference`
removes only devices recorded there, so it never touches a device someone else made.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from collectors.devices.throttle import MAX_IOPS, create_throttle, remove_throttle
from modeling.errors import InvalidInput, NotFound
from modeling.store import DataDir
from modeling.workload import MIB

KINDS = ("auto", "zram", "loop", "file", "throttled")
PREFIX = "ssdpredict-reference-"
SYS = Path("/sys")


@dataclass(frozen=True)
class Reference:
    """A reference device made by :func:`create_reference`."""

    kind: str
    path: str
    size: int
    logical_block_size: int
    backing: str | None = None  # the tmpfs file behind a loop device
    note: str = ""
    # a throttled reference's cap: version, cgroup, device (MAJ:MIN), iops (per direction)
    throttle: dict[str, Any] | None = None


def _registry(datadir: DataDir) -> Path:
    return datadir.root / "reference.json"


def _load(datadir: DataDir) -> list[Reference]:
    path = _registry(datadir)
    if not path.exists():
        return []
    return [Reference(**r) for r in json.loads(path.read_text())]


def _save(datadir: DataDir, refs: list[Reference]) -> None:
    tmp = _registry(datadir).with_suffix(".tmp")
    tmp.write_text(json.dumps([asdict(r) for r in refs], indent=1))
    tmp.replace(_registry(datadir))


def logical_block_size(path: str | Path) -> int:
    """The logical block size of a block device (512 for files and unknown devices)."""
    p = Path(path)
    if not p.exists() or not p.resolve().is_block_device():
        return 512
    name = p.resolve().name
    try:
        return int((SYS / "block" / name / "queue" / "logical_block_size").read_text())
    except (OSError, ValueError):
        return 512


def _make_zram(size: int) -> Reference:
    control = SYS / "class" / "zram-control" / "hot_add"
    if not control.exists():
        raise OSError("no zram module (/sys/class/zram-control missing)")
    index = int(control.read_text().strip())
    try:
        (SYS / "block" / f"zram{index}" / "disksize").write_text(str(size))
    except OSError:
        (SYS / "class" / "zram-control" / "hot_remove").write_text(str(index))
        raise
    path = f"/dev/zram{index}"
    _fill(path, size)
    return Reference("zram", path, size, logical_block_size(path), note="zram: RAM, 4 KiB sectors, CPU-bound")


def _fill(path: str | Path, size: int) -> None:
    """Write incompressible data over the whole span: reads of never-written zram pages or file
    holes return zeros without touching the device, which would measure nothing."""
    block = os.urandom(MIB)
    with open(path, "r+b" if Path(path).exists() else "wb") as fh:
        for _ in range(size // MIB):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())


def _make_loop(size: int) -> Reference:
    backing = Path("/dev/shm") / f"{PREFIX}{os.getpid()}-{os.urandom(3).hex()}.img"
    _fill(backing, size)
    try:
        out = subprocess.run(
            ["losetup", "--find", "--show", "--direct-io=off", str(backing)],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        backing.unlink(missing_ok=True)
        raise OSError(f"losetup failed: {exc}") from exc
    path = out.stdout.strip()
    return Reference("loop", path, size, logical_block_size(path), str(backing), "loop device over tmpfs")


def _make_file(size: int, why: str) -> Reference:
    path = Path("/var/tmp") / f"{PREFIX}{os.getpid()}-{os.urandom(3).hex()}.img"
    _fill(path, size)
    note = f"scratch file on this machine's disk, as noisy as the disk ({why})"
    return Reference("file", str(path), size, 512, note=note)


def create_reference(datadir: DataDir, kind: str = "auto", size: int = 256 * MIB,
                     iops: int | None = None) -> Reference:
    """Make a reference device (``auto``: zram, else loop over tmpfs, else a scratch file).

    ``throttled`` needs ``iops``: a zram device capped at that many reads and writes per second.
    """
    if kind not in KINDS:
        raise InvalidInput(f"unknown reference kind {kind!r}; use one of {', '.join(KINDS)}")
    if not 16 * MIB <= size <= 64 * 1024 * MIB or size % MIB:
        raise InvalidInput("reference size must be a whole number of MiB between 16 MiB and 64 GiB")
    if (kind == "throttled") != (iops is not None):
        raise InvalidInput("--iops goes with --kind throttled, and --kind throttled needs --iops")
    if kind == "throttled":
        made = _make_throttled(size, int(iops or 0))
        _save(datadir, [*_load(datadir), made])
        return made
    failures: list[str] = []
    ref: Reference | None = None
    for k in ("zram", "loop") if kind == "auto" else (kind,):
        try:
            ref = {"zram": _make_zram, "loop": _make_loop}[k](size) if k != "file" else _make_file(size, kind)
            break
        except OSError as exc:
            failures.append(f"{k}: {exc}")
    if ref is None:
        if kind != "auto":
            raise InvalidInput(f"cannot make a {kind} reference device: {'; '.join(failures)}")
        ref = _make_file(size, "; ".join(failures))
    _save(datadir, [*_load(datadir), ref])
    return ref


def _make_throttled(size: int, iops: int) -> Reference:
    if not 1 <= iops <= MAX_IOPS:  # before zram exists: create_throttle's own check comes after
        raise InvalidInput(f"--iops must be between 1 and {MAX_IOPS}")
    try:
        zram = _make_zram(size)
    except OSError as exc:
        raise InvalidInput(f"cannot make a throttled reference device: zram: {exc}") from None
    try:
        throttle = create_throttle(zram.path, iops)
    except OSError as exc:
        _remove_zram(zram.path)
        raise InvalidInput(f"cannot make a throttled reference device: {exc}") from None
    note = (f"zram under the block throttle: {iops} reads/s and {iops} writes/s, a token bucket "
            "(a cloud volume's provisioned IOPS)")
    return Reference("throttled", zram.path, size, zram.logical_block_size, note=note, throttle=throttle)


def _remove_zram(path: str) -> None:
    name = Path(path).name
    (SYS / "block" / name / "reset").write_text("1")
    (SYS / "class" / "zram-control" / "hot_remove").write_text(name.removeprefix("zram"))


def list_references(datadir: DataDir) -> list[Reference]:
    """The reference devices made here and not yet destroyed."""
    return _load(datadir)


def destroy_reference(datadir: DataDir, path: str) -> Reference:
    """Remove a reference device made by :func:`create_reference` (only those)."""
    refs = _load(datadir)
    match = [r for r in refs if r.path == path]
    if not match:
        raise NotFound(
            f"{path} is not a reference device made by ssdpredict (see `ssdpredict reference list`)"
        )
    ref = match[0]
    if ref.throttle:
        remove_throttle(ref.throttle)  # first: the rules name the device's numbers
    if ref.kind in ("zram", "throttled"):
        _remove_zram(ref.path)
    elif ref.kind == "loop":
        subprocess.run(["losetup", "--detach", ref.path], capture_output=True, timeout=30, check=False)
        if ref.backing:
            Path(ref.backing).unlink(missing_ok=True)
    else:
        Path(ref.path).unlink(missing_ok=True)
    _save(datadir, [r for r in refs if r.path != path])
    return ref
