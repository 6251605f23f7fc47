"""Persistent memory (class ``pmem``): a DAX file (fsdax) or a device-DAX character device (devdax).

fio reaches it with two synchronous engines: ``libpmem`` maps a file and copies with
PMDK's ``pmem_memcpy`` (on an fsdax filesystem the copies go straight to the media),
``dev-dax`` maps ``/dev/daxX.Y`` whole.  Both complete each request during submission,
so a queue depth means nothing: parallelism is ``numjobs``, and the sweep's plan holds
queue depth 1 only.  Requests are as small as a cache line (64 bytes).

The mode comes from ``ndctl list`` where it is installed (the namespace whose block
device or char device the target is on), else from the path: ``/dev/daxX.Y`` is devdax,
a file on a filesystem mounted with ``dax`` is fsdax.  The interleave (how many DIMMs a
region spans) is the region's ``mappings`` in sysfs or ndctl, where visible.

No persistent memory here: a file on **tmpfs** is accepted as a stand-in.  libpmem
refuses memory that is not pmem unless ``PMEM_IS_PMEM_FORCE=1`` (PMDK's own switch), which
the sweep sets for the stand-in only; its metadata says ``stand_in`` and every sweep of it
warns that it measured DRAM through mmap, not persistent memory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modeling.errors import InvalidInput, UnsafeTarget

Runner = Callable[..., subprocess.CompletedProcess]

PMEM_ENGINES = ("libpmem", "dev-dax")
STAND_IN_ENV = {"PMEM_IS_PMEM_FORCE": "1"}
"""What libpmem needs to map a tmpfs file (PMDK treats the range as persistent memory)."""
STAND_IN_WARNING = (
    "pmem stand-in: the target is a file on tmpfs (no persistent memory here); this "
    "measured DRAM through libpmem's mmap copies, not persistent memory"
)
_DAX_DEV = re.compile(r"^/dev/dax[0-9]+\.[0-9]+$")


def _mount_of(path: Path, mountinfo: Path) -> tuple[str, str]:
    """(filesystem type, mount options) of the mount holding ``path``: the longest mount point prefix."""
    best, found = "", ("", "")
    real = str(path.resolve())
    for line in mountinfo.read_text().splitlines():
        parts = line.split()
        if " - " not in line or len(parts) < 6:
            continue
        point = parts[4].replace("\\040", " ")
        pre, post = line.split(" - ", 1)
        fstype, _source, *super_opts = post.split()
        options = parts[5] + "," + (super_opts[0] if super_opts else "")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, found = point, (fstype, options)
    return found


def _ndctl(run: Runner) -> list[dict[str, Any]]:
    """``ndctl list --namespaces --regions`` as JSON regions; [] where ndctl is missing or fails."""
    try:
        out = run(["ndctl", "list", "--regions", "--namespaces"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0 or not out.stdout.strip():
        return []
    try:
        doc = json.loads(out.stdout)
    except ValueError:
        return []
    regions = doc if isinstance(doc, list) else doc.get("regions", [doc]) if isinstance(doc, dict) else []
    return [r for r in regions if isinstance(r, dict)]


def _from_ndctl(target: str, regions: list[dict[str, Any]]) -> dict[str, Any]:
    name = Path(target).name
    for region in regions:
        for ns in region.get("namespaces", []) or []:
            if name in (ns.get("chardev"), ns.get("blockdev")):
                out: dict[str, Any] = {
                    "pmem_mode": ns.get("mode"),
                    "pmem_namespace": ns.get("dev"),
                    "pmem_region": region.get("dev"),
                }
                if isinstance(region.get("mappings"), int):
                    out["pmem_interleave"] = region["mappings"]
                return out
    return {}


def _sysfs_interleave(target: str, sysfs_root: Path) -> int | None:
    """Interleave ways of a devdax device's region (``/sys/bus/dax/devices/daxX.Y`` -> region)."""
    dev = sysfs_root / "bus" / "dax" / "devices" / Path(target).name
    try:
        region = dev.resolve().parent.parent  # .../regionN/daxN.M/daxN.M
        text = (region / "mappings").read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def pmem_facts(
    target: str,
    *,
    run: Runner = subprocess.run,
    sysfs_root: Path = Path("/sys"),
    mountinfo: Path = Path("/proc/self/mountinfo"),
) -> dict[str, Any]:
    """Mode, engine, interleave and stand-in status of a pmem target; ``InvalidInput`` if it is none."""
    if _DAX_DEV.match(target):
        facts: dict[str, Any] = {
            "pmem_mode": "devdax",
            "pmem_engine": "dev-dax",
            "pmem_stand_in": False,
            "pmem_mode_from": "path",
        }
        ways = _sysfs_interleave(target, sysfs_root)
        if ways is not None:
            facts["pmem_interleave"] = ways
    else:
        path = Path(target)
        fstype, options = _mount_of(path if path.exists() else path.parent, mountinfo)
        opts = options.split(",")
        if "dax" in opts or "dax=always" in opts or "dax=inode" in opts:
            facts = {
                "pmem_mode": "fsdax",
                "pmem_engine": "libpmem",
                "pmem_stand_in": False,
                "pmem_mode_from": "mount options",
            }
        elif fstype == "tmpfs":
            facts = {
                "pmem_mode": "fsdax",
                "pmem_engine": "libpmem",
                "pmem_stand_in": True,
                "pmem_mode_from": "stand-in (tmpfs file)",
            }
        else:
            raise InvalidInput(
                f"{target} is not persistent memory: give a /dev/daxX.Y device, a file on a filesystem "
                f"mounted with -o dax, or (as a stand-in) a file on tmpfs; "
                f"it is on {fstype or 'an unknown mount'}"
            )
    found = _from_ndctl(target, _ndctl(run)) if not facts["pmem_stand_in"] else {}
    if found:
        facts.update({k: v for k, v in found.items() if v is not None}, pmem_mode_from="ndctl")
    return facts


def pmem_engine(facts: dict[str, Any], engine: str | None) -> str:
    """The engine of a pmem sweep: ``engine`` if given and usable on the target, else the mode's."""
    if engine in (None, "", "auto"):
        return str(facts["pmem_engine"])
    if engine not in PMEM_ENGINES:
        raise InvalidInput(f"class pmem uses engine libpmem or dev-dax, not {engine!r}")
    if (engine == "dev-dax") != (facts["pmem_mode"] == "devdax"):
        raise InvalidInput(f"engine {engine} does not fit a {facts['pmem_mode']} target")
    return engine


def stand_in_env(facts: dict[str, Any]) -> dict[str, str] | None:
    """Environment the fio runs need: PMDK's force switch for the tmpfs stand-in, else nothing."""
    return dict(STAND_IN_ENV) if facts.get("pmem_stand_in") else None


def check_devdax(target: str, destroy_data: bool) -> None:
    """A device-DAX device cannot be checked for data: writing to it needs ``--destroy-data``."""
    if not destroy_data:
        raise UnsafeTarget(
            f"refusing to write to {target}: a device-DAX namespace's contents cannot be "
            "checked; if its data may be destroyed, run again with --destroy-data"
        )
    if not os.path.exists(target):
        raise InvalidInput(f"no such device-DAX device: {target}")
