"""Parse fio JSON output into measurement rows.

One row per fio result (a job group): the workload read from the job's options, the four
metrics combined over both directions, per-direction metrics (``read_iops``,
``write_latency_p99_us`` ...), latency percentiles p50/p90/p99/p99.9, and provenance.

Handles local output (``jobs``), client/server output (``client_stats``; the per-host
"All clients" summary is skipped), fio 3.1-era output without ``bw_bytes``, several jobs
without ``group_reporting`` (summed), and ``unified_rw_reporting=both`` (exact combined
percentiles from the ``mixed`` section).  Without a ``mixed`` section the combined
percentiles of a read/write mix are computed from the mixture of the two directions'
percentile curves (piecewise linear between fio's reported percentiles).

Latency is fio's total latency (``lat_ns``: submission + completion) for the mean, and
the total-latency percentiles when the job set ``lat_percentiles=1``, otherwise the
completion-latency (``clat_ns``) percentiles, which is what fio reports by default.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import ValidationError

from collectors.metric_values import EXTRA_METRICS, MAX_METRIC, check_metric
from modeling.errors import FioOutputError
from modeling.workload import METRICS, MIB, Workload, parse_size

PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0),
    ("p90", 90.0),
    ("p99", 99.0),
    ("p99_9", 99.9),
)
DIRECTIONS = ("read", "write")


@dataclass(frozen=True)
class FioResult:
    """One parsed fio job group: its workload and its measured row."""

    workload: Workload
    row: dict[str, Any]
    job_name: str


def load_fio_json(text: str | bytes, *, source: str = "fio output") -> dict[str, Any]:
    """Decode fio's JSON, tolerating the warning lines fio may print before it."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    start = text.find("{")
    if start < 0:
        raise FioOutputError(f"{source}: no JSON object found (is this fio --output-format=json?)")
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise FioOutputError(f"{source}: corrupt fio JSON: {exc.msg} at char {start + exc.pos}") from exc
    except RecursionError:
        # fio nests objects a few levels deep; thousands of levels is not fio output.
        raise FioOutputError(f"{source}: corrupt fio JSON: nested too deeply") from None
    except ValueError as exc:
        # Python refuses to convert an integer of over 4300 digits (sys.get_int_max_str_digits)
        raise FioOutputError(f"{source}: corrupt fio JSON: {exc}") from None
    if not isinstance(data, dict) or not (
        isinstance(data.get("jobs"), list) or isinstance(data.get("client_stats"), list)
    ):
        raise FioOutputError(f"{source}: not fio JSON output (no 'jobs' or 'client_stats' list)")
    return data


def parse_fio_output(text: str | bytes, *, source: str = "fio output") -> list[FioResult]:
    """Parse a whole fio JSON document into one :class:`FioResult` per job group."""
    data = load_fio_json(text, source=source)
    return parse_fio_document(data, source=source)


def parse_fio_document(data: Mapping[str, Any], *, source: str = "fio output") -> list[FioResult]:
    """Parse an already-decoded fio JSON document.

    Every field is type-checked: a value of the wrong type or an implausible number is a
    :class:`FioOutputError` naming the file and the field, never a ``TypeError``.
    """
    global_opts = _options(data.get("global options"), source, "global options")
    jobs = data.get("jobs")
    if not isinstance(jobs, list):
        stats = data.get("client_stats") or []
        if not isinstance(stats, list):
            raise FioOutputError(f"{source}: client_stats: not a list")
        jobs = [j for j in stats if not (isinstance(j, dict) and j.get("jobname") == "All clients")]
    if not jobs:
        raise FioOutputError(f"{source}: fio output holds no job results")
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for i, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise FioOutputError(f"{source}: jobs[{i}]: a job entry is not an object")
        if job.get("error"):
            raise FioOutputError(f"{source}: job {job.get('jobname')!r} failed with error {job['error']}")
        key = tuple(_scalar(job, k, source, f"jobs[{i}]") for k in ("groupid", "hostname", "jobname"))
        groups.setdefault(key, []).append(job)
    version = str(data.get("fio version", ""))
    return [_parse_group(members, global_opts, version, source) for members in groups.values()]


def _scalar(obj: Mapping[str, Any], key: str, source: str, where: str) -> str | int | float | None:
    value = obj.get(key)
    if value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool)):
        return value
    raise FioOutputError(f"{source}: {where}.{key}: expected a string or number, got {type(value).__name__}")


def _options(value: Any, source: str, where: str) -> dict[str, Any]:
    """fio's option maps hold strings (numbers tolerated); anything else is not fio output."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FioOutputError(f"{source}: {where}: expected an object of options, got {type(value).__name__}")
    for key, item in value.items():
        if not (isinstance(item, (str, int, float)) and not isinstance(item, bool)):
            raise FioOutputError(f"{source}: {where}.{key}: expected a string, got {type(item).__name__}")
    return value


def _section(obj: Mapping[str, Any], key: str, source: str, where: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FioOutputError(f"{source}: {where}.{key}: expected an object, got {type(value).__name__}")
    return value


def _number(obj: Mapping[str, Any], key: str, source: str, where: str) -> float:
    """A non-negative, finite, plausible number from fio's statistics (0 when absent)."""
    value = obj.get(key, 0)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FioOutputError(f"{source}: {where}.{key}: expected a number, got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:  # an integer past float's range (fio writes at most 20 digits)
        number = math.inf
    if not (math.isfinite(number) and 0 <= number < MAX_METRIC):
        raise FioOutputError(
            f"{source}: {where}.{key}: {_shown(value)} is not a finite, non-negative measurement"
        )
    return number


def _shown(value: int | float) -> str:
    """``value`` for an error message: a huge integer by its digit count, not its digits."""
    text = repr(value) if isinstance(value, float) or abs(value) < 10**30 else None
    return text if text is not None else f"a {len(str(abs(value)))}-digit integer"


def _parse_group(
    jobs: list[Mapping[str, Any]], global_opts: Mapping[str, Any], version: str, source: str
) -> FioResult:
    first = jobs[0]
    name = f"job {first.get('jobname')!r}"
    options = {**global_opts, **_options(first.get("job options"), source, f"{name}: job options")}
    workload = workload_from_options(options, source=source)
    row: dict[str, Any] = dict(workload.as_row())
    per_dir: dict[str, dict[str, Any]] = {}
    for direction in DIRECTIONS:
        stats = [_section(j, direction, source, name) for j in jobs]
        per_dir[direction] = _direction_metrics(stats, source, f"{name}: {direction}")
        for key, value in per_dir[direction].items():
            if key != "_curve":
                row[f"{direction}_{key}"] = value
    mixed = [_section(j, "mixed", source, name) for j in jobs]
    if all(mixed):
        combined = _direction_metrics(mixed, source, f"{name}: mixed")
    else:
        combined = _combine(per_dir["read"], per_dir["write"])
    for key, value in combined.items():
        if key != "_curve":
            row[key] = value
    total_ios = per_dir["read"]["iops"] + per_dir["write"]["iops"]
    if total_ios <= 0:
        raise FioOutputError(f"{source}: {name} completed no I/O")
    row["measured_write_ratio"] = per_dir["write"]["iops"] / total_ios
    row["fio_version"] = version
    row["engine"] = str(options.get("ioengine", ""))
    runtimes_ms = [
        _number(_section(j, d, source, name), "runtime", source, f"{name}: {d}")
        for j in jobs
        for d in DIRECTIONS
    ]
    row["runtime_s"] = max(runtimes_ms) / 1000.0
    _check_row(row, source, name)
    return FioResult(workload=workload, row=row, job_name=str(first.get("jobname", "")))


def _check_row(row: Mapping[str, Any], source: str, name: str) -> None:
    """The shared metric rule on the computed row; NaN means "not measured" (no I/O, no percentiles)."""
    for metric in (*METRICS, *EXTRA_METRICS):
        value = row.get(metric)
        if value is None or math.isnan(value):
            continue
        try:
            check_metric(metric, float(value))
        except ValueError as exc:
            raise FioOutputError(f"{source}: {name}: {metric}: {exc}") from None


def _direction_metrics(stats: list[Mapping[str, Any]], source: str, where: str) -> dict[str, Any]:
    iops = 0.0
    bw_bytes = 0.0
    lat_weighted = 0.0
    curves: list[tuple[float, dict[float, float]]] = []
    for s in stats:
        job_iops = _number(s, "iops", source, where)
        if "bw_bytes" in s:
            job_bw = _number(s, "bw_bytes", source, where)
        else:  # fio < 3.x-ish: "bw" is KiB/s
            job_bw = _number(s, "bw", source, where) * 1024.0
        lat = _section(s, "lat_ns", source, where)
        lat_mean_ns = _number(lat, "mean", source, f"{where}.lat_ns")
        if not lat and "lat" in s:  # very old fio: microseconds
            lat_mean_ns = _number(_section(s, "lat", source, where), "mean", source, f"{where}.lat") * 1000.0
        iops += job_iops
        bw_bytes += job_bw
        lat_weighted += job_iops * lat_mean_ns
        if job_iops > 0:
            curves.append((job_iops, _percentile_curve(s, source, where)))
    metrics: dict[str, Any] = {
        "iops": iops,
        "bandwidth_mib_s": bw_bytes / MIB,
        "latency_mean_us": (lat_weighted / iops / 1000.0) if iops > 0 else float("nan"),
    }
    curve = _mix_curves(curves)
    for name, pct in PERCENTILES:
        metrics[f"latency_{name}_us"] = _curve_value(curve, pct) / 1000.0 if curve else float("nan")
    metrics["_curve"] = (iops, curve)
    return metrics


def _percentile_curve(stats: Mapping[str, Any], source: str, where: str) -> dict[float, float]:
    for key in ("lat_ns", "clat_ns"):
        pct = _section(stats, key, source, where).get("percentile")
        if pct is not None and not isinstance(pct, dict):
            raise FioOutputError(f"{source}: {where}.{key}.percentile: expected an object")
        if pct:
            break
    else:
        return {}
    curve: dict[float, float] = {}
    for k in pct:
        try:
            p = float(k)
        except ValueError:
            raise FioOutputError(f"{source}: {where}.{key}.percentile: bad percentile {k!r}") from None
        value = _number(pct, k, source, f"{where}.{key}.percentile")
        if not 0 <= p <= 100:
            raise FioOutputError(f"{source}: {where}.{key}.percentile: bad percentile {k!r}")
        if p > 0:  # fio 3.1 emits a spurious "0.00": 0 entry
            curve[p] = value
    return curve


def _mix_curves(curves: list[tuple[float, dict[float, float]]]) -> dict[float, float]:
    """Percentile curve of a mixture of distributions, weighted by their IOPS."""
    curves = [(w, c) for w, c in curves if c]
    if not curves:
        return {}
    if len(curves) == 1:
        return curves[0][1]
    total = sum(w for w, _ in curves)
    grid = np.unique(np.concatenate([np.array(list(c.values())) for _, c in curves]))
    cdf = np.zeros_like(grid, dtype=float)
    for weight, curve in curves:
        ps = np.array(sorted(curve))
        xs = np.array([curve[p] for p in ps])
        cdf += weight / total * np.interp(grid, xs, ps, left=0.0, right=100.0)
    wanted = sorted({p for _, c in curves for p in c})
    return {p: float(np.interp(p, cdf, grid)) for p in wanted}


def _curve_value(curve: dict[float, float], pct: float) -> float:
    if pct in curve:
        return curve[pct]
    ps = sorted(curve)
    return float(np.interp(pct, ps, [curve[p] for p in ps]))


def _combine(read: dict[str, Any], write: dict[str, Any]) -> dict[str, Any]:
    iops = read["iops"] + write["iops"]
    combined: dict[str, Any] = {
        "iops": iops,
        "bandwidth_mib_s": read["bandwidth_mib_s"] + write["bandwidth_mib_s"],
    }
    weighted = [(d["iops"], d["latency_mean_us"]) for d in (read, write) if d["iops"] > 0]
    combined["latency_mean_us"] = (
        sum(w * v for w, v in weighted) / iops if iops > 0 else float("nan")
    )
    curve = _mix_curves([read["_curve"], write["_curve"]])
    for name, pct in PERCENTILES:
        combined[f"latency_{name}_us"] = (
            _curve_value(curve, pct) / 1000.0 if curve else float("nan")
        )
    return combined


_RW_WRITE_RATIO = {
    "read": 0.0, "randread": 0.0, "write": 1.0, "randwrite": 1.0,
}
_RW_RANDOM = {"read": 0.0, "write": 0.0, "rw": 0.0, "readwrite": 0.0,
              "randread": 1.0, "randwrite": 1.0, "randrw": 1.0}


def _opt(options: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in options and options[name] not in (None, ""):
            return options[name]
    return None


def _pair(value: Any, parse: Any) -> tuple[Any, Any]:
    parts = str(value).split(",")
    first = parse(parts[0]) if parts[0] != "" else None
    second = parse(parts[1]) if len(parts) > 1 and parts[1] != "" else first
    return first, second


def workload_from_options(options: Mapping[str, Any], *, source: str = "fio job") -> Workload:
    """Read the workload vector a fio job ran from its (job + global) options."""
    try:
        rw = str(_opt(options, "rw", "readwrite") or "read").split(":")[0]
        if rw not in _RW_RANDOM:
            raise ValueError(f"unsupported rw={rw!r} (trim workloads are not modelled)")
        if rw in _RW_WRITE_RATIO:
            write_ratio = _RW_WRITE_RATIO[rw]
        else:
            mixwrite = _opt(options, "rwmixwrite")
            mixread = _opt(options, "rwmixread")
            if mixwrite is not None:
                write_ratio = float(mixwrite) / 100.0
            elif mixread is not None:
                write_ratio = 1.0 - float(mixread) / 100.0
            else:
                write_ratio = 0.5
        bs = _opt(options, "bs", "blocksize") or "4k"
        if "-" in str(bs) or ":" in str(bs):
            raise ValueError(f"block size ranges are not supported (bs={bs!r})")
        read_size, write_size = _pair(bs, parse_size)
        randomness = _RW_RANDOM[rw]
        read_rnd = write_rnd = randomness
        pct = _opt(options, "percentage_random")
        if pct is not None and randomness > 0:
            r, w = _pair(pct, lambda v: float(v) / 100.0)
            read_rnd, write_rnd = r, w
        if write_ratio >= 1.0:
            request_size, randomness = write_size, write_rnd
        elif write_ratio <= 0.0:
            request_size, randomness = read_size, read_rnd
        else:
            mean = (1 - write_ratio) * read_size + write_ratio * write_size
            request_size = max(512, int(round(mean / 512.0)) * 512)
            randomness = (1 - write_ratio) * read_rnd + write_ratio * write_rnd
        return Workload(
            write_ratio=write_ratio,
            queue_depth=int(_opt(options, "iodepth") or 1),
            request_size=request_size,
            randomness=randomness,
            numjobs=int(_opt(options, "numjobs") or 1),
            read_size=read_size,
            write_size=write_size,
            read_randomness=read_rnd,
            write_randomness=write_rnd,
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err.get("loc", ())) or "workload"
        raise FioOutputError(
            f"{source}: job options give an invalid workload: {field}: {err['msg']}"
        ) from exc
    except (TypeError, ValueError, OverflowError) as exc:
        raise FioOutputError(f"{source}: cannot read the workload from the job options: {exc}") from exc
