"""A sweep never destroys or fills the user's disk: existing files, free space, permissions.

Real files, a real tmpfs, a real loop device, real ``ssdpredict sweep`` runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app
from service.config import get_settings
from tests.device_fixtures import mkfs_ext4, sha256_of


ROOT = Path(__file__).resolve().parents[2]
ONE_POINT = ["--plan", "grid", "--write-ratios", "1", "--queue-depths", "1", "--sizes", "4k",
             "--randomness", "1", "--runtime", "200ms"]  # a completed run is all these tests need


def _sweep(target: Path | str, *extra: str, device: str = "f") -> tuple[int, str]:
    result = CliRunner().invoke(app, ["sweep", "--device", device, "--target", str(target),
                                      *ONE_POINT, *extra])
    return result.exit_code, result.output


def _user_files(tmp_path: Path) -> list[Path]:
    readme = tmp_path / "copy-of-README.md"
    shutil.copy(ROOT / "README.md", readme)
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(20 << 20))
    image = tmp_path / "copy-of-ext4-image.img"
    with open(image, "wb") as fh:
        fh.truncate(16 << 20)
    mkfs_ext4(image)
    return [readme, data, image]


@pytest.mark.fio
def test_existing_files_are_refused_unchanged_and_no_device_is_created(
        datadir: DataDir, tmp_path: Path, fio_available: str) -> None:
    for path in _user_files(tmp_path):
        before, size = sha256_of(path), path.stat().st_size
        code, output = _sweep(path, "--size", "8MiB")
        assert code == 2, output
        assert "did not create" in output and "--destroy-data" in output and "Traceback" not in output
        assert sha256_of(path) == before and path.stat().st_size == size
    assert datadir.catalog.list_devices() == []  # a refused sweep stores nothing, not even a device


@pytest.mark.fio
def test_destroy_data_allows_an_existing_file(datadir: DataDir, tmp_path: Path, fio_available: str) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom(8 << 20))
    code, output = _sweep(path, "--size", "8MiB", "--destroy-data")
    assert code == 0, output
    assert datadir.catalog.measurements("f")["iops"].iloc[0] > 0


@pytest.mark.fio
def test_own_scratch_file_is_swept_again_but_not_a_file_put_in_its_place(
        datadir: DataDir, tmp_path: Path, fio_available: str) -> None:
    path = tmp_path / "scratch.img"
    assert _sweep(path, "--size", "8MiB")[0] == 0
    # another plan on the same scratch file (and growing it) is fine: the file is ours
    code, output = _sweep(path, "--size", "12MiB")
    assert code == 0, output
    assert path.stat().st_size == 12 << 20
    path.unlink()
    path.write_bytes(os.urandom(4 << 20))  # the user's file now, at the same path
    before = sha256_of(path)
    code, output = _sweep(path, "--size", "12MiB", "--runtime", "2s")
    assert code == 2 and "did not create" in output
    assert sha256_of(path) == before


@pytest.mark.fio
def test_a_file_larger_than_the_free_space_is_refused_with_the_numbers(
        datadir: DataDir, small_fs: Path, fio_available: str) -> None:
    target = small_fs / "big.img"
    code, output = _sweep(target, "--size", "10TiB")
    assert code == 2, output
    assert "10.0 TiB" in output and "free" in output and "Traceback" not in output
    assert not target.exists() and list(small_fs.iterdir()) == []
    assert datadir.catalog.list_devices() == []
    # a size that fits (beside the reserve) is created and swept
    code, output = _sweep(target, "--size", "32MiB")
    assert code == 0, output


def test_a_write_failing_half_way_leaves_nothing_behind(tmp_path: Path) -> None:
    # RLIMIT_FSIZE makes the kernel refuse writes past 3 MiB (EFBIG), like a disk filling up
    # while the file grows; the free-space check passes, the write fails half-way.
    script = textwrap.dedent(f"""
        import resource, signal
        from pathlib import Path
        from collectors.safety import prepare_file
        from modeling.errors import NoSpace
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (3 << 20, 3 << 20))
        new, old = Path({str(tmp_path / 'new.img')!r}), Path({str(tmp_path / 'old.img')!r})
        removed = []
        try:
            prepare_file(new, 8 << 20, removed=removed.append)
        except NoSpace as exc:
            print("new:", exc)
        assert removed == [new], removed
        try:
            prepare_file(old, 8 << 20)
        except NoSpace as exc:
            print("old:", exc)
    """)
    old = tmp_path / "old.img"
    old.write_bytes(b"x" * (1 << 20))
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert "new: could not write" in proc.stdout and "it was removed" in proc.stdout
    assert "old: could not write" in proc.stdout and "cut back" in proc.stdout
    assert not (tmp_path / "new.img").exists()
    assert old.read_bytes() == b"x" * (1 << 20)


def test_a_block_device_that_may_not_be_opened_gives_one_line(
        make_loop: Callable[..., str], monkeypatch: pytest.MonkeyPatch) -> None:
    dev = make_loop()
    os.chmod(dev, 0o600)  # root's only: the unprivileged user below may not open it
    home = Path(tempfile.mkdtemp(prefix="ssdpredict-test-home-", dir="/tmp"))  # pytest's tmp is 0700
    os.chown(home, 65534, 65534)
    monkeypatch.setenv("SSDPREDICT_HOME", str(home))
    get_settings.cache_clear()
    # The interpreter lives under /root (0700), so an unprivileged child process cannot
    # start it; the CLI runs in this process with the effective ids of nobody instead.
    os.setegid(65534)
    os.seteuid(65534)
    try:
        result = CliRunner().invoke(app, ["sweep", "--device", "v", "--target", dev, *ONE_POINT])
    finally:
        os.seteuid(0)
        os.setegid(0)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "permission denied" in errors[0] and dev in errors[0], result.output
    assert "Traceback" not in result.output
    assert DataDir(home).catalog.list_devices() == []
    shutil.rmtree(home)
