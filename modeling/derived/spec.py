"""A derived device's definition: a plain, checked JSON document (never a pickle).

The catalog keeps it in the device's metadata under ``"derived"``; :func:`parse_spec`
checks every field of a stored or submitted spec and raises ``InvalidInput`` naming it.
"""

from __future__ import annotations

from typing import Any

from modeling.derived.calibrate import parse_calibration
from modeling.derived.fabric import TRANSPORTS, FabricLink
from modeling.derived.raid import LEVELS, RaidLayout
from modeling.errors import InvalidInput
from modeling.store.names import validate_name

KINDS = ("raid", "fabric")
DEVICE_CLASS = {"raid": "raid", "fabric": "nvmeof"}
"""The device class a derived device stands for."""


def _num(spec: dict[str, Any], key: str, low: float, high: float, *, optional: bool = False) -> float | None:
    value = spec.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise InvalidInput(
            f"derived device field {key!r} must be a number in {low:g}..{high:g}, got {value!r}",
            details={"field": key},
        )
    return float(value)


def parse_spec(spec: Any) -> dict[str, Any]:
    """A checked copy of a derived-device spec (``kind`` raid or fabric, its base device, its law)."""
    if not isinstance(spec, dict) or spec.get("kind") not in KINDS:
        raise InvalidInput(
            f"a derived device spec needs kind {' or '.join(KINDS)}", details={"field": "kind"}
        )
    if spec["kind"] == "raid":
        out: dict[str, Any] = {"kind": "raid", "base": validate_name(str(spec.get("base")))}
        level = spec.get("level")
        if level not in LEVELS:
            raise InvalidInput(
                f"RAID level must be one of {', '.join(map(str, LEVELS))}, got {level!r}",
                details={"field": "level"},
            )
        n = int(_num(spec, "members", 1, 256) or 0)
        least = {0: 1, 1: 2, 5: 3, 6: 4, 10: 4}[level]
        if n < least or (level == 10 and n % 2):
            raise InvalidInput(
                f"RAID {level} needs {'an even number of, at least ' if level == 10 else 'at least '}"
                f"{least} members, got {n}",
                details={"field": "members"},
            )
        chunk = int(_num(spec, "chunk", 4096, 64 * 1024 * 1024) or 0)
        if chunk % 4096:
            raise InvalidInput(f"chunk must be a multiple of 4 KiB, got {chunk}", details={"field": "chunk"})
        out.update(
            level=level,
            members=n,
            chunk=chunk,
            ceiling_iops=_num(spec, "ceiling_iops", 1, 1e9, optional=True),
            ceiling_mib_s=_num(spec, "ceiling_mib_s", 1, 1e7, optional=True),
        )
    else:
        out = {"kind": "fabric", "base": validate_name(str(spec.get("base")))}
        if spec.get("transport") not in TRANSPORTS:
            raise InvalidInput(
                f"transport must be one of {', '.join(TRANSPORTS)}", details={"field": "transport"}
            )
        out.update(
            transport=spec["transport"],
            added_latency_us=_num(spec, "added_latency_us", 0, 1e6),
            link_gbps=_num(spec, "link_gbps", 0.1, 10000),
            target_iops=_num(spec, "target_iops", 1, 1e9, optional=True),
        )
    calib = spec.get("calibration")
    if calib is not None:
        out["calibration"] = parse_calibration(calib)
    return out


def law_of(spec: dict[str, Any]) -> RaidLayout | FabricLink:
    """The law object a checked spec describes."""
    if spec["kind"] == "raid":
        return RaidLayout(
            spec["level"], spec["members"], spec["chunk"], spec["ceiling_iops"], spec["ceiling_mib_s"]
        )
    return FabricLink(spec["transport"], spec["added_latency_us"], spec["link_gbps"], spec["target_iops"])
