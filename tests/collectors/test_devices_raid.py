"""RAID metadata.  md arrays cannot exist here: sysfs is a fake tree and mdadm a fake runner."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from collectors.devices.raid import (
    md_metadata,
    normalize_level,
    parse_mdadm_detail,
    raid_metadata,
    user_raid_metadata,
)
from modeling.errors import InvalidInput

MDADM_DETAIL = """/dev/md0:
           Version : 1.2
     Creation Time : Sun Nov 22 05:00:00 2026
        Raid Level : raid5
        Array Size : 3142656 (3.00 GiB 3.22 GB)
      Raid Devices : 4
     Total Devices : 5
       Persistence : Superblock is persistent

             State : clean
    Active Devices : 4
            Layout : left-symmetric
        Chunk Size : 512K

Consistency Policy : resync

              Name : host:0  (local to host host)
              UUID : 3f2b1c4d:5e6f7a8b:9c0d1e2f:3a4b5c6d
            Events : 18

    Number   Major   Minor   RaidDevice State
       0       8       16        0      active sync   /dev/sdb
       1       8       32        1      active sync   /dev/sdc
       2       8       48        2      active sync   /dev/sdd
       4       8       64        3      active sync   /dev/sde

       5       8       80        -      spare   /dev/sdf
"""


class FakeRunner:
    """Records commands; answers like the real tool would (or raises, for a missing tool)."""

    def __init__(self, stdout: str = "", returncode: int = 0, missing: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.stdout, self.returncode, self.missing = stdout, returncode, missing

    def __call__(self, cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        self.calls.append(list(cmd))
        assert kwargs.get("timeout"), "every command needs a timeout"
        if self.missing:
            raise FileNotFoundError(cmd[0])
        stderr = "" if self.returncode == 0 else "mdadm: cannot open /dev/md0: Permission denied"
        return subprocess.CompletedProcess(cmd, self.returncode, self.stdout, stderr)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def fake_md_sysfs(root: Path, name: str = "md0", level: str = "raid5", chunk: int = 524288,
                  members: tuple[str, ...] = ("sdc", "sdb", "sde", "sdd"), dev_dirs: bool = True) -> Path:
    """A /sys tree for an md array, laid out as the kernel does."""
    block = root / "block" / name
    md = block / "md"
    _write(md / "level", level)
    _write(md / "raid_disks", str(len(members)))
    _write(md / "chunk_size", str(chunk))
    _write(md / "layout", "2")
    _write(md / "metadata_version", "1.2")
    _write(md / "array_state", "clean")
    _write(block / "size", "6285312")
    slots = {"sdb": 0, "sdc": 1, "sdd": 2, "sde": 3}
    for member in members:
        (block / "slaves").mkdir(parents=True, exist_ok=True)
        os.symlink(f"../../../devices/pci/{member}", block / "slaves" / member)
        if dev_dirs:
            dev = md / f"dev-{member}"
            dev.mkdir(parents=True)
            os.symlink(f"../../../../devices/pci0000:00/ata1/block/{member}", dev / "block")
            _write(dev / "slot", str(slots.get(member, 0)))
            _write(dev / "state", "in_sync")
    return root


def test_fake_md_metadata_from_sysfs_and_mdadm(tmp_path: Path) -> None:
    sysfs = fake_md_sysfs(tmp_path / "sys")
    run = FakeRunner(MDADM_DETAIL)
    meta = md_metadata("/dev/md0", sysfs_root=sysfs, run=run)
    assert run.calls == [["mdadm", "--detail", "/dev/md0"]]
    assert meta == {
        "raid_kind": "md",
        "md_device": "md0",
        "raid_level": "raid5",
        "raid_disks": 4,
        "raid_members": ["sdb", "sdc", "sdd", "sde"],  # in slot order, from the block links
        "raid_chunk_bytes": 524288,
        "raid_layout": "2",  # sysfs wins over mdadm's "left-symmetric"
        "md_metadata_version": "1.2",
        "md_state": "clean",
        "size_bytes": 6285312 * 512,
        "md_uuid": "3f2b1c4d:5e6f7a8b:9c0d1e2f:3a4b5c6d",
        "raid_member_states": {
            "sdb": "active sync", "sdc": "active sync", "sdd": "active sync", "sde": "active sync",
            "sdf": "spare",
        },
    }


@pytest.mark.parametrize(
    "run", [FakeRunner(missing=True), FakeRunner(returncode=1)], ids=["not-installed", "permission-denied"]
)
def test_fake_md_metadata_without_usable_mdadm_uses_sysfs_only(tmp_path: Path, run: FakeRunner) -> None:
    meta = md_metadata("/dev/md0", sysfs_root=fake_md_sysfs(tmp_path / "sys"), run=run)
    assert run.calls == [["mdadm", "--detail", "/dev/md0"]]
    assert meta["raid_level"] == "raid5" and meta["raid_members"] == ["sdb", "sdc", "sdd", "sde"]
    assert "md_uuid" not in meta and "raid_member_states" not in meta


def test_fake_md_members_from_slaves_and_raid1_without_chunk(tmp_path: Path) -> None:
    sysfs = fake_md_sysfs(tmp_path / "sys", name="md127", level="raid1", chunk=0,
                          members=("nvme1n1", "nvme0n1"), dev_dirs=False)
    run = FakeRunner(missing=True)
    meta = md_metadata("/dev/md127", sysfs_root=sysfs, run=run)
    assert run.calls == [["mdadm", "--detail", "/dev/md127"]]
    assert meta["raid_members"] == ["nvme0n1", "nvme1n1"]
    assert meta["raid_level"] == "raid1" and "raid_chunk_bytes" not in meta
    assert md_metadata("/dev/md127", sysfs_root=sysfs, run=run, use_mdadm=False)["raid_disks"] == 2
    assert len(run.calls) == 1


def test_fake_md_not_an_array(tmp_path: Path) -> None:
    sysfs = fake_md_sysfs(tmp_path / "sys")
    run = FakeRunner(MDADM_DETAIL)
    with pytest.raises(InvalidInput, match="/dev/sda is not a Linux md device"):
        md_metadata("/dev/sda", sysfs_root=sysfs, run=run)
    with pytest.raises(InvalidInput, match="/dev/md5 is not a Linux md array"):
        md_metadata("/dev/md5", sysfs_root=sysfs, run=run)
    assert run.calls == []


def test_real_sysfs_has_no_md_array_here() -> None:
    # this machine has no md driver loaded: the real /sys must say so, not crash
    if Path("/sys/block/md0/md").exists():
        pytest.skip("this machine has an md0 array")
    with pytest.raises(InvalidInput, match="not a Linux md array"):
        md_metadata("/dev/md0", run=FakeRunner(missing=True))


def test_parse_mdadm_detail_alone() -> None:
    info = parse_mdadm_detail(MDADM_DETAIL)
    assert info["raid_level"] == "raid5" and info["raid_disks"] == 4
    assert info["raid_chunk_bytes"] == 512 * 1024 and info["raid_layout"] == "left-symmetric"
    assert info["raid_members"] == ["sdb", "sdc", "sdd", "sde", "sdf"]  # spare last


def test_user_raid_metadata_validates_and_normalises() -> None:
    meta = user_raid_metadata(level="RAID-6", members="nvme0n1,nvme1n1, nvme2n1,nvme3n1", chunk="64k",
                              controller="GRAID SupremeRAID SR-1010", vendor="GRAID", kind="gpu")
    assert meta == {
        "raid_kind": "gpu", "raid_level": "raid6",
        "raid_members": ["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"],
        "raid_disks": 4, "raid_chunk_bytes": 65536, "raid_controller": "GRAID SupremeRAID SR-1010",
        "raid_vendor": "GRAID",
    }
    assert user_raid_metadata(level=0, members="3")["raid_disks"] == 3
    assert normalize_level("10") == "raid10"
    for kwargs, reason in [
        ({"level": "raid7"}, "unknown RAID level"),
        ({"level": 5, "kind": "magic"}, "unknown RAID kind"),
        ({"level": 5, "members": "0"}, "member count"),
        ({"level": 5, "members": "sda;rm -rf /"}, "invalid RAID member names"),
        ({"level": 5, "chunk": "1000"}, "multiple of 512"),
        ({"level": 5, "chunk": "lots"}, "invalid RAID chunk size"),
        ({"level": 5, "controller": "x\ny"}, "invalid raid controller"),
    ]:
        with pytest.raises(InvalidInput, match=reason):
            user_raid_metadata(**kwargs)


def test_fake_raid_metadata_dispatch(tmp_path: Path) -> None:
    sysfs = fake_md_sysfs(tmp_path / "sys")
    run = FakeRunner(missing=True)
    md = raid_metadata("/dev/md0", user={"controller": "onboard"}, sysfs_root=sysfs, run=run)
    assert md["raid_kind"] == "md" and md["raid_level"] == "raid5" and md["raid_controller"] == "onboard"
    hw = raid_metadata("/dev/sdx", user={"level": "5", "members": 8, "controller": "P420i"},
                       sysfs_root=sysfs, run=run)
    assert hw == {"raid_kind": "hardware", "raid_level": "raid5", "raid_disks": 8, "raid_controller": "P420i"}
    with pytest.raises(InvalidInput, match="at least --raid-level"):
        raid_metadata("/dev/sdx", sysfs_root=sysfs, run=run)
    assert run.calls == [["mdadm", "--detail", "/dev/md0"]]
