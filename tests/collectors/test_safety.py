"""The unsafe-target refusal, proven on real loop devices (with a filesystem, partitions, mounted)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from collectors.safety import check_target, magic_signatures, prepare_file
from collectors.sweep.run import run_sweep
from collectors.sweep.settings import SweepSettings
from modeling.errors import InvalidInput, UnsafeTarget
from modeling.store import DataDir
from tests.device_fixtures import mkfs_ext4, sha256_of, tiny_plan, write_mbr


@pytest.mark.fio
def test_sweep_refuses_loop_device_with_filesystem_and_leaves_it_untouched(
    make_loop, datadir: DataDir, fio_available: str
) -> None:
    dev = make_loop(mkfs_ext4)
    before = sha256_of(dev)
    with pytest.raises(UnsafeTarget) as err:
        run_sweep(datadir, "loopfs", tiny_plan(1), SweepSettings(target=dev, runtime="200ms", size="16MiB"))
    message = str(err.value)
    assert "ext4" in message and "--destroy-data" in message and dev in message
    assert sha256_of(dev) == before
    # nothing was stored for the refused sweep
    catalog = datadir.catalog
    assert all(s.n_points == 0 for d in catalog.list_devices() for s in catalog.list_sweeps(d.name))


def test_partitions_and_partition_table_are_refused(make_loop) -> None:
    dev = make_loop(write_mbr, partitions=True)
    with pytest.raises(UnsafeTarget) as err:
        check_target(dev)
    reasons = err.value.details["reasons"]
    assert any("partitions" in r and os.path.basename(dev) in r for r in reasons)
    assert any("dos" in r for r in reasons)  # blkid's partition-table type


def test_mounted_device_is_refused(make_loop) -> None:
    dev = make_loop(mkfs_ext4, mount=True)
    with pytest.raises(UnsafeTarget, match="is mounted at"):
        check_target(dev)
    # even --destroy-data does not hide the reasons from the caller
    info = check_target(dev, destroy_data=True)
    assert "mounted" in info.details["warnings"]


@pytest.mark.fio
def test_blank_loop_device_is_swept(make_loop, datadir: DataDir, fio_available: str) -> None:
    dev = make_loop()
    assert check_target(dev).kind == "block"
    sweep = run_sweep(datadir, "loopblank", tiny_plan(1),
                      SweepSettings(target=dev, runtime="200ms", size="16MiB"))
    assert sweep.status == "complete" and sweep.n_points == 1
    assert datadir.catalog.measurements("loopblank")["iops"].iloc[0] > 0


@pytest.mark.fio
def test_destroy_data_allows_a_device_with_a_filesystem(make_loop, datadir: DataDir,
                                                        fio_available: str) -> None:
    dev = make_loop(mkfs_ext4)
    sweep = run_sweep(datadir, "loopforce", tiny_plan(1),
                      SweepSettings(target=dev, runtime="200ms", size="8MiB", destroy_data=True))
    assert sweep.n_points == 1


def test_magic_bytes_without_blkid(tmp_path: Path) -> None:
    image = tmp_path / "fs.img"
    with open(image, "wb") as fh:
        fh.truncate(8 << 20)
    mkfs_ext4(image)
    assert any("ext" in m for m in magic_signatures(image))
    blank = tmp_path / "blank.img"
    blank.write_bytes(b"\0" * (1 << 20))
    assert magic_signatures(blank) == []


def test_files_are_fine_and_created_with_real_data(tmp_path: Path) -> None:
    target = tmp_path / "t.img"  # in an existing folder: no mkdir -p (issue 25 item 7)
    assert check_target(target).kind == "file"
    created: list[Path] = []
    prepare_file(target, 3 << 20, created=created.append)
    assert created == [target]
    assert target.stat().st_size == 3 << 20
    assert os.stat(target).st_blocks * 512 >= 3 << 20  # not sparse: reads must touch the disk
    assert check_target(target, owned=lambda path, st: path == target).size == 3 << 20


def test_other_kinds_of_target_are_invalid(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        check_target(tmp_path)
    with pytest.raises(InvalidInput):
        check_target("/dev/null")
