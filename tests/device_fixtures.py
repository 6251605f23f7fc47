"""Fixtures for the sweep, safety and CLI tests: loop devices and a real ``fio --server``.

Registered for the whole suite by ``pytest_plugins`` in ``tests/conftest.py`` (a fixture
costs nothing until a test asks for it); the plain helpers (``tiny_plan``, ``sha256_of``,
``mkfs_ext4``, ``write_mbr``, ``reference_or_skip``) are imported by name.
"""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from collectors.devices.reference import Reference, create_reference, destroy_reference
from collectors.plans.presets import Plan
from modeling.errors import InvalidInput
from modeling.store import DataDir
from modeling.workload import Workload

LOOP_SIZE = 32 * 1024 * 1024


def tiny_plan(n: int = 2) -> Plan:
    """A fixed plan of ``n`` cheap points (n <= 4)."""
    points = [
        Workload(write_ratio=0.0, queue_depth=4, request_size="4k", randomness=1.0),
        Workload(write_ratio=1.0, queue_depth=1, request_size="64k", randomness=0.0),
        Workload(write_ratio=0.3, queue_depth=2, request_size="16k", randomness=0.5, numjobs=2),
        Workload(write_ratio=0.5, queue_depth=8, request_size="8k", randomness=1.0,
                 read_size="4k", write_size="16k"),
    ]
    return Plan("tiny", tuple(points[:n]), seed=1)


@contextmanager
def reference_or_skip(
    d: DataDir, kind: str, size: int, *, iops: int | None = None,
    skip_on: tuple[type[Exception], ...] = (InvalidInput,),
) -> Iterator[Reference]:
    """A reference device (``ssdpredict reference create``) for one test, destroyed after it; the
    test is skipped, with the reason, where this machine cannot make one (``skip_on``)."""
    try:
        ref = create_reference(d, kind, size, iops)
    except skip_on as exc:
        pytest.skip(f"no {kind} reference can be made here: {exc}")
    try:
        yield ref
    finally:
        destroy_reference(d, ref.path)


def sha256_of(path: str | Path) -> str:
    """Hash of a file's or block device's whole content."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@pytest.fixture
def make_loop(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Factory: attach an image (prepared by a callback) as a loop device; detached afterwards."""
    if shutil.which("losetup") is None:
        pytest.fail("losetup is missing (util-linux); `make test` installs it")
    attached: list[str] = []
    mounts: list[Path] = []

    def make(prepare: Callable[[Path], None] | None = None, *, partitions: bool = False,
             mount: bool = False) -> str:
        image = tmp_path / f"loop{len(attached)}.img"
        with open(image, "wb") as fh:
            fh.truncate(LOOP_SIZE)
        if prepare:
            prepare(image)
        cmd = ["losetup", "-f", "--show"] + (["-P"] if partitions else []) + [str(image)]
        dev = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()
        attached.append(dev)
        if partitions:
            # some kernels here lack the MBR parser; partx adds the partitions through an ioctl
            subprocess.run(["partx", "-a", dev], capture_output=True)
        if mount:
            point = tmp_path / f"mnt{len(mounts)}"
            point.mkdir()
            subprocess.run(["mount", dev, str(point)], check=True, capture_output=True)
            mounts.append(point)
        return dev

    yield make
    for point in mounts:
        subprocess.run(["umount", str(point)], capture_output=True)
    for dev in attached:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 64 MiB tmpfs."""
    point = tmp_path / "small"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(point)], check=True)
    yield point
    subprocess.run(["umount", str(point)], check=True)


def mkfs_ext4(image: Path) -> None:
    """Put an ext4 filesystem on an image file."""
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)


def write_mbr(image: Path) -> None:
    """Write an MBR partition table with one Linux partition (sectors 2048..end)."""
    sectors = LOOP_SIZE // 512
    entry = bytes([0x00, 0, 0, 0, 0x83, 0, 0, 0]) + (2048).to_bytes(4, "little") + \
        (sectors - 2048).to_bytes(4, "little")
    with open(image, "r+b") as fh:
        fh.seek(446)
        fh.write(entry)
        fh.seek(510)
        fh.write(b"\x55\xaa")


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class FioServer:
    """A running ``fio --server``: its ``host:port`` and its process (to kill it mid-test)."""

    remote: str
    process: subprocess.Popen[bytes]


@contextmanager
def serve_fio(fio: str, cwd: Path) -> Iterator[FioServer]:
    """A real ``fio --server`` on 127.0.0.1, listening when entered; stopped on exit."""
    port = free_port()
    proc = subprocess.Popen([fio, f"--server=127.0.0.1,{port}"], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"fio --server did not start listening on port {port}")
                time.sleep(0.05)
        yield FioServer(f"127.0.0.1:{port}", proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def fio_server(fio_available: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``fio --server`` on 127.0.0.1 (a remote host, or a CSD's in-drive fio); yields ``host:port``."""
    with serve_fio(fio_available, tmp_path_factory.mktemp("fio-server")) as server:
        yield server.remote


@pytest.fixture(scope="module")
def fio_servers(fio_available: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Two real ``fio --server`` instances on 127.0.0.1 (two hosts of a fleet); yields both ``host:port``."""
    with serve_fio(fio_available, tmp_path_factory.mktemp("fio-server-a")) as first, \
            serve_fio(fio_available, tmp_path_factory.mktemp("fio-server-b")) as second:
        yield first.remote, second.remote
