"""The block throttle over a reference device: a cloud volume's provisioned IOPS, made here.

The kernel's block throttle caps the I/O a cgroup issues to one device: cgroup v1
``blkio.throttle.read_iops_device`` and ``write_iops_device`` ("MAJ:MIN N"), or cgroup v2
``io.max`` ("MAJ:MIN riops=N wiops=N") where the ``io`` controller is on the v2 hierarchy.
It is a token bucket, not a queue (DOMAIN.md section 6): at 4,000 IO/s on zram a QD1
closed loop averaged 250 us (1 request in about 400 waits for the next 100 ms slice) while
open-loop Poisson arrivals stayed at 9-18 us up to 90 % of the cap.  The cap is per
direction: N reads and N writes per second.

The throttle binds only I/O issued from inside its cgroup, ``ssdpredict-throttle-<dev>``
under the blkio (or v2) root.  Every fio that ssdpredict starts on this machine joins it
when its target is the throttled device (:func:`cgroup_for`; :mod:`collectors.fio.runner`
writes fio's guard's pid into ``cgroup.procs`` before exec, so fio and its job processes
inherit it): the sweep, the replay and the device check all meet the cap.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from modeling.errors import InvalidInput

PREFIX = "ssdpredict-throttle-"
V1_ROOT = Path("/sys/fs/cgroup/blkio")
V2_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
MAX_IOPS = 10_000_000


def _v2_root() -> Path | None:
    for root in V2_ROOTS:
        controllers = root / "cgroup.controllers"
        if controllers.exists() and "io" in controllers.read_text().split():
            return root
    return None


def throttle_support() -> str | None:
    """``"v1"`` or ``"v2"`` when this machine has a block throttle ssdpredict can use, else None."""
    if (V1_ROOT / "blkio.throttle.read_iops_device").exists():
        return "v1"
    return "v2" if _v2_root() is not None else None


def _dev_numbers(device: str | Path) -> str:
    st = os.stat(device)
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def create_throttle(device: str | Path, iops: int) -> dict[str, Any]:
    """Cap ``device`` at ``iops`` reads and ``iops`` writes per second for I/O from its cgroup.

    Returns the throttle's record (``version``, ``cgroup``, ``device``, ``iops``) for the
    reference's metadata; raises ``OSError`` where no block throttle can be set.
    """
    if not 1 <= int(iops) <= MAX_IOPS:
        raise InvalidInput(f"--iops must be between 1 and {MAX_IOPS}")
    version = throttle_support()
    if version is None:
        raise OSError(f"no block throttle here (no {V1_ROOT}/blkio.throttle.*, no cgroup v2 io controller)")
    numbers = _dev_numbers(device)
    root = V1_ROOT if version == "v1" else _v2_root()
    assert root is not None
    cgroup = root / f"{PREFIX}{Path(device).resolve().name}"
    cgroup.mkdir(exist_ok=True)
    try:
        if version == "v1":
            (cgroup / "blkio.throttle.read_iops_device").write_text(f"{numbers} {int(iops)}")
            (cgroup / "blkio.throttle.write_iops_device").write_text(f"{numbers} {int(iops)}")
        else:
            (root / "cgroup.subtree_control").write_text("+io")
            (cgroup / "io.max").write_text(f"{numbers} riops={int(iops)} wiops={int(iops)}")
    except OSError:
        cgroup.rmdir()
        raise
    return {"version": version, "cgroup": str(cgroup), "device": numbers, "iops": int(iops)}


def remove_throttle(record: dict[str, Any]) -> None:
    """Lift the throttle's rules and remove its cgroup (processes still inside go back to the root)."""
    cgroup, numbers = Path(record["cgroup"]), record["device"]
    if not cgroup.name.startswith(PREFIX) or not cgroup.is_dir():
        return
    if record["version"] == "v1":
        for rule in ("blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device"):
            (cgroup / rule).write_text(f"{numbers} 0")  # 0 removes the device's rule
    else:
        (cgroup / "io.max").write_text(f"{numbers} riops=max wiops=max")
    for pid in (cgroup / "cgroup.procs").read_text().split():
        try:
            (cgroup.parent / "cgroup.procs").write_text(pid)
        except OSError:
            pass  # the process exited meanwhile
    cgroup.rmdir()


def cgroup_for(target: str | Path) -> Path | None:
    """The throttle cgroup a fio on ``target`` must run in: ssdpredict's, when one caps that device."""
    try:
        path = Path(target).resolve()
        if not path.is_block_device():
            return None
        numbers = _dev_numbers(path)
    except OSError:
        return None
    for root in (V1_ROOT, *V2_ROOTS):
        cgroup = root / f"{PREFIX}{path.name}"
        rule = cgroup / ("blkio.throttle.read_iops_device" if root == V1_ROOT else "io.max")
        try:
            if any(line.split()[0] == numbers for line in rule.read_text().splitlines() if line.strip()):
                return cgroup
        except OSError:
            continue
    return None


def cgroup_for_job(job_text: str) -> Path | None:
    """The throttle cgroup of the first throttled ``filename=`` of a fio job file, if any."""
    for line in job_text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "filename" and value.strip():
            found = cgroup_for(value.strip())
            if found is not None:
                return found
    return None


def join(cgroup: Path | None) -> None:
    """Move the calling process into ``cgroup`` (a ``preexec_fn``: its children inherit it)."""
    if cgroup is not None:
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))
