"""One sweep plan on many hosts at once, each host's device stored as ``NAME@HOST``.

Every host runs the same plan (the same seeded point order) through its own ``fio
--client`` against its ``fio --server``, in its own thread, through
:func:`collectors.sweep.run.run_sweep`.  Each host is therefore its own device, its own sweep
record and its own writer lock: a rerun continues every host from its last stored point,
and a host that cannot be reached, or fails part-way, is reported while the others go on.

One fio process per host rather than one fio with several ``--client`` options: a single
process ties every host's point to one exit status (one host's failure loses the point
on all of them) and to one position in the plan, while resumed hosts may be at
different points.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from collectors.fio.runner import parse_remote
from collectors.plans.presets import Plan
from collectors.sweep.run import Progress, Runner, run_sweep
from collectors.sweep.settings import SweepSettings
from modeling.errors import InvalidInput, SsdPredictError
from modeling.store import DataDir, Sweep, validate_name
from modeling.workload import Workload

DEFAULT_PORT = 8765


@dataclass(frozen=True)
class HostResult:
    """How one host's sweep ended: its stored sweep, or the one-line reason it failed."""

    remote: str
    device: str
    sweep: Sweep | None = None
    error: str | None = None


class _Stopped(Exception):
    """Raised inside a host's sweep (between points) when the whole run is interrupted."""


def split_remotes(text: str) -> list[str]:
    """The ``HOST:PORT`` entries of ``--remote h1:8765,h2:8765``, validated and without repeats."""
    remotes = [item.strip() for item in text.split(",") if item.strip()]
    if not remotes:
        raise InvalidInput("--remote is empty: give HOST:PORT[,HOST:PORT...]")
    seen: set[tuple[str, int]] = set()
    for remote in remotes:
        host, port = parse_remote(remote)
        if host.isdigit():
            raise InvalidInput(f"invalid remote {remote!r} in a host list: use HOST:PORT, not HOST,PORT")
        if (host, port) in seen:
            raise InvalidInput(f"--remote names {host}:{port} twice")
        seen.add((host, port))
    return remotes


def host_device(device: str, remote: str) -> str:
    """The device name of ``device`` on ``remote``: ``NAME@HOST``, or ``NAME@HOST:PORT`` off port 8765."""
    host, port = parse_remote(remote)
    host = host.strip("[]")  # an IPv6 address keeps its colons, not its brackets
    return validate_name(f"{device}@{host}" if port == DEFAULT_PORT else f"{device}@{host}:{port}")


def host_settings(settings: SweepSettings, remote: str) -> SweepSettings:
    """``settings`` with the jobs sent to ``remote``; refuses the paths that measure on this host."""
    if settings.nvmeof is not None:
        raise InvalidInput("a sweep over several hosts cannot attach NVMe-oF here: sweep it on one host")
    if settings.csd_path == "external":
        raise InvalidInput("a sweep over several hosts runs the jobs on the hosts: a CSD's external path "
                           "is this host's device; use --csd-path internal")
    return settings.model_copy(update={"remote": remote})


def run_multihost(datadir: DataDir, device: str, plan: Plan, settings: SweepSettings, remotes: Sequence[str],
                  *, progress: Callable[[str], Progress | None] | None = None, runner: Runner | None = None,
                  wait: bool = False, on_wait: Callable[[str], None] | None = None) -> list[HostResult]:
    """Sweep ``plan`` on every remote at once; one :class:`HostResult` per remote, in order.

    A domain error on one host (unreachable, refused target, device busy) ends that host
    only.  ``progress(host_device)`` gives each host's progress callback.  On Ctrl-C the
    hosts stop after their current point and the interrupt is raised again.
    """
    per_host = [(remote, host_device(device, remote), host_settings(settings, remote)) for remote in remotes]
    stop = threading.Event()

    def one(remote: str, name: str, host: SweepSettings) -> HostResult:
        report = progress(name) if progress else None

        def advance(done: int, total: int, workload: Workload) -> None:
            if stop.is_set():
                raise _Stopped()
            if report:
                report(done, total, workload)

        try:
            sweep = run_sweep(datadir, name, plan, host, progress=advance, runner=runner, wait=wait,
                              on_wait=on_wait)
        except SsdPredictError as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return HostResult(remote, name, error=reason)
        except _Stopped:
            return HostResult(remote, name, error="interrupted")
        return HostResult(remote, name, sweep=sweep)

    with ThreadPoolExecutor(max_workers=len(per_host), thread_name_prefix="sweep-host") as pool:
        futures = [pool.submit(one, *args) for args in per_host]
        try:
            return [future.result() for future in futures]
        except BaseException:
            stop.set()  # the pool's exit waits for the current points, then the interrupt goes on
            raise


def summary(results: Sequence[HostResult]) -> dict[str, Any]:
    """Counts of a multi-host run: hosts, complete, unfinished and failed."""
    failed = [r for r in results if r.error is not None]
    complete = [r for r in results if r.sweep is not None and r.sweep.status == "complete"]
    return {"hosts": len(results), "complete": len(complete), "failed": len(failed),
            "unfinished": len(results) - len(complete) - len(failed)}
