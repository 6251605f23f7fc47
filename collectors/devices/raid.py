"""RAID metadata: Linux md from sysfs (plus ``mdadm --detail`` where installed), or user-given.

md arrays describe themselves in ``/sys/block/mdX/md/`` (``level``, ``raid_disks``,
``chunk_size``, ``layout``, ``metadata_version``, one ``dev-*`` folder per member whose
``block`` link names the member device, with ``slot`` and ``state``).  Hardware RAID
controllers, GPU-assisted RAID (e.g. GRAID SupremeRAID) and software storage OSes (e.g.
PoseidonOS) show the host only a plain block device, so their metadata is given by the
user.  Every function takes the sysfs root and the command runner as parameters so the
command boundary can be tested without an md array.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from modeling.errors import InvalidInput
from modeling.workload import parse_size

Runner = Callable[..., subprocess.CompletedProcess]

RAID_KINDS: tuple[str, ...] = ("md", "hardware", "gpu", "software")
RAID_LEVELS: tuple[str, ...] = (
    "raid0", "raid1", "raid4", "raid5", "raid6", "raid10", "raid50", "raid60", "linear", "jbod",
)
_MD_NAME_RE = re.compile(r"^md[A-Za-z0-9_]*$")
_MEMBER_RE = re.compile(r"^[A-Za-z0-9._:/-]{1,128}$")
_TEXT_RE = re.compile(r"^[\w .,:/()+-]{1,128}$")


def normalize_level(level: str | int) -> str:
    """``5``, ``RAID5``, ``raid-5`` -> ``raid5``; raises ``InvalidInput`` for unknown levels."""
    text = str(level).strip().lower().replace("-", "").replace(" ", "")
    if text.isdigit():
        text = f"raid{text}"
    if text not in RAID_LEVELS:
        raise InvalidInput(f"unknown RAID level {level!r}; use one of {', '.join(RAID_LEVELS)}")
    return text


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def md_name(device_path: str) -> str:
    """The kernel name (``md0``) of an md device path (``/dev/md0``, ``/dev/md/name``)."""
    real = os.path.realpath(device_path) if os.path.exists(device_path) else device_path
    name = Path(real).name
    if not _MD_NAME_RE.match(name):
        raise InvalidInput(f"{device_path} is not a Linux md device (expected /dev/mdN)")
    return name


def is_md_device(device_path: str, *, sysfs_root: Path = Path("/sys")) -> bool:
    """Whether ``device_path`` is an md array the kernel knows."""
    try:
        name = md_name(device_path)
    except InvalidInput:
        return False
    return (sysfs_root / "block" / name / "md").is_dir()


def _sysfs_members(block: Path) -> list[dict[str, Any]]:
    members = []
    for dev_dir in sorted((block / "md").glob("dev-*")):
        link = dev_dir / "block"
        name = Path(os.readlink(link)).name if link.is_symlink() else dev_dir.name[len("dev-"):]
        slot = _read(dev_dir / "slot")
        members.append({"device": name, "slot": _int(slot), "state": _read(dev_dir / "state")})
    if not members:  # older kernels / odd layouts: the slaves/ folder still lists members
        slaves = sorted((block / "slaves").glob("*"))
        members = [{"device": p.name, "slot": None, "state": None} for p in slaves]
    members.sort(key=lambda m: (m["slot"] is None, m["slot"] if m["slot"] is not None else 0, m["device"]))
    return members


def parse_mdadm_detail(text: str) -> dict[str, Any]:
    """The useful fields of ``mdadm --detail`` output (level, devices, chunk, layout, uuid...)."""
    fields: dict[str, str] = {}
    members: list[dict[str, Any]] = []
    in_table = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Number") and "RaidDevice" in stripped:
            in_table = True
            continue
        if in_table:
            parts = stripped.split()
            if parts and parts[-1].startswith("/dev/"):
                # "0  8  16  0  active sync  /dev/sdb": RaidDevice is the 4th column ("-" for spares)
                slot = int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else None
                state = " ".join(parts[4:-1]) if len(parts) > 5 else None
                members.append({"device": Path(parts[-1]).name, "slot": slot, "state": state})
            continue
        key, sep, value = stripped.partition(" : ")
        if sep:
            fields[key.strip()] = value.strip()
    out: dict[str, Any] = {}
    if "Raid Level" in fields:
        out["raid_level"] = fields["Raid Level"].lower()
    if _int(fields.get("Raid Devices")) is not None:
        out["raid_disks"] = int(fields["Raid Devices"])
    if fields.get("Chunk Size"):
        try:
            out["raid_chunk_bytes"] = parse_size(fields["Chunk Size"])
        except ValueError:
            pass
    for src, dst in (("Layout", "raid_layout"), ("UUID", "md_uuid"), ("Version", "md_metadata_version"),
                     ("State", "md_state")):
        if fields.get(src):
            out[dst] = fields[src]
    if members:
        out["raid_members"] = [m["device"] for m in sorted(
            members, key=lambda m: (m["slot"] is None, m["slot"] or 0, m["device"]))]
        out["raid_member_states"] = {m["device"]: m["state"] for m in members}
    return out


def md_metadata(
    device_path: str,
    *,
    sysfs_root: Path = Path("/sys"),
    run: Runner = subprocess.run,
    use_mdadm: bool = True,
) -> dict[str, Any]:
    """Level, members, chunk size, layout and size of an md array from sysfs (+ ``mdadm --detail``).

    sysfs is authoritative; ``mdadm --detail`` adds the UUID, metadata version and state
    when it is installed and allowed to read the array (it usually needs root).
    """
    name = md_name(device_path)
    block = sysfs_root / "block" / name
    md = block / "md"
    if not md.is_dir():
        raise InvalidInput(f"{device_path} is not a Linux md array ({md} does not exist)")
    level = _read(md / "level")
    if not level:
        raise InvalidInput(f"{device_path}: md array has no RAID level yet ({md / 'level'} is empty)")
    members = _sysfs_members(block)
    chunk = _int(_read(md / "chunk_size"))
    sectors = _int(_read(block / "size"))
    meta: dict[str, Any] = {
        "raid_kind": "md",
        "md_device": name,
        "raid_level": level,
        "raid_disks": _int(_read(md / "raid_disks")) or len(members),
        "raid_members": [m["device"] for m in members],
        "raid_chunk_bytes": chunk or None,  # 0 for levels without striping (raid1)
    }
    for fname, key in (("layout", "raid_layout"), ("metadata_version", "md_metadata_version"),
                       ("array_state", "md_state")):
        value = _read(md / fname)
        if value:
            meta[key] = value
    if sectors is not None:
        meta["size_bytes"] = sectors * 512  # sysfs sizes are in 512-byte sectors, whatever the block size
    meta = {k: v for k, v in meta.items() if v is not None}
    if use_mdadm:
        for key, value in (_mdadm_detail(f"/dev/{name}", run) or {}).items():
            meta.setdefault(key, value)  # sysfs wins where both know a fact
    return meta


def _mdadm_detail(device: str, run: Runner) -> dict[str, Any] | None:
    try:
        proc = run(["mdadm", "--detail", device], capture_output=True, text=True, timeout=10)
    except (FileNotFoundError, PermissionError, subprocess.TimeoutExpired):
        return None  # not installed, or hung: sysfs already gave the essentials
    if proc.returncode != 0:
        return None  # typically "Permission denied" without root
    return parse_mdadm_detail(proc.stdout)


def user_raid_metadata(
    *,
    level: str | int,
    members: int | str | Sequence[str] | None = None,
    chunk: int | str | None = None,
    controller: str | None = None,
    vendor: str | None = None,
    kind: str = "hardware",
) -> dict[str, Any]:
    """Validated metadata of a RAID the host cannot inspect (hardware, GPU-assisted, software)."""
    if kind not in RAID_KINDS:
        raise InvalidInput(f"unknown RAID kind {kind!r}; use one of {', '.join(RAID_KINDS)}")
    meta: dict[str, Any] = {"raid_kind": kind, "raid_level": normalize_level(level)}
    if members is not None:
        if isinstance(members, int) or (isinstance(members, str) and members.strip().isdigit()):
            count = int(members)
            if not 1 <= count <= 1024:
                raise InvalidInput(f"RAID member count must be 1..1024, got {count}")
            meta["raid_disks"] = count
        else:
            names = [m.strip() for m in (members.split(",") if isinstance(members, str) else members)]
            names = [n for n in names if n]
            bad = [n for n in names if not _MEMBER_RE.match(n)]
            if bad or not names:
                raise InvalidInput(f"invalid RAID member names {bad or members!r}")
            meta["raid_members"] = names
            meta["raid_disks"] = len(names)
    if chunk is not None:
        try:
            size = parse_size(chunk)
        except ValueError as exc:
            raise InvalidInput(f"invalid RAID chunk size: {exc}") from None
        if size < 512 or size % 512:
            raise InvalidInput(f"RAID chunk size must be a multiple of 512 bytes, got {size}")
        meta["raid_chunk_bytes"] = size
    for key, value in (("raid_controller", controller), ("raid_vendor", vendor)):
        if value is not None:
            if not _TEXT_RE.match(value):
                raise InvalidInput(f"invalid {key.replace('_', ' ')} {value!r}: 1-128 plain characters")
            meta[key] = value
    return meta


def raid_metadata(
    target: str,
    *,
    user: dict[str, Any] | None = None,
    sysfs_root: Path = Path("/sys"),
    run: Runner = subprocess.run,
) -> dict[str, Any]:
    """Metadata for ``--class raid``: md arrays from sysfs, other RAIDs from the user's values.

    ``user`` holds :func:`user_raid_metadata` keyword arguments (``level``, ``members``,
    ``chunk``, ``controller``, ``vendor``, ``kind``).  For an md array the user may add
    controller/vendor notes; the array's own facts come from the kernel.
    """
    user = {k: v for k, v in (user or {}).items() if v is not None}
    if is_md_device(target, sysfs_root=sysfs_root):
        meta = md_metadata(target, sysfs_root=sysfs_root, run=run)
        for key in ("controller", "vendor"):
            if key in user:
                extra = user_raid_metadata(level=meta["raid_level"], **{key: user[key]}, kind="md")
                meta[f"raid_{key}"] = extra[f"raid_{key}"]
        return meta
    if "level" not in user:
        raise InvalidInput(
            f"{target} is not a Linux md array: give the RAID's metadata (at least --raid-level)"
        )
    return user_raid_metadata(**user)
