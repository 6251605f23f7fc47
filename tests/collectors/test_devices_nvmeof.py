"""NVMe-oF attach/detach and the SPDK plugin.  No fabric here: fake runner + fake sysfs tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from collectors.devices.nvmeof import (
    NvmeofTarget,
    attached,
    find_namespace,
    spdk_filename,
)
from modeling.errors import DeviceUnavailable

NQN = "nqn.2014-08.org.example:nvme-target-1"
TARGET = NvmeofTarget(transport="tcp", address="10.0.0.2", port=4420, nqn=NQN)
CONNECT = ["nvme", "connect", "-t", "tcp", "-a", "10.0.0.2", "-s", "4420", "-n", NQN]
DISCONNECT = ["nvme", "disconnect", "-n", NQN]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def add_controller(sysfs: Path, ctl: str, *, nqn: str, transport: str, address: str,
                   namespaces: tuple[str, ...] = ("n1",), fabrics: bool = True,
                   class_link: str = "class/nvme") -> Path:
    """A controller as the kernel publishes it (fabrics ones live under nvme-fabrics/ctl)."""
    real = sysfs / "devices" / ("virtual/nvme-fabrics/ctl" if fabrics else "pci0000:00/nvme") / ctl
    _write(real / "subsysnqn", nqn)
    _write(real / "transport", transport)
    _write(real / "address", address)
    for i, ns in enumerate(namespaces, start=1):
        _write(real / f"{ctl}{ns}" / "nsid", str(i))
    (sysfs / class_link).mkdir(parents=True, exist_ok=True)
    os.symlink(real, sysfs / class_link / ctl)
    return real


def fake_sysfs(tmp_path: Path) -> Path:
    """A machine with one local PCIe NVMe drive and no fabric connection yet."""
    sysfs = tmp_path / "sys"
    add_controller(sysfs, "nvme0", nqn="nqn.2014.08.org.nvmexpress:144d144dS4EWNF0M123456",
                   transport="pcie", address="0000:01:00.0", fabrics=False)
    return sysfs


class FakeNvme:
    """Plays nvme-cli and the kernel: connect publishes a controller (after a delay)."""

    def __init__(self, sysfs: Path, *, delay: float = 0.0, connect_rc: int = 0, appear: bool = True) -> None:
        self.sysfs, self.delay, self.connect_rc, self.appear = sysfs, delay, connect_rc, appear
        self.calls: list[list[str]] = []

    def _publish(self) -> None:
        add_controller(self.sysfs, "nvme1", nqn=NQN, transport="tcp",
                       address="traddr=10.0.0.2,trsvcid=4420,src_addr=10.0.0.1")

    def __call__(self, cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        self.calls.append(list(cmd))
        assert kwargs.get("timeout"), "every command needs a timeout"
        if cmd[1] == "connect":
            if self.connect_rc:
                return subprocess.CompletedProcess(
                    cmd, self.connect_rc, "", "Failed to write to /dev/nvme-fabrics: Connection refused\n")
            if self.appear:
                if self.delay:
                    threading.Timer(self.delay, self._publish).start()
                else:
                    self._publish()
            return subprocess.CompletedProcess(cmd, 0, "", "")
        if cmd[1] == "disconnect":
            link = self.sysfs / "class" / "nvme" / "nvme1"
            if link.is_symlink():
                shutil.rmtree(link.resolve())
                link.unlink()
            return subprocess.CompletedProcess(cmd, 0, "NQN:... disconnected 1 controller(s)\n", "")
        raise AssertionError(f"unexpected command {cmd}")


def test_fake_nvmeof_attach_yields_namespace_and_detaches(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path)
    nvme = FakeNvme(sysfs, delay=0.3)  # the namespace shows up a moment after connect returns
    with attached(TARGET, run=nvme, sysfs_root=sysfs, poll_interval=0.05) as device:
        assert device == "/dev/nvme1n1"
        assert nvme.calls == [CONNECT]
    assert nvme.calls == [CONNECT, DISCONNECT]
    assert find_namespace(TARGET, sysfs_root=sysfs) is None


def test_fake_nvmeof_detaches_when_the_sweep_fails(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path)
    nvme = FakeNvme(sysfs)
    with pytest.raises(RuntimeError, match="fio crashed"):
        with attached(TARGET, run=nvme, sysfs_root=sysfs):
            raise RuntimeError("fio crashed")
    assert nvme.calls == [CONNECT, DISCONNECT]


def test_fake_nvmeof_namespace_never_appears(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path)
    nvme = FakeNvme(sysfs, appear=False)
    with pytest.raises(DeviceUnavailable, match="did not appear within 0.2 s"):
        with attached(TARGET, run=nvme, sysfs_root=sysfs, settle_timeout=0.2, poll_interval=0.05):
            pytest.fail("must not yield")
    assert nvme.calls == [CONNECT, DISCONNECT]


def test_fake_nvmeof_connect_failure_is_reported_without_disconnect(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path)
    nvme = FakeNvme(sysfs, connect_rc=1)
    with pytest.raises(DeviceUnavailable, match="nvme connect to 10.0.0.2:4420 failed: .*Connection refused"):
        with attached(TARGET, run=nvme, sysfs_root=sysfs):
            pytest.fail("must not yield")
    assert nvme.calls == [CONNECT]


def test_fake_nvmeof_pre_attached_target_is_used_and_left_attached(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path)
    # only under /sys/class/nvme-fabrics/ctl, as some kernels publish fabrics controllers
    add_controller(sysfs, "nvme4", nqn=NQN, transport="tcp", address="traddr=10.0.0.2,trsvcid=4420",
                   class_link="class/nvme-fabrics/ctl")
    nvme = FakeNvme(sysfs)
    with attached(TARGET, run=nvme, sysfs_root=sysfs) as device:
        assert device == "/dev/nvme4n1"
    assert nvme.calls == []


def test_fake_nvmeof_other_port_or_address_does_not_match(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path)
    add_controller(sysfs, "nvme4", nqn=NQN, transport="tcp", address="traddr=10.0.0.2,trsvcid=4421")
    add_controller(sysfs, "nvme5", nqn=NQN, transport="tcp", address="traddr=10.0.0.3,trsvcid=4420")
    add_controller(sysfs, "nvme6", nqn=NQN, transport="rdma", address="traddr=10.0.0.2,trsvcid=4420")
    assert find_namespace(TARGET, sysfs_root=sysfs) is None
    rdma = TARGET.model_copy(update={"transport": "rdma"})
    assert find_namespace(rdma, sysfs_root=sysfs) == "/dev/nvme6n1"


def test_fake_nvmeof_native_multipath_uses_the_subsystem_head(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path)
    real = add_controller(sysfs, "nvme2", nqn=NQN, transport="tcp",
                          address="traddr=10.0.0.2,trsvcid=4420", namespaces=("c2n1",))
    subsys = sysfs / "devices" / "virtual" / "nvme-subsystem" / "nvme-subsys3"
    subsys.mkdir(parents=True)
    os.symlink(subsys, real / "subsystem")
    assert find_namespace(TARGET, sysfs_root=sysfs) == "/dev/nvme3n1"


def test_fake_nvmeof_rdma_and_missing_nvme_cli(tmp_path: Path) -> None:
    sysfs = fake_sysfs(tmp_path)
    calls: list[list[str]] = []

    def missing(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        calls.append(cmd)
        raise FileNotFoundError(cmd[0])

    target = NvmeofTarget(transport="RDMA", address="fd00::2", port=4421, nqn=NQN, nsid=2)
    with pytest.raises(DeviceUnavailable, match="nvme-cli is not installed"):
        with attached(target, run=missing, sysfs_root=sysfs):
            pytest.fail("must not yield")
    assert calls == [["nvme", "connect", "-t", "rdma", "-a", "fd00::2", "-s", "4421", "-n", NQN]]


@pytest.mark.parametrize(
    "nqn",
    [NQN, "nqn.2016-06.io.spdk:cnode1", "nqn.2014-08.org.nvmexpress.discovery",
     "nqn.2014-08.org.nvmexpress:uuid:0c7fdc4d-2a6b-4b5d-9f5e-6c2f1a7b8e90",
     "nqn.1992-08.com.netapp:sn.4e0b3c1a:subsystem.vol1"],
)
def test_valid_nqns(nqn: str) -> None:
    assert NvmeofTarget(address="storage-1.example.com", nqn=nqn).nqn == nqn


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("nqn", "iqn.2014-08.org.example:x"),
        ("nqn", "nqn.2014-13.org.example:x"),
        ("nqn", "nqn.14-08.org.example:x"),
        ("nqn", "nqn.2014-08.example:x"),  # not a reverse domain
        ("nqn", "nqn.2014-08.org.example:x y"),
        ("nqn", "nqn.2014-08.org.example:x;reboot"),
        ("nqn", "nqn.2014-08.org.example:" + "a" * 220),
        ("address", "10.0.0.2 trsvcid=1"),
        ("address", "300.1.1.1"),
        ("address", "-host"),
        ("address", ""),
        ("port", 0),
        ("port", 65536),
        ("transport", "fc"),
        ("nsid", 0),
    ],
)
def test_invalid_target_fields_are_rejected(field: str, value: Any) -> None:
    values: dict[str, Any] = {"transport": "tcp", "address": "10.0.0.2", "port": 4420, "nqn": NQN}
    values[field] = value
    with pytest.raises(ValidationError) as info:
        NvmeofTarget(**values)
    assert info.value.errors()[0]["loc"] == (field,)


def test_spdk_filename_from_validated_parts() -> None:
    assert spdk_filename(TARGET) == (
        "trtype=TCP adrfam=IPv4 traddr=10.0.0.2 trsvcid=4420 "
        "subnqn=nqn.2014-08.org.example\\:nvme-target-1 ns=1"
    )
    v6 = NvmeofTarget(transport="rdma", address="fd00::2", port=4421, nqn="nqn.2016-06.io.spdk:cnode1",
                      nsid=3)
    assert spdk_filename(v6) == (
        "trtype=RDMA adrfam=IPv6 traddr=fd00\\:\\:2 trsvcid=4421 subnqn=nqn.2016-06.io.spdk\\:cnode1 ns=3"
    )
