"""Build fio job files from a :class:`~modeling.workload.Workload` and sweep settings.

Every option written to a job file comes from a whitelist, and every value is checked
against that option's pattern, because a fio job file is a program: ``exec_prerun`` runs
shell commands, ``include`` reads other files and ``${VAR}`` expands the environment.
Nothing a user typed reaches fio unless it passed these checks.

Mapping of the workload fields:

* ``write_ratio`` -> ``rw`` (read/write/rw or their ``rand`` forms) and ``rwmixwrite``
  (whole percent, which is all fio accepts);
* ``read_randomness``/``write_randomness`` -> ``percentage_random=R,W``;
* ``read_size``/``write_size`` -> ``bs=R,W``; ``queue_depth`` -> ``iodepth``;
* ``numjobs`` -> ``numjobs`` with ``group_reporting`` so fio reports one summed result.

Runtime and ramp are written in milliseconds (``500ms``): fio silently truncates
fractional seconds such as ``runtime=1.5``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from modeling.errors import InvalidInput
from modeling.workload import Workload, format_size

ENGINES: Final[tuple[str, ...]] = ("io_uring", "libaio", "psync", "spdk", "libpmem", "dev-dax")
"""The I/O engines a sweep may use (``spdk`` only when its fio plugin is installed; ``libpmem``
and ``dev-dax``, both synchronous, for persistent memory: class ``pmem``)."""

PERCENTILE_LIST: Final = "50:90:99:99.9"

_INT = r"[0-9]{1,10}"
_SIZE = r"[0-9]{1,15}[kmgt]?"
_MS = r"[0-9]{1,9}ms"
_PCT = r"(100|[0-9]{1,2})"
_PATH = r"/[A-Za-z0-9._/+@-]{0,4095}"

# option -> full-match pattern of its value; anything else is refused.
WHITELIST: Final[Mapping[str, re.Pattern[str]]] = {
    name: re.compile(pattern)
    for name, pattern in {
        "filename": _PATH,
        "ioengine": r"io_uring|libaio|psync|spdk|libpmem|dev-dax|" + _PATH,
        "direct": "[01]",
        "thread": "[01]",
        "rw": "read|write|rw|randread|randwrite|randrw",
        "rwmixwrite": _PCT,
        "percentage_random": f"{_PCT},{_PCT}",
        "bs": f"{_SIZE},{_SIZE}|{_SIZE}",
        "iodepth": _INT,
        "numjobs": _INT,
        "group_reporting": "[01]",
        "size": _SIZE,
        "offset": _SIZE,
        "loops": _INT,
        "time_based": "[01]",
        "runtime": _MS,
        "ramp_time": _MS,
        "percentile_list": r"[0-9.:]{1,64}",
        "lat_percentiles": "[01]",
        "unified_rw_reporting": "both|mixed|none",
        "norandommap": "[01]",
        "randrepeat": "[01]",
        "steadystate": r"(iops|bw|iops_slope|bw_slope):[0-9]{1,3}(\.[0-9]{1,3})?%",
        "ss_dur": _MS,
        "ss_ramp": _MS,
        # open-loop points (collectors.sweep.openloop): Poisson arrivals at a set rate
        "rate_iops": f"{_INT}|{_INT},{_INT}",
        "rate_process": "linear|poisson",
        # their per-I/O latency logs: the steady state after a warm-up (collectors.sweep.steady)
        "write_lat_log": _PATH,
        "log_offset": "[01]",
    }.items()
}

_SPDK_TRID = re.compile(
    r"trtype=(TCP|RDMA) adrfam=IPv[46] traddr=[0-9A-Za-z.\\:-]{1,255} trsvcid=[0-9]{1,5}"
    r" subnqn=[A-Za-z0-9.\\:_-]{1,400} ns=[0-9]{1,10}"
)
_FORBIDDEN = ("\n", "\r", "\0", "=", ";", "$", "#", "[", "]")
_JOB_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def check_option(name: str, value: object) -> str:
    """Return ``value`` as text if ``name`` is whitelisted and the value fits; else raise."""
    if not isinstance(name, str) or name.startswith("exec_") or name not in WHITELIST:
        raise InvalidInput(f"fio option {name!r} is not allowed")
    text = str(value)
    if name == "filename" and _SPDK_TRID.fullmatch(text):
        return text  # an SPDK transport id, built from validated parts by collectors.devices.nvmeof
    if any(ch in text for ch in _FORBIDDEN):
        raise InvalidInput(f"fio option {name}: value {text!r} contains a forbidden character")
    if not WHITELIST[name].fullmatch(text):
        raise InvalidInput(f"fio option {name}: invalid value {text!r}")
    if name in ("filename", "ioengine") and ".." in Path(text).parts:
        raise InvalidInput(f"fio option {name}: '..' is not allowed in {text!r}")
    return text


def render_job(global_options: Mapping[str, object], jobs: Mapping[str, Mapping[str, object]]) -> str:
    """Render a job file from option mappings, checking every name and value."""
    lines = ["[global]"]
    lines += [f"{k}={check_option(k, v)}" for k, v in global_options.items()]
    for job_name, options in jobs.items():
        if not _JOB_NAME.fullmatch(job_name) or job_name == "global":
            raise InvalidInput(f"invalid fio job name {job_name!r}")
        lines.append(f"[{job_name}]")
        lines += [f"{k}={check_option(k, v)}" for k, v in options.items()]
    return "\n".join(lines) + "\n"


MIN_SPAN: Final = 4096
"""The smallest span a job measures (one 4 KiB request)."""


# The rules of the settings a user gives, each written once: SweepSettings applies them when
# it is built (before any lock, file or attach), JobSettings again for direct library callers.
def check_runtime_ms(ms: int) -> int:
    """A job's runtime: a positive number of milliseconds."""
    if ms <= 0:
        raise InvalidInput(f"runtime must be positive (got {ms} ms)")
    return ms


def check_span(size: int) -> int:
    """A job's span (fio ``size``): at least :data:`MIN_SPAN` bytes."""
    if size < MIN_SPAN:
        raise InvalidInput(f"the span (size) must be at least 4 KiB (got {size} bytes)")
    return size


def check_passes(passes: int) -> int:
    """Sequential fills of preconditioning: 1 to 100."""
    if not 1 <= passes <= 100:
        raise InvalidInput(f"precondition passes must be between 1 and 100 (got {passes})")
    return passes


@dataclass(frozen=True)
class JobSettings:
    """Where and how a workload runs: target, engine, span and timing."""

    target: str
    engine: str = "libaio"
    size: int = 256 * 1024 * 1024
    offset: int = 0
    runtime_ms: int = 1000
    ramp_ms: int = 0
    direct: bool = True
    steady_state: str | None = None  # fio criterion, e.g. "iops:20%"
    ss_dur_ms: int = 5000
    ss_ramp_ms: int = 0
    mixed_reporting: bool = True
    spdk_plugin: str | None = None  # path of SPDK's fio plugin, for engine spdk

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise InvalidInput(f"unknown engine {self.engine!r}; choose one of {', '.join(ENGINES)}")
        check_runtime_ms(self.runtime_ms)
        check_span(self.size)
        check_option("filename", self.target)
        if self.engine == "spdk":
            if not self.spdk_plugin:
                raise InvalidInput("engine spdk needs the path of SPDK's fio plugin")
            check_option("ioengine", self.spdk_plugin)


def _percent(fraction: float) -> int:
    return int(round(fraction * 100))


def effective_workload(workload: Workload) -> Workload:
    """The workload fio actually runs: ratios rounded to the whole percent fio accepts."""
    return workload.model_copy(
        update={
            "write_ratio": _percent(workload.write_ratio) / 100,
            "randomness": _percent(workload.randomness) / 100,
            "read_randomness": _percent(workload.read_randomness or 0.0) / 100,
            "write_randomness": _percent(workload.write_randomness or 0.0) / 100,
        }
    )


def workload_options(workload: Workload) -> dict[str, str]:
    """The job options that express one workload."""
    w = effective_workload(workload)
    write_pct = _percent(w.write_ratio)
    rnd = (_percent(w.read_randomness or 0.0), _percent(w.write_randomness or 0.0))
    directions = [d for d, on in (("read", write_pct < 100), ("write", write_pct > 0)) if on]
    used = [rnd[0] if d == "read" else rnd[1] for d in directions]
    prefix = "rand" if any(used) else ""
    base = "rw" if len(directions) == 2 else directions[0]
    options: dict[str, str] = {"rw": prefix + base}
    if len(directions) == 2:
        options["rwmixwrite"] = str(write_pct)
    if prefix and not all(v == 100 for v in used):
        options["percentage_random"] = f"{rnd[0]},{rnd[1]}"
    read_size, write_size = w.read_size or w.request_size, w.write_size or w.request_size
    options["bs"] = (
        format_size(read_size) if read_size == write_size
        else f"{format_size(read_size)},{format_size(write_size)}"
    )
    options["iodepth"] = str(w.queue_depth)
    options["numjobs"] = str(w.numjobs)
    return options


def _engine_options(settings: JobSettings) -> dict[str, str]:
    if settings.engine == "spdk" and settings.spdk_plugin:
        # SPDK's plugin is loaded by path and needs fio's thread mode.
        return {"ioengine": settings.spdk_plugin, "thread": "1"}
    return {"ioengine": settings.engine}


def global_options(settings: JobSettings) -> dict[str, str]:
    """Options shared by every job of a sweep."""
    options = {
        "filename": settings.target,
        **_engine_options(settings),
        "direct": "1" if settings.direct else "0",
        "size": str(settings.size),
        "offset": str(settings.offset),
        "time_based": "1",
        "runtime": f"{settings.runtime_ms}ms",
        "ramp_time": f"{settings.ramp_ms}ms",
        "percentile_list": PERCENTILE_LIST,
        "lat_percentiles": "1",
        "group_reporting": "1",
        "norandommap": "1",
    }
    if settings.mixed_reporting:
        # fio 3.33 then also reports a 'mixed' section: exact combined percentiles.
        options["unified_rw_reporting"] = "both"
    if settings.steady_state:
        options["steadystate"] = settings.steady_state
        options["ss_dur"] = f"{settings.ss_dur_ms}ms"
        options["ss_ramp"] = f"{settings.ss_ramp_ms}ms"
    return options


def build_job(workload: Workload, settings: JobSettings, *, name: str = "point") -> str:
    """The job file that measures one workload."""
    return render_job(global_options(settings), {name: workload_options(workload)})


def build_fill_job(settings: JobSettings, *, passes: int = 2) -> str:
    """A job that writes the whole span sequentially ``passes`` times (preconditioning)."""
    check_passes(passes)
    options = {
        "filename": settings.target,
        **_engine_options(settings),
        "direct": "1" if settings.direct else "0",
        "size": str(settings.size),
        "offset": str(settings.offset),
        "loops": str(passes),
        "group_reporting": "1",
    }
    fill = {"rw": "write", "bs": "1m", "iodepth": "16", "numjobs": "1"}
    return render_job(options, {"precondition": fill})
