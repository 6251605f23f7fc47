"""Sweep targets that surprised (issue 25, items 6 and 7): names fio cannot take, a missing
folder, a dangling symlink, and two device names on one target.

Each is refused before any side effect: no file, no folder, no device in the catalog.
Real fio, a real second `ssdpredict sweep` process holding the target.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app
from tests.conftest import REPO

SWEEP = ["--runtime", "1s", "--size", "16MiB", "--plan", "grid", "--write-ratios", "0",
         "--queue-depths", "1", "--sizes", "4k", "--randomness", "1"]


def _sweep(device: str, target: Path | str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, ["sweep", "--device", device, "--target", str(target), *SWEEP])
    return result.exit_code, [line for line in result.output.splitlines() if line.startswith("error:")]


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("name", ["a b.img", "a:b.img", "a,b.img", 'a"b.img', "a'b.img"])
def test_a_name_fio_cannot_take_is_refused_before_any_file(home: Path, tmp_path: Path, name: str) -> None:
    folder = tmp_path / "targets"
    folder.mkdir()
    code, errors = _sweep("odd", folder / name)
    assert code == 2 and len(errors) == 1 and "fio cannot take this path" in errors[0], errors
    assert repr(name[1]) in errors[0]
    assert _tree(folder) == []
    assert not DataDir(home).catalog.has_device("odd")


def test_a_symlink_to_an_odd_name_is_refused_by_its_resolved_path(home: Path, tmp_path: Path) -> None:
    (tmp_path / "x y.img").write_bytes(b"")
    (tmp_path / "plain.img").symlink_to(tmp_path / "x y.img")
    code, errors = _sweep("odd", tmp_path / "plain.img")
    assert code == 2 and "fio cannot take its resolved path" in errors[0], errors
    assert (tmp_path / "x y.img").stat().st_size == 0


def test_a_target_in_a_missing_folder_is_refused_not_created(home: Path, tmp_path: Path) -> None:
    code, errors = _sweep("m", tmp_path / "missing" / "deeper" / "t.img")
    assert code == 2 and len(errors) == 1 and "does not exist; create it first" in errors[0], errors
    assert not (tmp_path / "missing").exists()
    assert not DataDir(home).catalog.has_device("m")


def test_a_dangling_symlink_is_refused_and_nothing_is_made_where_it_points(
    home: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link.img"
    link.symlink_to(tmp_path / "elsewhere.img")
    code, errors = _sweep("s", link)
    assert code == 2 and len(errors) == 1 and "symlink" in errors[0] and "does not exist" in errors[0], errors
    assert not (tmp_path / "elsewhere.img").exists()
    assert link.is_symlink()


@pytest.mark.slow
@pytest.mark.fio
def test_two_device_names_on_one_target_the_second_is_refused(
    home: Path, tmp_path: Path, fio_available: str
) -> None:
    target = tmp_path / "shared.img"
    first = subprocess.Popen(
        [sys.executable, "-m", "service.cli.main", "sweep", "--device", "first", "--target", str(target),
         *SWEEP, "--queue-depths", "1,2,4,8,16,32"],
        cwd=REPO, env={**os.environ, "SSDPREDICT_HOME": str(home)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        locks = home / "locks" / "targets"
        deadline = time.monotonic() + 60
        while not (locks.is_dir() and any(locks.iterdir()) and DataDir(home).catalog.has_device("first")):
            assert first.poll() is None, first.communicate()[1]
            assert time.monotonic() < deadline, "the first sweep did not start"
            time.sleep(0.1)
        alias = tmp_path / "alias.img"  # another name of the same file
        alias.symlink_to(target)
        code, errors = _sweep("second", alias)
        assert code == 2 and len(errors) == 1, errors
        assert f"target {target} is busy: device 'first'" in errors[0]
        assert not DataDir(home).catalog.has_device("second")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    # the target is free again once its holder is gone
    code, errors = _sweep("second", tmp_path / "alias.img")
    assert code == 0, errors
