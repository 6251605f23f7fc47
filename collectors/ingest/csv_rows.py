"""The rules of a measurements CSV, one row at a time (the chunked reader is :mod:`.csv_stream`).

Rules (a file that breaks any of them is rejected whole, naming the line and the reason):

* UTF-8 text (a byte-order mark is allowed); comma-separated; the first non-blank line
  is the header; blank lines are skipped.
* Columns ``write_ratio, queue_depth, request_size, randomness`` are required;
  ``numjobs, read_size, write_size, read_randomness, write_randomness`` are optional
  (an empty cell takes the workload default).  Sizes are bytes (``4096``; fio-style
  ``4k`` is accepted too).
* At least one metric column of ``latency_mean_us, latency_p99_us, bandwidth_mib_s,
  iops``; also accepted are the extra columns a fio sweep stores (``latency_p50_us``,
  ``read_iops``, ``write_latency_p99_us``, ...).  Metric cells are finite numbers; the
  four main metrics must be > 0, the extra ones >= 0; an empty cell means "not
  measured", but every row needs at least one main metric.
* Unknown columns are an error, not ignored: a misspelt ``num_jobs`` would otherwise
  silently train a model on the wrong workload.  Duplicate columns are an error too.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from collectors.metric_values import EXTRA_METRICS, check_metric
from modeling.errors import InvalidInput
from modeling.workload import (
    BASIC_FIELDS,
    METRICS,
    SIZE_FIELDS,
    WORKLOAD_FIELDS,
    Workload,
    parse_size,
)

KNOWN_COLUMNS: frozenset[str] = frozenset((*WORKLOAD_FIELDS, *METRICS, *EXTRA_METRICS))
INTEGER_FIELDS = frozenset({"queue_depth", "numjobs"})


def decode_text(data: bytes, source: str) -> str:
    """Decode UTF-8 (with or without BOM); a failure names the line of the bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InvalidInput(
            f"{source}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def check_header(cells: list[str], source: str, line: int) -> list[str]:
    names = [c.strip() for c in cells]
    where = f"{source}, line {line}"
    seen: set[str] = set()
    for i, name in enumerate(names, start=1):
        if not name:
            raise InvalidInput(f"{where}: column {i} has no name")
        if name in seen:
            raise InvalidInput(f"{where}: duplicate column {name!r}")
        seen.add(name)
    unknown = [n for n in names if n not in KNOWN_COLUMNS]
    if len(unknown) == len(names):
        raise InvalidInput(
            f"{where}: not a measurements CSV or fio JSON (the first line names none of the "
            f"columns {', '.join(BASIC_FIELDS)})"
        )
    if unknown:
        raise InvalidInput(
            f"{where}: unknown column(s) {', '.join(map(repr, unknown))}; workload columns are "
            f"{', '.join(WORKLOAD_FIELDS)} and metric columns {', '.join(METRICS)}"
        )
    missing = [f for f in BASIC_FIELDS if f not in seen]
    if missing:
        raise InvalidInput(f"{where}: missing required column(s) {', '.join(missing)}")
    if not any(m in seen for m in METRICS):
        raise InvalidInput(f"{where}: no metric column; expected at least one of {', '.join(METRICS)}")
    return names


def parse_row(header: list[str], cells: list[str], source: str, line: int) -> dict[str, Any]:
    where = f"{source}, line {line}"
    if len(cells) != len(header):
        raise InvalidInput(f"{where}: {len(cells)} values for {len(header)} columns")
    values: dict[str, Any] = {}
    metrics: dict[str, float] = {}
    for name, raw in zip(header, cells, strict=True):
        cell = raw.strip()
        if not cell:
            if name in BASIC_FIELDS:
                raise InvalidInput(f"{where}: {name}: missing value (required)")
            continue  # optional workload field: default; metric: not measured
        try:
            if name in WORKLOAD_FIELDS:
                values[name] = workload_value(name, cell)
            else:
                metrics[name] = metric_value(name, cell)
        except ValueError as exc:
            raise InvalidInput(f"{where}: {name}: {exc}") from None
    if not any(m in metrics for m in METRICS):
        raise InvalidInput(f"{where}: no metric value (need one of {', '.join(METRICS)})")
    try:
        workload = Workload(**values)
    except ValidationError as exc:
        raise InvalidInput(f"{where}: invalid workload: {_validation_text(exc)}") from None
    return {**workload.as_row(), **metrics}


def _finite(cell: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise ValueError(f"not a number: {cell!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {cell!r}")
    return value


def workload_value(name: str, cell: str) -> Any:
    if name in SIZE_FIELDS:
        return parse_size(cell)
    value = _finite(cell)
    if name in INTEGER_FIELDS:
        if not value.is_integer():
            raise ValueError(f"not a whole number: {cell!r}")
        return int(value)
    return value


def metric_value(name: str, cell: str) -> float:
    return check_metric(name, _finite(cell))


def _validation_text(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{loc}: {err['msg']}" if loc else str(err["msg"]))
    return "; ".join(parts)


__all__ = [
    "EXTRA_METRICS",
    "KNOWN_COLUMNS",
    "check_header",
    "decode_text",
    "metric_value",
    "parse_row",
    "workload_value",
]
