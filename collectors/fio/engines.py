"""Choosing the fio I/O engine: probe io_uring, fall back to libaio; SPDK's plugin when installed."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Final

from collectors.fio.jobs import ENGINES, render_job
from collectors.fio.runner import run_fio
from modeling.errors import FioError, FioOutputError, InvalidInput

SPDK_PLUGIN_PLACES: Final = (
    "/usr/local/lib/spdk_nvme", "/usr/lib/spdk/fio/spdk_nvme", "/opt/spdk/build/fio/spdk_nvme",
)
"""Where SPDK's fio plugin is looked for when no path is configured."""


def build_probe_job(target: str, engine: str) -> str:
    """A tiny read-only job that tells whether ``engine`` works on ``target``."""
    options = {"filename": target, "ioengine": engine, "direct": "1", "size": "64k"}
    return render_job(options, {"probe": {"rw": "read", "bs": "4k", "iodepth": "1"}})


def spdk_plugin(configured: str | None = None) -> str:
    """Path of SPDK's fio plugin (``configured``, else a usual place); raises if absent."""
    for candidate in (configured or "", *SPDK_PLUGIN_PLACES):
        if candidate and Path(candidate).is_file():
            return str(Path(candidate).resolve())
    raise InvalidInput(
        "engine spdk needs SPDK's fio plugin; build SPDK with --with-fio and set "
        "SSDPREDICT_SPDK_PLUGIN to its build/fio/spdk_nvme"
    )


Runner = Callable[..., str]


@lru_cache(maxsize=32)
def _probe(target: str, remote: str | None, runner: Runner) -> str:
    for engine in ("io_uring", "libaio"):
        try:
            runner(build_probe_job(target, engine), remote=remote, timeout=60.0)
            return engine
        except (FioError, FioOutputError):
            continue
    return "psync"


def check_engine(engine: str | None) -> str | None:
    """``engine`` if it is one of :data:`ENGINES`; ``None`` for auto (probe); else raise."""
    if engine in (None, "", "auto"):
        return None
    assert engine is not None
    if engine not in ENGINES:
        raise InvalidInput(f"unknown engine {engine!r}; choose one of auto, {', '.join(ENGINES)}")
    return engine


def resolve_engine(engine: str | None, target: str, *, remote: str | None = None,
                   runner: Runner = run_fio, spdk_plugin_path: str | None = None) -> str:
    """``engine`` if given, else io_uring when it works on ``target``, else libaio (probed once)."""
    chosen = check_engine(engine)
    if chosen is None:
        return _probe(target, remote, runner)
    if chosen == "spdk":
        spdk_plugin(spdk_plugin_path)
    return chosen
