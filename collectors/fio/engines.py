"""Choosing the fio I/O engine: probe io_uring, fall back to libaio; SPDK's plugin when installed."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from collectors.fio.jobs import ENGINES, render_job
from modeling.errors import FioError, FioOutputError, InvalidInput


def build_probe_job(target: str, engine: str) -> str:
    """A tiny read-only job that tells whether ``engine`` works on ``target``."""
    options = {"filename": target, "ioengine": engine, "direct": "1", "size": "64k"}
    return render_job(options, {"probe": {"rw": "read", "bs": "4k", "iodepth": "1"}})


def spdk_plugin() -> str:
    """Path of SPDK's fio plugin (``SSDPREDICT_SPDK_PLUGIN`` or a usual place); raises if absent."""
    candidates = [os.environ.get("SSDPREDICT_SPDK_PLUGIN", "")] + [
        "/usr/local/lib/spdk_nvme", "/usr/lib/spdk/fio/spdk_nvme", "/opt/spdk/build/fio/spdk_nvme",
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return str(Path(candidate).resolve())
    raise InvalidInput(
        "engine spdk needs SPDK's fio plugin; build SPDK with --with-fio and set "
        "SSDPREDICT_SPDK_PLUGIN to its build/fio/spdk_nvme"
    )


def spdk_available() -> bool:
    """Whether SPDK's fio plugin is installed."""
    try:
        spdk_plugin()
    except InvalidInput:
        return False
    return True


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


def resolve_engine(engine: str | None, target: str, *, remote: str | None = None,
                   runner: Runner | None = None) -> str:
    """``engine`` if given, else io_uring when it works on ``target``, else libaio (probed once)."""
    if engine not in (None, "", "auto"):
        assert engine is not None
        if engine not in ENGINES:
            raise InvalidInput(f"unknown engine {engine!r}; choose one of auto, {', '.join(ENGINES)}")
        if engine == "spdk":
            spdk_plugin()
        return engine
    if runner is None:
        from collectors.fio.runner import run_fio

        runner = run_fio
    return _probe(target, remote, runner)
