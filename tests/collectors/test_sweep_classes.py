"""Device classes through ``run_sweep``: RAID metadata and NVMe-oF attach.

md arrays and NVMe-oF targets cannot exist here, so those tests fake the command runner
and the sysfs tree (helpers shared with the device-module tests) and say so in their names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.devices.nvmeof import NvmeofTarget
from collectors.sweep.points import class_metadata
from collectors.sweep.run import run_sweep
from collectors.sweep.settings import SweepSettings
from modeling.errors import InvalidInput, UnsafeTarget
from modeling.store import DataDir
from tests.device_fixtures import tiny_plan
from tests.collectors.test_devices_nvmeof import CONNECT, DISCONNECT, TARGET, FakeNvme, fake_sysfs
from tests.collectors.test_devices_raid import MDADM_DETAIL, FakeRunner, fake_md_sysfs


@pytest.mark.fio
def test_user_given_raid_metadata_is_recorded(datadir: DataDir, tmp_path: Path, fio_available: str) -> None:
    settings = SweepSettings(target=str(tmp_path / "graid.img"), runtime="500ms", size="8MiB",
                             device_class="raid",
                             raid={"level": 6, "members": "4", "chunk": "64k", "kind": "gpu",
                                   "controller": "SR-1010"})
    run_sweep(datadir, "graid", tiny_plan(1), settings)
    dev = datadir.catalog.get_device("graid")
    assert dev.device_class == "raid"
    assert dev.metadata["raid_level"] == "raid6" and dev.metadata["raid_disks"] == 4
    assert dev.metadata["raid_chunk_bytes"] == 65536 and dev.metadata["raid_kind"] == "gpu"


def test_raid_without_metadata_is_refused(datadir: DataDir, tmp_path: Path) -> None:
    settings = SweepSettings(target=str(tmp_path / "r.img"), runtime="500ms", size="8MiB",
                             device_class="raid")
    with pytest.raises(InvalidInput, match="raid-level"):
        run_sweep(datadir, "anon-raid", tiny_plan(1), settings)


def test_raid_facts_are_checked_with_the_settings(tmp_path: Path) -> None:
    target = str(tmp_path / "r.img")
    with pytest.raises(InvalidInput, match="need --class raid"):
        SweepSettings(target=target, raid={"level": 5})
    with pytest.raises(InvalidInput, match="unknown RAID level"):
        SweepSettings(target=target, device_class="raid", raid={"level": 7})
    with pytest.raises(InvalidInput, match="chunk"):
        SweepSettings(target=target, device_class="raid", raid={"level": 5, "chunk": "100"})


def test_fake_md_array_metadata_read_from_sysfs_and_mdadm(datadir: DataDir, tmp_path: Path) -> None:
    sysfs = fake_md_sysfs(tmp_path / "sys")
    mdadm = FakeRunner(MDADM_DETAIL)
    settings = SweepSettings(target="/dev/md0", runtime="500ms", device_class="raid")
    # /dev/md0 does not exist on this machine, so the sweep stops at the target check,
    # after the class metadata has been read; a refused sweep stores no device.
    with pytest.raises(InvalidInput, match="does not exist"):
        run_sweep(datadir, "md0", tiny_plan(1), settings, commands=mdadm,
                  sysfs_root=sysfs)
    assert mdadm.calls == [["mdadm", "--detail", "/dev/md0"]]
    assert not datadir.catalog.has_device("md0")
    meta = class_metadata(settings, sysfs_root=sysfs, run=FakeRunner(MDADM_DETAIL))
    assert meta["raid_level"] == "raid5" and meta["raid_chunk_bytes"] == 524288
    assert meta["raid_members"] == ["sdb", "sdc", "sdd", "sde"]


def test_fake_nvmeof_sweep_attaches_and_always_detaches(datadir: DataDir, tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path)
    nvme = FakeNvme(sysfs)
    settings = SweepSettings(target="", nvmeof=TARGET, runtime="500ms", device_class="nvmeof")
    # the fake namespace has no /dev node here: the sweep fails after attaching, and detaches
    with pytest.raises(InvalidInput, match="/dev/nvme1n1 does not exist"):
        run_sweep(datadir, "fabric", tiny_plan(1), settings, commands=nvme,
                  sysfs_root=sysfs)
    assert nvme.calls == [CONNECT, DISCONNECT]
    assert not datadir.catalog.has_device("fabric")  # refused: nothing stored
    meta = class_metadata(settings.model_copy(update={"target": "/dev/nvme1n1"}), sysfs_root=sysfs)
    assert meta["nvmeof_nqn"] == TARGET.nqn and meta["nvmeof_transport"] == "tcp"


def test_nvmeof_through_spdk_needs_destroy_data_and_the_plugin(datadir: DataDir, tmp_path: Path) -> None:
    options = {"target": "", "nvmeof": NvmeofTarget(address="10.0.0.2", nqn=TARGET.nqn), "engine": "spdk",
               "device_class": "nvmeof", "spdk_plugin": str(tmp_path / "missing")}
    with pytest.raises(UnsafeTarget, match="--destroy-data"):
        run_sweep(datadir, "spdkvol", tiny_plan(1), SweepSettings(**options))
    with pytest.raises(InvalidInput, match="SPDK"):
        run_sweep(datadir, "spdkvol", tiny_plan(1), SweepSettings(**options, destroy_data=True))
