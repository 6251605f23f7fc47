"""The workload vector: the one input type shared by collectors, models, traces and the API.

A device is a black box ``p = F(wc)``; ``wc`` is a :class:`Workload`.  The four basic
characteristics are the published ones (Li & Huang, MASCOTS 2010):

* ``write_ratio`` -- fraction of requests that are writes, 0..1 (fio ``rwmixwrite`` / 100)
* ``queue_depth`` -- outstanding I/Os per submitting job, 1..4096 (fio ``iodepth``)
* ``request_size`` -- bytes per request, >= 512, a multiple of 512, <= 64 MiB (fio ``bs``)
* ``randomness`` -- fraction of requests not sequential to the previous one, 0..1
  (fio ``percentage_random`` / 100)

The extended fields matter on SSDs and over fabrics:

* ``numjobs`` -- parallel submitters, 1..1024 (fio ``numjobs``), default 1
* ``read_size`` / ``write_size`` -- per-direction request sizes (fio ``bs=R,W``), default
  ``request_size``
* ``read_randomness`` / ``write_randomness`` -- per-direction randomness (fio
  ``percentage_random=R,W``), default ``randomness``

A ``Workload`` is immutable and validated on construction; invalid values raise
``pydantic.ValidationError`` naming the field (the API turns that into a 422, the CLI into
a one-line message).  Sizes accept integers (bytes) or fio-style strings such as ``16k``,
``4KiB`` or ``1m`` (binary multiples, as fio uses them).

Metric names (:data:`METRICS`) are used verbatim as CSV columns, JSON keys and model names.

The workload space is split into eight *regions*, {read, write}-dominant x {random,
sequential} x {small (<= 32 KiB), large}; :attr:`Workload.region` names a workload's
region, :data:`REGIONS` lists them all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Final
from collections.abc import Mapping

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

KIB: Final = 1024
MIB: Final = 1024 * KIB
MAX_REQUEST_SIZE: Final = 64 * MIB

METRICS: Final[tuple[str, ...]] = ("latency_mean_us", "latency_p99_us", "bandwidth_mib_s", "iops")
"""The predicted metrics, in canonical order."""

METRIC_UNITS: Final[Mapping[str, str]] = {
    "latency_mean_us": "us",
    "latency_p99_us": "us",
    "bandwidth_mib_s": "MiB/s",
    "iops": "IO/s",
}

BASIC_FIELDS: Final[tuple[str, ...]] = ("write_ratio", "queue_depth", "request_size", "randomness")
"""The four published workload characteristics."""

EXTENDED_FIELDS: Final[tuple[str, ...]] = (
    "numjobs",
    "read_size",
    "write_size",
    "read_randomness",
    "write_randomness",
)
WORKLOAD_FIELDS: Final[tuple[str, ...]] = BASIC_FIELDS + EXTENDED_FIELDS
"""Every workload field, in canonical (CSV column) order."""

SIZE_FIELDS: Final = frozenset({"request_size", "read_size", "write_size"})

SMALL_REQUEST_MAX: Final = 32 * KIB
"""Requests up to this size count as *small* for the workload regions."""

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_SIZE_MULT = {"": 1, "k": KIB, "m": MIB, "g": 1024 * MIB, "t": 1024 * 1024 * MIB}


def parse_size(value: Any) -> int:
    """Parse a size in bytes from an int or a string like ``4096``, ``16k``, ``4KiB``, ``1m``."""
    if isinstance(value, bool):
        raise ValueError("size must be a number of bytes or a string like '16k'")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"size must be a whole number of bytes, got {value}")
        return int(value)
    if isinstance(value, str):
        match = _SIZE_RE.match(value)
        if not match:
            raise ValueError(f"not a size: {value!r} (use bytes or a suffix k, m, g: '16k', '1MiB')")
        number, unit, _ = match.groups()
        size = float(number) * _SIZE_MULT[unit.lower()]
        if not size.is_integer():
            raise ValueError(f"size {value!r} is not a whole number of bytes")
        return int(size)
    raise ValueError(f"size must be a number of bytes or a string like '16k', got {type(value).__name__}")


def format_size(size: int) -> str:
    """Format a byte count the way fio accepts it (``4k``, ``1m``, ``1536``)."""
    for suffix, mult in (("g", 1024 * MIB), ("m", MIB), ("k", KIB)):
        if size >= mult and size % mult == 0:
            return f"{size // mult}{suffix}"
    return str(size)


def _size_or_none(value: Any) -> int | None:
    return None if value is None else parse_size(value)


SizeBytes = Annotated[
    int,
    BeforeValidator(parse_size),
    Field(ge=512, le=MAX_REQUEST_SIZE, multiple_of=512, description="bytes; or '16k', '1MiB'"),
]
# The limits sit inside the union: on ``int | None`` an explicit null reached the ``ge``
# check and raised TypeError (a 500 in the API) instead of meaning "use the default".
OptionalSize = Annotated[SizeBytes | None, BeforeValidator(_size_or_none)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]


@dataclass(frozen=True)
class Region:
    """One of the eight workload-specific regions."""

    name: str
    write_dominant: bool
    random: bool
    small: bool

    @property
    def description(self) -> str:
        """A human-readable definition of the region."""
        rw = "write_ratio > 0.5" if self.write_dominant else "write_ratio <= 0.5"
        rnd = "randomness >= 0.5" if self.random else "randomness < 0.5"
        size = (
            f"request_size <= {SMALL_REQUEST_MAX // KIB} KiB"
            if self.small
            else f"request_size > {SMALL_REQUEST_MAX // KIB} KiB"
        )
        return f"{rw}, {rnd}, {size}"


REGIONS: Final[tuple[Region, ...]] = tuple(
    Region(
        name=f"{'write' if w else 'read'}-{'random' if r else 'sequential'}-{'small' if s else 'large'}",
        write_dominant=w,
        random=r,
        small=s,
    )
    for w in (False, True)
    for r in (True, False)
    for s in (True, False)
)
REGION_NAMES: Final[tuple[str, ...]] = tuple(r.name for r in REGIONS)


def region_for(write_ratio: float, randomness: float, request_size: float) -> str:
    """Name the region of a workload given its three region-defining characteristics."""
    w = "write" if write_ratio > 0.5 else "read"
    r = "random" if randomness >= 0.5 else "sequential"
    s = "small" if request_size <= SMALL_REQUEST_MAX else "large"
    return f"{w}-{r}-{s}"


class Workload(BaseModel):
    """A workload vector; see the module docstring for the fields and their units."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        json_schema_extra={
            "examples": [
                {"write_ratio": 0.3, "queue_depth": 8, "request_size": 16384, "randomness": 1.0}
            ]
        },
    )

    write_ratio: Fraction = Field(description="fraction of requests that are writes, 0..1")
    queue_depth: int = Field(ge=1, le=4096, strict=False, description="outstanding I/Os per job")
    request_size: SizeBytes
    randomness: Fraction = Field(description="fraction of non-sequential requests, 0..1")
    numjobs: int = Field(1, ge=1, le=1024, description="parallel submitting jobs")
    read_size: OptionalSize = Field(None, description="read request size; default request_size")
    write_size: OptionalSize = Field(None, description="write request size; default request_size")
    read_randomness: Fraction | None = Field(None, description="default randomness")
    write_randomness: Fraction | None = Field(None, description="default randomness")

    @model_validator(mode="before")
    @classmethod
    def _reject_bools(cls, data: Any) -> Any:
        # pydantic's lax mode reads True as 1; a boolean is never a meaningful workload value.
        if isinstance(data, Mapping):
            for key, value in data.items():
                if isinstance(value, bool):
                    raise ValueError(f"{key}: a boolean is not a valid value")
        return data

    @model_validator(mode="after")
    def _fill_defaults(self) -> Workload:
        # frozen model: defaults derived from other fields are set once, here.
        for field, source in (
            ("read_size", "request_size"),
            ("write_size", "request_size"),
            ("read_randomness", "randomness"),
            ("write_randomness", "randomness"),
        ):
            if getattr(self, field) is None:
                object.__setattr__(self, field, getattr(self, source))
        return self

    @property
    def region(self) -> str:
        """The name of the workload-specific region this workload falls in."""
        return region_for(self.write_ratio, self.randomness, self.request_size)

    @property
    def outstanding_io(self) -> int:
        """Total I/Os in flight: queue depth per job times jobs."""
        return self.queue_depth * self.numjobs

    def as_row(self) -> dict[str, float | int]:
        """All fields (defaults filled in) as a flat dict in :data:`WORKLOAD_FIELDS` order."""
        return {name: getattr(self, name) for name in WORKLOAD_FIELDS}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Workload:
        """Build a workload from a mapping that may hold extra (metric) keys and NaN gaps."""
        values: dict[str, Any] = {}
        for name in WORKLOAD_FIELDS:
            value = row.get(name)
            if value is None or (isinstance(value, float) and value != value):
                continue
            if name in ("queue_depth", "numjobs") and isinstance(value, float) and value.is_integer():
                value = int(value)
            values[name] = value
        return cls(**values)
