"""NVMe-oF volumes: attach with ``nvme connect``, find the namespace's block device, detach.

Also the SPDK fio plugin route (``ioengine=spdk`` with a transport-id ``filename``),
which reaches the target from user space without attaching a kernel block device.
Commands go through an injectable runner and sysfs is read under an injectable root, so
the command boundary is testable on machines without a fabric.
"""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from modeling.errors import DeviceUnavailable, InvalidInput

Runner = Callable[..., subprocess.CompletedProcess]

# nqn.YYYY-MM.reverse.domain[:anything-without-spaces], or the spec's UUID form.
_NQN_RE = re.compile(
    r"^nqn\.(19|20)\d\d-(0[1-9]|1[0-2])\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+"
    r"(:[A-Za-z0-9._:-]+)?$"
)
_UUID_NQN_RE = re.compile(
    r"^nqn\.2014-08\.org\.nvmexpress:uuid:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
    r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)
_HOST_LABEL_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_NS_RE = re.compile(r"^nvme(\d+)n(\d+)$")
_PATH_NS_RE = re.compile(r"^nvme(\d+)c(\d+)n(\d+)$")  # hidden per-path node under native multipath
MAX_NQN = 223  # NVMe base specification: NQNs are at most 223 bytes


def validate_nqn(nqn: str) -> str:
    """Return ``nqn`` if it is a well-formed NVMe Qualified Name, else raise ``ValueError``."""
    if len(nqn) > MAX_NQN or not (_UUID_NQN_RE.match(nqn) or _NQN_RE.match(nqn)):
        raise ValueError(
            f"invalid NQN {nqn!r}: use nqn.YYYY-MM.reverse.domain:name "
            "(e.g. nqn.2014-08.org.example:disk1) or nqn.2014-08.org.nvmexpress:uuid:<uuid>"
        )
    return nqn


def validate_address(address: str) -> str:
    """Return ``address`` if it is an IPv4/IPv6 address or a DNS host name, else raise ``ValueError``."""
    text = address.strip()
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    labels = text.rstrip(".").split(".")
    bad = not text or len(text) > 253 or not all(_HOST_LABEL_RE.match(lbl) for lbl in labels)
    # an all-digit last label is a mistyped IP address (e.g. 300.1.1.1), never a host name
    if bad or labels[-1].isdigit():
        raise ValueError(f"invalid address {address!r}: use an IP address or a host name")
    return text


class NvmeofTarget(BaseModel):
    """Where an NVMe-oF namespace lives: transport, address, port, subsystem NQN, namespace id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    transport: Literal["tcp", "rdma"] = "tcp"
    address: str
    port: int = Field(4420, ge=1, le=65535)
    nqn: str
    nsid: int = Field(1, ge=1, le=0xFFFFFFFE, description="namespace id inside the subsystem")

    @field_validator("transport", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        return validate_address(value)

    @field_validator("nqn")
    @classmethod
    def _nqn(cls, value: str) -> str:
        return validate_nqn(value.strip())

    @property
    def is_ipv6(self) -> bool:
        """Whether the address is an IPv6 literal."""
        try:
            return ipaddress.ip_address(self.address).version == 6
        except ValueError:
            return False


def connect_command(target: NvmeofTarget) -> list[str]:
    """The ``nvme connect`` command line for ``target``."""
    return ["nvme", "connect", "-t", target.transport, "-a", target.address, "-s", str(target.port),
            "-n", target.nqn]


def disconnect_command(target: NvmeofTarget) -> list[str]:
    """The ``nvme disconnect`` command line for ``target``."""
    return ["nvme", "disconnect", "-n", target.nqn]


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _address_fields(text: str) -> dict[str, str]:
    # sysfs "address" reads like "traddr=10.0.0.2,trsvcid=4420,src_addr=10.0.0.1"
    fields = {}
    for part in text.replace("\n", ",").split(","):
        key, sep, value = part.strip().partition("=")
        if sep:
            fields[key] = value
    return fields


def _controllers(sysfs_root: Path) -> list[Path]:
    seen: dict[str, Path] = {}
    for pattern in ("class/nvme/nvme*", "class/nvme-fabrics/ctl/nvme*"):
        for ctl in sorted(sysfs_root.glob(pattern)):
            if re.fullmatch(r"nvme\d+", ctl.name):
                seen.setdefault(ctl.name, ctl)
    return list(seen.values())


def _matches(ctl: Path, target: NvmeofTarget) -> bool:
    if _read(ctl / "subsysnqn") != target.nqn:
        return False
    transport = _read(ctl / "transport")
    if transport and transport != target.transport:
        return False
    addr = _address_fields(_read(ctl / "address"))
    if "traddr" in addr:
        try:
            same = ipaddress.ip_address(addr["traddr"]) == ipaddress.ip_address(target.address)
        except ValueError:
            same = addr["traddr"] == target.address  # host names: compare as given
        if not same:
            return False
    return "trsvcid" not in addr or addr["trsvcid"] == str(target.port)


def _namespace_of(ctl: Path, target: NvmeofTarget, sysfs_root: Path) -> str | None:
    candidates: list[tuple[str, Path]] = []
    for entry in sorted(ctl.iterdir()):
        if _NS_RE.match(entry.name):
            candidates.append((entry.name, entry))
        else:
            m = _PATH_NS_RE.match(entry.name)
            if m:
                # native multipath: the usable node is the subsystem's head nvme<S>n<N>
                head = _multipath_head(ctl, entry.name, sysfs_root)
                if head is not None:
                    candidates.append((head, entry))
    for name, entry in candidates:
        nsid = _read(entry / "nsid")
        if (nsid or _NS_RE.match(name).group(2)) == str(target.nsid):  # type: ignore[union-attr]
            return name
    return None


def _multipath_head(ctl: Path, path_node: str, sysfs_root: Path) -> str | None:
    m = _PATH_NS_RE.match(path_node)
    assert m is not None
    subsys = ctl / "subsystem"
    if subsys.is_symlink():
        s = re.fullmatch(r"nvme-subsys(\d+)", Path(os.readlink(subsys)).name)
        if s:
            return f"nvme{s.group(1)}n{m.group(3)}"
    return None


def find_namespace(target: NvmeofTarget, *, sysfs_root: Path = Path("/sys")) -> str | None:
    """The ``/dev/nvmeXnY`` of ``target``'s namespace if a controller for it is connected."""
    for ctl in _controllers(sysfs_root):
        if _matches(ctl, target):
            name = _namespace_of(ctl, target, sysfs_root)
            if name is not None:
                return f"/dev/{name}"
    return None


def is_connected(target: NvmeofTarget, *, sysfs_root: Path = Path("/sys")) -> bool:
    """Whether any controller for ``target`` is already connected."""
    return any(_matches(ctl, target) for ctl in _controllers(sysfs_root))


def _run(run: Runner, cmd: list[str], what: str) -> None:
    try:
        proc = run(cmd, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise DeviceUnavailable("nvme-cli is not installed: `apt-get install nvme-cli`") from None
    except subprocess.TimeoutExpired:
        raise DeviceUnavailable(f"{what} did not finish within 60 s") from None
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout or "").strip().splitlines()
        detail = lines[-1] if lines else f"exit status {proc.returncode}"
        raise DeviceUnavailable(f"{what} failed: {detail}")


@contextmanager
def attached(
    target: NvmeofTarget,
    *,
    run: Runner = subprocess.run,
    sysfs_root: Path = Path("/sys"),
    settle_timeout: float = 10.0,
    poll_interval: float = 0.2,
) -> Iterator[str]:
    """Attach ``target`` and yield its ``/dev/nvmeXnY``; detach on exit, also on error.

    A target that is already connected (pre-attached by the user) is used as it is and
    left connected afterwards: we only undo what we did.
    """
    existing = find_namespace(target, sysfs_root=sysfs_root)
    if existing is not None:
        yield existing
        return
    if is_connected(target, sysfs_root=sysfs_root):
        raise DeviceUnavailable(
            f"{target.nqn} is connected but has no namespace with id {target.nsid}"
        )
    _run(run, connect_command(target), f"nvme connect to {target.address}:{target.port}")
    try:
        deadline = time.monotonic() + settle_timeout
        # udev and the kernel publish the namespace a moment after nvme connect returns.
        while (device := find_namespace(target, sysfs_root=sysfs_root)) is None:
            if time.monotonic() >= deadline:
                raise DeviceUnavailable(
                    f"connected to {target.nqn} but namespace {target.nsid} did not appear "
                    f"within {settle_timeout:g} s"
                )
            time.sleep(poll_interval)
        yield device
    except BaseException:
        # Detach, but let the original error through rather than a failed disconnect.
        try:
            _run(run, disconnect_command(target), f"nvme disconnect from {target.nqn}")
        except DeviceUnavailable:
            pass
        raise
    _run(run, disconnect_command(target), f"nvme disconnect from {target.nqn}")


# -- SPDK fio plugin ---------------------------------------------------------------------


def spdk_filename(target: NvmeofTarget) -> str:
    """The SPDK transport-id ``filename`` for ``target``, built from validated parts only.

    e.g. ``trtype=TCP adrfam=IPv4 traddr=10.0.0.2 trsvcid=4420 subnqn=nqn.2014-08.org.example\\:disk1 ns=1``.
    fio splits file names at ``:``, so colons (in the NQN, in IPv6 addresses) are escaped.
    """
    target = NvmeofTarget.model_validate(target.model_dump())  # re-validate: never trust a copy
    parts = [
        f"trtype={target.transport.upper()}",
        f"adrfam={'IPv6' if target.is_ipv6 else 'IPv4'}",
        f"traddr={target.address}",
        f"trsvcid={target.port}",
        f"subnqn={target.nqn}",
        f"ns={target.nsid}",
    ]
    for part in parts:
        _, _, value = part.partition("=")
        # fio and SPDK split on spaces and "="; validation already excludes them, check anyway
        if not value or any(ch.isspace() or ch in "='\"\\" for ch in value):
            raise InvalidInput(f"unsafe SPDK transport id part {part!r}")
    return " ".join(parts).replace(":", "\\:")
