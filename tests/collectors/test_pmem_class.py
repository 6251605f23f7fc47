"""Class ``pmem``: mode and interleave facts, the plan, and real fio (libpmem) on the tmpfs stand-in.

No persistent memory exists here: the narrowest fakes are a mountinfo file (for an fsdax
mount), a sysfs tree (for a devdax region) and ``fake_ndctl`` (the command runner); the
sweeps themselves run real fio's libpmem engine on a tmpfs file, the documented stand-in.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors.devices.pmem import STAND_IN_WARNING, pmem_engine, pmem_facts
from collectors.plans.presets import build_plan
from collectors.sweep.run import run_sweep, sweep_plan
from collectors.sweep.settings import SweepSettings
from modeling.errors import InvalidInput, UnsafeTarget
from modeling.store import DataDir

SHM = Path("/dev/shm")


def _mountinfo(tmp_path: Path, point: str, fstype: str, options: str) -> Path:
    path = tmp_path / "mountinfo"
    path.write_text(
        f"25 24 0:23 / / rw - ext4 /dev/sda1 rw\n"
        f"40 25 259:1 / {point} rw,relatime - {fstype} /dev/pmem0 {options}\n"
    )
    return path


def fake_ndctl(doc: object, returncode: int = 0):
    def run(cmd: list[str], **_kw: object) -> subprocess.CompletedProcess:
        assert cmd[:2] == ["ndctl", "list"]
        return subprocess.CompletedProcess(cmd, returncode, json.dumps(doc), "")

    return run


def no_ndctl(cmd: list[str], **_kw: object) -> subprocess.CompletedProcess:
    raise FileNotFoundError("ndctl")


def test_fsdax_from_mount_options_and_ndctl_mode_and_interleave(tmp_path: Path) -> None:
    info = _mountinfo(tmp_path, "/mnt/pmem", "ext4", "rw,dax=always")
    facts = pmem_facts("/mnt/pmem/f", run=no_ndctl, mountinfo=info)
    assert facts["pmem_mode"] == "fsdax" and facts["pmem_engine"] == "libpmem" and not facts["pmem_stand_in"]
    assert "pmem_interleave" not in facts  # not visible without ndctl
    ndctl = fake_ndctl(
        [
            {
                "dev": "region0",
                "mappings": 6,
                "namespaces": [{"dev": "namespace0.0", "mode": "fsdax", "blockdev": "f"}],
            }
        ]
    )
    facts = pmem_facts("/mnt/pmem/f", run=ndctl, mountinfo=info)
    assert facts["pmem_interleave"] == 6 and facts["pmem_mode_from"] == "ndctl"


def test_devdax_from_the_path_with_the_regions_interleave_in_sysfs(tmp_path: Path) -> None:
    region = tmp_path / "sys" / "devices" / "ndbus0" / "region1"
    (region / "dax1.0" / "dax1.0").mkdir(parents=True)
    (region / "mappings").write_text("4\n")
    (tmp_path / "sys" / "bus" / "dax" / "devices").mkdir(parents=True)
    (tmp_path / "sys" / "bus" / "dax" / "devices" / "dax1.0").symlink_to(region / "dax1.0" / "dax1.0")
    facts = pmem_facts("/dev/dax1.0", run=no_ndctl, sysfs_root=tmp_path / "sys")
    assert facts == {
        "pmem_mode": "devdax",
        "pmem_engine": "dev-dax",
        "pmem_stand_in": False,
        "pmem_mode_from": "path",
        "pmem_interleave": 4,
    }
    assert pmem_engine(facts, None) == "dev-dax"
    with pytest.raises(InvalidInput, match="does not fit"):
        pmem_engine(facts, "libpmem")


def test_a_file_on_an_ordinary_filesystem_is_refused(tmp_path: Path) -> None:
    info = _mountinfo(tmp_path, "/data", "ext4", "rw")
    with pytest.raises(InvalidInput, match="not persistent memory"):
        pmem_facts("/data/f", run=no_ndctl, mountinfo=info)


def test_pmem_plan_reaches_64_bytes_and_has_no_queue_depth() -> None:
    plan = build_plan("pmem")
    assert min(p.request_size for p in plan.points) == 64
    assert {p.queue_depth for p in plan.points} == {1} and {p.numjobs for p in plan.points} == {1, 2, 4}
    with pytest.raises(InvalidInput, match="synchronous"):
        build_plan("pmem", values={"queue_depths": [1, 8]})


def test_pmem_engines_only_for_the_pmem_class() -> None:
    with pytest.raises(InvalidInput, match="--class pmem"):
        SweepSettings(target="/tmp/x", device_class="ssd", engine="libpmem")
    with pytest.raises(InvalidInput, match="--class pmem"):
        SweepSettings(target="/dev/shm/x", device_class="pmem", engine="io_uring")


def test_devdax_needs_the_destroy_flag(datadir: DataDir, tmp_path: Path) -> None:
    settings = SweepSettings(target="/dev/dax9.9", device_class="pmem", runtime="1s", size="1MiB")
    with pytest.raises(UnsafeTarget, match="--destroy-data"):
        run_sweep(
            datadir,
            "dax",
            build_plan("pmem").head(1),
            settings,
            runner=lambda *a, **k: "",
            commands=no_ndctl,
            sysfs_root=tmp_path,
        )


@pytest.fixture
def shm_file() -> Iterator[Path]:
    folder = SHM / f"ssdpredict-test-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    try:
        yield folder / "pmem.img"
    finally:
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()


def test_real_fio_libpmem_sweep_on_the_tmpfs_stand_in(
    datadir: DataDir, fio_available: str, shm_file: Path
) -> None:
    settings = SweepSettings(target=str(shm_file), device_class="pmem", runtime="1s", size="4MiB")
    plan = sweep_plan(
        datadir,
        "pm",
        "pmem",
        values={"sizes": [64], "write_ratios": [0.0, 1.0], "numjobs": [2], "randomness": [1.0]},
    )
    sweep = run_sweep(datadir, "pm", plan, settings)
    assert sweep.status == "complete" and sweep.n_points == 2
    assert sweep.info["engine"] == "libpmem" and STAND_IN_WARNING in sweep.info["warnings"]
    dev = datadir.catalog.get_device("pm")
    assert dev.device_class == "pmem" and dev.metadata["pmem_stand_in"] is True
    assert dev.metadata["pmem_mode"] == "fsdax"
    rows = datadir.catalog.measurements("pm")
    assert (
        set(rows["request_size"]) == {64} and set(rows["queue_depth"]) == {1} and set(rows["numjobs"]) == {2}
    )
    assert (rows["iops"] > 0).all() and (rows["latency_mean_us"] > 0).all()
