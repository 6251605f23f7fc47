"""How a sweep measures, parsed and validated once.

:class:`SweepSettings` is built from what a user typed (``runtime="1s"``, ``size="256MiB"``,
``engine="auto"``; a bare number is seconds) or from typed values (``runtime_ms=1000``,
``size_bytes=...``), and holds typed values only: durations in whole milliseconds (fio
truncates fractional seconds, so milliseconds are what a job file gets), sizes in bytes,
the engine or ``None`` for "probe".  It owns every check that needs no device: the device class, the CSD path,
the NVMe-oF target, the RAID facts, the quality options and the fio server address.
Everything downstream (:mod:`collectors.sweep.run`, :mod:`collectors.sweep.points`) trusts it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Final

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from collectors.devices import validate_device_class
from collectors.devices.pmem import PMEM_ENGINES
from collectors.devices.csd import CSD_PATHS
from collectors.devices.nvmeof import NvmeofTarget
from collectors.devices.raid import user_raid_metadata
from collectors.fio.engines import check_engine
from collectors.fio.jobs import check_passes, check_runtime_ms, check_span
from collectors.fio.runner import parse_remote
from collectors.sweep.steady import WARMUP_MS
from collectors.sweep.quality import STEADY_RULES
from modeling.errors import InvalidInput
from modeling.units import format_duration_ms, parse_duration_ms, parse_size

# what a user types ("runtime": "1s", numbers are seconds) -> the typed field and its parser
_TEXT_FIELDS: Final[dict[str, tuple[str, Callable[[Any], int]]]] = {
    "runtime": ("runtime_ms", parse_duration_ms),
    "ramp": ("ramp_ms", parse_duration_ms),
    "steady_state_window": ("steady_state_window_ms", parse_duration_ms),
    "steady_state_max": ("steady_state_max_ms", parse_duration_ms),
    "size": ("size_bytes", parse_size),
    "offset": ("offset_bytes", parse_size),
}


class RaidFacts(BaseModel):
    """What a user says about a RAID the host cannot inspect (``--raid-*``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    level: str | int | None = None
    members: str | int | None = None
    chunk: str | int | None = None
    kind: str | None = None
    controller: str | None = None
    vendor: str | None = None

    def given(self) -> dict[str, Any]:
        """The facts that were given, as keyword arguments of the RAID metadata readers."""
        return self.model_dump(exclude_none=True)


def nvmeof_target(transport: str | None, address: str | None, port: int, nqn: str | None,
                  nsid: int) -> NvmeofTarget | None:
    """The NVMe-oF target named by the ``--nvmeof-*`` options, or None when none was given."""
    if not (address or nqn or transport):
        return None
    if not (address and nqn):
        raise InvalidInput("attaching NVMe-oF needs --nvmeof-address and --nvmeof-nqn")
    try:
        return NvmeofTarget.model_validate(
            {"transport": transport or "tcp", "address": address, "port": port, "nqn": nqn, "nsid": nsid})
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err.get("loc", ()))
        raise InvalidInput(f"invalid NVMe-oF target: {field}: {err['msg']}") from None


class SweepSettings(BaseModel):
    """How a sweep measures: class, target, engine, timing, span and quality options.

    Durations are accepted as ``"500ms"``/``"1s"``/seconds and stored in milliseconds,
    sizes as ``"256MiB"``/bytes and stored in bytes; invalid settings raise
    :class:`~modeling.errors.InvalidInput` when the object is built.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str = ""
    device_class: str = "ssd"
    engine: str | None = None                  # None: probe io_uring, then libaio
    runtime_ms: int = 1000                     # given as runtime="1s"
    ramp_ms: int = Field(0, ge=0)             # ramp="0ms"
    size_bytes: int = 256 * 1024 * 1024        # size="256MiB": the span (a file is created at it)
    offset_bytes: int = Field(0, ge=0)        # offset="0": start of the span
    remote: str | None = None                  # HOST:PORT of a fio --server
    destroy_data: bool = False
    repeats: int = 1
    precondition: bool = False
    precondition_passes: int = 2
    steady_state: bool = False
    steady_state_rule: str = "fio"             # "fio" (fio's steadystate) or "pts" (rounds)
    steady_state_window_ms: int = Field(5000, ge=0)   # steady_state_window="5s": fio ss_dur
    steady_state_max_ms: int = 30_000                 # steady_state_max="30s": runtime cap meanwhile
    steady_state_rounds: int = 25              # PTS rule: round cap
    csd_path: str | None = None                # external, internal or concurrent (class csd)
    internal_target: str | None = None         # path inside a CSD for internal/concurrent
    nvmeof: NvmeofTarget | None = None         # an NVMe-oF namespace to attach
    raid: RaidFacts | None = None              # user-given RAID facts (class raid)
    point_timeout_s: float = 600.0
    open_loop_warmup_ms: int = Field(WARMUP_MS, ge=0, le=60_000)  # collectors.sweep.steady
    fio: str | None = None                     # the fio binary (default: fio on PATH)
    spdk_plugin: str | None = None             # SPDK's fio plugin (default: usual places)

    @field_validator("device_class")
    @classmethod
    def _class(cls, value: str) -> str:
        return validate_device_class(value)

    @field_validator("engine", mode="before")
    @classmethod
    def _engine(cls, value: str | None) -> str | None:
        return check_engine(value)

    @field_validator("repeats")
    @classmethod
    def _repeats(cls, value: int) -> int:
        if not 1 <= value <= 100:
            raise InvalidInput("--repeats must be between 1 and 100")
        return value

    @field_validator("precondition_passes")
    @classmethod
    def _passes(cls, value: int) -> int:
        return check_passes(value)

    @field_validator("runtime_ms", "steady_state_max_ms")
    @classmethod
    def _runtime(cls, value: int) -> int:
        return check_runtime_ms(value)  # the steady-state cap is the job's runtime meanwhile

    @field_validator("size_bytes")
    @classmethod
    def _span(cls, value: int) -> int:
        return check_span(value)

    @field_validator("steady_state_rounds")
    @classmethod
    def _rounds(cls, value: int) -> int:
        if not 5 <= value <= 1000:
            raise InvalidInput("steady-state rounds must be between 5 (one window) and 1000")
        return value

    @field_validator("steady_state_rule")
    @classmethod
    def _rule(cls, value: str) -> str:
        if value not in STEADY_RULES:
            raise InvalidInput(f"steady-state rule must be one of {', '.join(STEADY_RULES)}")
        return value

    @field_validator("csd_path")
    @classmethod
    def _csd_path(cls, value: str | None) -> str | None:
        if value is not None and value not in CSD_PATHS:
            raise InvalidInput(f"--csd-path must be one of {', '.join(CSD_PATHS)}")
        return value

    @field_validator("remote")
    @classmethod
    def _remote(cls, value: str | None) -> str | None:
        if value:
            parse_remote(value)
        return value or None

    @field_validator("fio", "spdk_plugin")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        return value or None  # an empty SSDPREDICT_FIO means "not configured"

    @model_validator(mode="before")
    @classmethod
    def _parse_text(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name, (field, parse) in _TEXT_FIELDS.items():
            if name in data:
                if field in data:
                    raise InvalidInput(f"give {name} or {field}, not both")
                data[field] = parse(data.pop(name))
        # a CSD measured without --csd-path is measured from the host: its external path
        if data.get("device_class") == "csd" and data.get("csd_path") is None:
            data["csd_path"] = "external"
        return data

    @model_validator(mode="after")
    def _consistent(self) -> SweepSettings:
        if self.nvmeof is None and not self.target:
            raise InvalidInput(
                "--target is required (a file or block device), or --nvmeof-address/--nvmeof-nqn")
        if self.csd_path in ("internal", "concurrent") and not self.remote:
            raise InvalidInput(f"--csd-path {self.csd_path} needs --remote HOST:PORT of the drive's "
                               "fio server")
        if (self.engine in PMEM_ENGINES) != (self.device_class == "pmem") and self.engine is not None:
            raise InvalidInput("engines libpmem and dev-dax are for --class pmem, whose sweeps use only them")
        if self.raid is not None and self.raid.given():
            if self.device_class != "raid":
                raise InvalidInput("--raid-* options need --class raid")
            if "level" in self.raid.given():
                user_raid_metadata(**self.raid.given())  # fail before measuring; md arrays are read later
        return self

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:  # wrong types from a library caller: one line, like the checks
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err.get("loc", ()))
            raise InvalidInput(f"invalid sweep setting {field}: {err['msg']}") from None

    @property
    def job_remote(self) -> str | None:
        """The fio server the jobs run on (a CSD's external path is the host's own device)."""
        return None if self.csd_path == "external" else self.remote

    def identity(self) -> dict[str, Any]:
        """The settings that change what is measured (so they are part of the sweep key).

        Its shape is that of the sweeps stored so far, so that they are still found and
        resumed: durations and sizes as numbers, the steady-state window and cap as text.
        """
        if self.nvmeof is not None:
            target: str | None = None  # the attached /dev/nvmeXnY name may differ between attaches
        elif not self.remote and self.target:
            target = os.path.abspath(self.target)  # same file from another directory
        else:
            target = self.target
        return {
            "target": target, "engine": self.engine, "runtime": self.runtime_ms, "ramp": self.ramp_ms,
            "size": self.size_bytes, "offset": self.offset_bytes, "remote": self.remote,
            "repeats": self.repeats, "precondition": self.precondition,
            "precondition_passes": self.precondition_passes, "steady_state": self.steady_state,
            "steady_state_rule": self.steady_state_rule,
            "steady_state_window": format_duration_ms(self.steady_state_window_ms),
            "steady_state_max": format_duration_ms(self.steady_state_max_ms),
            "steady_state_rounds": self.steady_state_rounds, "csd_path": self.csd_path,
            "internal_target": self.internal_target,
            "nvmeof": self.nvmeof.model_dump() if self.nvmeof is not None else None,
        }
