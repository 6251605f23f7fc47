"""The workload vector: the one input type shared by collectors, models, traces and the API.

A device is a black box ``p = F(wc)``; ``wc`` is a :class:`Workload`.  The four basic
characteristics are the published ones (Li & Huang, MASCOTS 2010):

* ``write_ratio`` -- fraction of requests that are writes, 0..1 (fio ``rwmixwrite`` / 100)
* ``queue_depth`` -- outstanding I/Os per submitting job, 1..4096 (fio ``iodepth``)
* ``request_size`` -- bytes per request, >= 64, a multiple of 64, <= 64 MiB (fio ``bs``)
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

from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, overload
from collections.abc import Mapping

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

# the size grammar lives in modeling.units; re-exported here for the workload's users
from modeling.units import KIB as KIB, MIB as MIB, SIZE_PATTERN as SIZE_PATTERN
from modeling.units import format_size as format_size, parse_size as parse_size

MAX_REQUEST_SIZE: Final = 64 * MIB

METRICS: Final[tuple[str, ...]] = ("latency_mean_us", "latency_p99_us", "bandwidth_mib_s", "iops")
"""The metrics every trained model predicts, in canonical order."""

PERCENTILE_METRICS: Final[tuple[str, ...]] = ("latency_p50_us", "latency_p90_us", "latency_p99_9_us")
"""Further latency percentiles, predicted where the measurements hold them (fio sweeps do)."""

SERVED_METRICS: Final[tuple[str, ...]] = METRICS + PERCENTILE_METRICS
"""Every metric a model may predict, in canonical order."""

PERCENTILE_ORDER: Final[tuple[str, ...]] = (
    "latency_p50_us",
    "latency_p90_us",
    "latency_p99_us",
    "latency_p99_9_us",
)
"""The served latency percentiles, in the order their values must follow."""

PERCENTILE_ANCHOR: Final = "latency_p99_us"
"""The percentile the others are ordered around (every device learns it, and it is the most tuned)."""

LATENCY_METRICS: Final[tuple[str, ...]] = ("latency_mean_us", *PERCENTILE_ORDER)
"""Every latency metric: Little's law scales them together."""

METRIC_UNITS: Final[Mapping[str, str]] = {
    "latency_mean_us": "us",
    "latency_p50_us": "us",
    "latency_p90_us": "us",
    "latency_p99_us": "us",
    "latency_p99_9_us": "us",
    "bandwidth_mib_s": "MiB/s",
    "iops": "IO/s",
}

SMALL_REQUEST_MAX: Final = 32 * KIB
"""Requests up to this size count as *small* for the workload regions."""

@dataclass(frozen=True)
class FieldLimit:
    """One workload field: its kind, limits, default and meaning.

    :data:`WORKLOAD_LIMITS` is the one definition of the workload's fields: the
    :class:`Workload` type, the API's batch schemas (``service/api/schemas/predict.py``)
    and the matrix check (:func:`modeling.workload_matrix.check_matrix`) are built from it.
    """

    name: str
    kind: Literal["fraction", "count", "size"]
    low: float
    high: float
    unit: str
    description: str
    default: float | None = None
    """Constant used when the field is left out (``None``: see ``default_from``)."""
    default_from: str | None = None
    """Field whose value is copied when this one is left out."""

    @property
    def required(self) -> bool:
        """Whether the field has no default."""
        return self.default is None and self.default_from is None

    @property
    def step(self) -> int | None:
        """Values must be a multiple of this (``None`` for fractions)."""
        return {"fraction": None, "count": 1, "size": SIZE_STEP}[self.kind]

    @property
    def python_type(self) -> type:
        """``float`` for fractions, ``int`` for counts and sizes."""
        return float if self.kind == "fraction" else int

    @property
    def allowed(self) -> str:
        """The limits in words, for error messages."""
        if self.kind == "fraction":
            return f"{self.low:g}..{self.high:g}"
        text = f"{int(self.low)}..{int(self.high)}"
        return f"{text}, a multiple of {self.step}" if self.kind == "size" else text

    @property
    def full_description(self) -> str:
        """Meaning, unit and default, as the OpenAPI schema shows it."""
        text = f"{self.description} ({self.unit})" if self.unit else self.description
        if self.default_from is not None:
            text += f"; default {self.default_from}"
        elif self.default is not None:
            text += f"; default {self.default:g}"
        return text

    def constraints(self) -> dict[str, Any]:
        """The pydantic ``Field`` keyword limits of the field."""
        if self.kind == "fraction":
            return {"ge": self.low, "le": self.high, "allow_inf_nan": False}
        limits: dict[str, Any] = {"ge": int(self.low), "le": int(self.high)}
        if self.kind == "size":
            limits["multiple_of"] = SIZE_STEP
        return limits

    def pydantic_field(self, **extra: Any) -> Any:
        """A pydantic ``Field`` with this field's default and description (limits live in the type)."""
        default = ... if self.required else None
        if self.default is not None:
            default = self.python_type(self.default)
        return Field(default, description=self.full_description, **extra)


SIZE_STEP: Final = 64
"""Request sizes are whole multiples of 64 bytes: a CPU cache line, the unit persistent memory
(class ``pmem``, fio's libpmem and dev-dax engines) is written in.  Block devices need whole
sectors (512 B or 4 KiB) for direct I/O; fio refuses smaller requests there with a clear error."""

WORKLOAD_LIMITS: Final[tuple[FieldLimit, ...]] = (
    FieldLimit("write_ratio", "fraction", 0.0, 1.0, "", "fraction of requests that are writes, 0..1"),
    FieldLimit("queue_depth", "count", 1, 4096, "I/Os", "outstanding I/Os per job"),
    FieldLimit(
        "request_size", "size", SIZE_STEP, MAX_REQUEST_SIZE, "bytes", "request size; or '16k', '1MiB'"
    ),
    FieldLimit("randomness", "fraction", 0.0, 1.0, "", "fraction of non-sequential requests, 0..1"),
    FieldLimit("numjobs", "count", 1, 1024, "jobs", "parallel submitting jobs", default=1),
    FieldLimit(
        "read_size", "size", SIZE_STEP, MAX_REQUEST_SIZE, "bytes", "read request size",
        default_from="request_size",
    ),
    FieldLimit(
        "write_size", "size", SIZE_STEP, MAX_REQUEST_SIZE, "bytes", "write request size",
        default_from="request_size",
    ),
    FieldLimit(
        "read_randomness", "fraction", 0.0, 1.0, "", "randomness of reads", default_from="randomness"
    ),
    FieldLimit(
        "write_randomness", "fraction", 0.0, 1.0, "", "randomness of writes", default_from="randomness"
    ),
)
"""Every workload field, in canonical (CSV column) order: the one table of its limits."""

LIMITS: Final[Mapping[str, FieldLimit]] = {f.name: f for f in WORKLOAD_LIMITS}

WORKLOAD_FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in WORKLOAD_LIMITS)
"""Every workload field, in canonical (CSV column) order."""

BASIC_FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in WORKLOAD_LIMITS if f.required)
"""The four published workload characteristics (the required fields)."""

EXTENDED_FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in WORKLOAD_LIMITS if not f.required)

SIZE_FIELDS: Final = frozenset(f.name for f in WORKLOAD_LIMITS if f.kind == "size")


def _size_or_none(value: Any) -> int | None:
    return None if value is None else parse_size(value)


def _limits(name: str) -> Any:
    """The pydantic constraints of a workload field, from :data:`WORKLOAD_LIMITS`."""
    return Field(**LIMITS[name].constraints())


def _spec(name: str) -> Any:
    """The pydantic default and description of a workload field, from :data:`WORKLOAD_LIMITS`."""
    return LIMITS[name].pydantic_field()


def _size_schema(name: str, *, nullable: bool = False) -> WithJsonSchema:
    """The request schema of a size field: whole bytes within the table's limits, or a size string.

    The field's type is ``int`` (what a validated workload holds, and what responses
    show); the input also takes ``"16k"``, as the CLI and CSV files do.
    """
    limit = LIMITS[name]
    number = {"type": "integer", "minimum": int(limit.low), "maximum": int(limit.high),
              "multipleOf": SIZE_STEP}
    # The pattern is the syntax; the bounds and the 64-byte step apply to the string's value too
    # (a regex cannot say "a multiple of 64"), which the format names and the description says.
    text = {"type": "string", "pattern": SIZE_PATTERN, "format": "size", "examples": ["4k", "16KiB", "1m"],
            "description": f"a size string whose value is {limit.allowed} bytes"}
    return WithJsonSchema({"anyOf": [number, text, *([{"type": "null"}] if nullable else [])]},
                          mode="validation")


_Size = BeforeValidator(parse_size)
# The limits sit inside the union: on ``int | None`` an explicit null reached the ``ge``
# check and raised TypeError (a 500 in the API) instead of meaning "use the default".
_OptionalSize = BeforeValidator(_size_or_none)


def fill_defaults(w: np.ndarray) -> np.ndarray:
    """Fill the NaN optional fields of an ``(n, 9)`` workload matrix in place, from the table.

    The one default rule: a constant (``numjobs`` 1) or a copy of another field
    (per-direction sizes and randomness from the basic ones).  :class:`Workload` fills its
    left-out fields through this same function.
    """
    for i, limit in enumerate(WORKLOAD_LIMITS):
        if limit.required:
            continue
        col = w[:, i]
        gap = np.isnan(col)
        if limit.default_from is not None:
            col[gap] = w[gap, WORKLOAD_FIELDS.index(limit.default_from)]
        else:
            col[gap] = limit.default
    return w


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


@overload
def region_code(write_ratio: float, randomness: float, request_size: float) -> int: ...
@overload
def region_code(write_ratio: np.ndarray, randomness: np.ndarray, request_size: np.ndarray) -> np.ndarray: ...
def region_code(write_ratio: Any, randomness: Any, request_size: Any) -> Any:
    """Index into :data:`REGION_NAMES` of workloads given their three region-defining fields.

    The one region rule.  Plain arithmetic on comparisons, so it runs elementwise on numpy
    arrays (an int64 array) and on plain floats (an int, for the single-row fast path).
    """
    write = write_ratio > 0.5
    sequential = randomness < 0.5
    large = request_size > SMALL_REQUEST_MAX
    return write * 4 + sequential * 2 + large * 1


def region_for(write_ratio: float, randomness: float, request_size: float) -> str:
    """Name the region of a workload given its three region-defining characteristics."""
    return REGION_NAMES[region_code(write_ratio, randomness, request_size)]


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

    # Types are written here for type checkers; limits, defaults and descriptions come
    # from WORKLOAD_LIMITS (a test holds the fields equal to the table).
    write_ratio: Annotated[float, _limits("write_ratio")] = _spec("write_ratio")
    queue_depth: Annotated[int, _limits("queue_depth")] = _spec("queue_depth")
    request_size: Annotated[int, _limits("request_size"), _Size, _size_schema("request_size")] = _spec(
        "request_size"
    )
    randomness: Annotated[float, _limits("randomness")] = _spec("randomness")
    numjobs: Annotated[int, _limits("numjobs")] = _spec("numjobs")
    read_size: Annotated[
        Annotated[int, _limits("read_size")] | None, _OptionalSize, _size_schema("read_size", nullable=True)
    ] = _spec("read_size")
    write_size: Annotated[
        Annotated[int, _limits("write_size")] | None, _OptionalSize, _size_schema("write_size", nullable=True)
    ] = _spec("write_size")
    read_randomness: Annotated[float, _limits("read_randomness")] | None = _spec("read_randomness")
    write_randomness: Annotated[float, _limits("write_randomness")] | None = _spec("write_randomness")

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
        # frozen model: defaults derived from other fields are set once, here, by the
        # same rule the matrix path uses
        values = [getattr(self, name) for name in WORKLOAD_FIELDS]
        row = np.array([[np.nan if v is None else v for v in values]], dtype=np.float64)
        fill_defaults(row)
        for limit, value, filled in zip(WORKLOAD_LIMITS, values, row[0].tolist(), strict=True):
            if value is None:
                object.__setattr__(self, limit.name, limit.python_type(filled))
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
            if LIMITS[name].kind == "count" and isinstance(value, float) and value.is_integer():
                value = int(value)
            values[name] = value
        return cls(**values)
