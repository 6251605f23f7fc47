"""Train or evaluate many devices at once on Dask, one task per device.

Who does what:

* a **worker** reads the device's measurement files (Parquet) from the data directory,
  fits, and (training) writes the new version's files under ``models/``
  (:func:`~modeling.training.train.fit_plan`).  It never opens the catalog: SQLite's WAL
  mode does not work across hosts over a network filesystem, so the client lists each
  device's files and version name for it (:func:`~modeling.training.train.plan_fits`);
* the **client** (the process that called :func:`train_fleet`) is the only one that
  writes the catalog: it registers and activates the versions as their tasks come back
  (:func:`register_versions`), all those finished since it last looked in one
  transaction.  SQLite over a shared filesystem takes one writer well and many writers
  badly; a commit costs far more than its rows (on this VM about 50-200 ms alone, 2 ms
  a version in a batch of 50); and a version the catalog never heard of is harmless.

A task is one device, not one metric: a device's metrics depend on each other (bandwidth
and mean latency are derived from the IOPS model's out-of-fold predictions, the p99 ratio
from the mean latency's).  Measured on a fio-plot device (default training), IOPS takes
about 40 % of the time and the p99 (direct and ratio models) most of the rest, so
per-metric tasks would shorten one device by at most about 1.5x, and only when a fleet
has fewer devices than workers; with more devices than workers, per-device tasks already
keep every worker busy, without re-reading the data per metric.

The client also holds each device's writer lock (:mod:`modeling.store.files.locks`) from before
it lists the device's files until it has registered its version, as ``train --device``
does, so no sweep, ingest, train or delete of the device runs meanwhile.

A failed device (too little data, a bug, a worker that died, another writer holding it)
is recorded with a one-line reason and the others go on.  By default the work runs on a
``LocalCluster`` of one single-threaded process per core; ``scheduler="tcp://host:8786"``
runs the same tasks on an existing cluster, whose workers must see the data directory at
the same path.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from modeling.errors import ClusterUnavailable, MissingDependency, NothingSelected, SsdPredictError
from modeling.store import DataDir, ModelVersion
from modeling.store.catalog import read_measurement_files
from modeling.store.device_selection import select_devices
from modeling.store.files.locks import DeviceLockSet
from modeling.training.evaluate import evaluate_frame
from modeling.training.train import FitPlan, FittedVersion, fit_plan, plan_fits, register_versions
from modeling.training.transfer import check_reference

if TYPE_CHECKING:
    from distributed import Client

__all__ = [
    "DeviceResult",
    "FleetReport",
    "dask_client",
    "evaluate_fleet",
    "select_devices",  # re-exported: the fleet commands choose devices through this module
    "train_fleet",
    "with_reference",
]

log = logging.getLogger("ssdpredict.fleet")

INSTALL_HINT = "pip install 'dask[distributed]>=2024.1' (or reinstall ssdpredict: pip install -e .)"
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class DeviceResult:
    """What one device's task came to: a model version or a report, or a one-line reason."""

    device: str
    ok: bool
    seconds: float
    value: Any = None
    error: str | None = None


@dataclass
class FleetReport:
    """Every device's result, in completion order, and the wall time of the whole run."""

    results: list[DeviceResult] = field(default_factory=list)
    seconds: float = 0.0
    workers: int = 0
    client_seconds: float = 0.0  # spent in the client finishing results (registering versions)

    @property
    def failed(self) -> list[DeviceResult]:
        """The devices that failed."""
        return [r for r in self.results if not r.ok]

    @property
    def succeeded(self) -> list[DeviceResult]:
        """The devices that succeeded."""
        return [r for r in self.results if r.ok]


Progress = Callable[[DeviceResult, int, int], None]
"""Told each finished device, how many are done and how many there are."""


@dataclass(frozen=True)
class _Failure:
    reason: str


@contextlib.contextmanager
def dask_client(scheduler: str | None = None, *, workers: int | None = None) -> Iterator[Client]:
    """A Dask client of the scheduler at ``scheduler``, or of a new ``LocalCluster``.

    The local cluster has ``workers`` processes (default: one per core) of one thread each:
    the estimators are single-threaded, and processes keep the GIL out of the way.
    Raises ``MissingDependency`` when dask.distributed is not installed and
    ``ClusterUnavailable`` when the scheduler cannot be reached.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise MissingDependency(
            "training or evaluating many devices needs dask.distributed, which is not installed: "
            + INSTALL_HINT
        ) from exc
    if scheduler:
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise ClusterUnavailable(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
        with client:
            yield client
        return
    n = workers or os.cpu_count() or 1
    with (
        LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def train_fleet(
    datadir: DataDir,
    devices: Sequence[str],
    client: Client,
    *,
    activate: bool = True,
    progress: Progress | None = None,
    wait: bool = False,
    on_wait: Callable[[str], None] | None = None,
    locks: DeviceLockSet | None = None,
    reference: str | None = None,
    **fit_kw: Any,
) -> FleetReport:
    """Train every device on the cluster; the client registers each version as it arrives.

    ``fit_kw`` are :func:`~modeling.training.train.fit_version`'s options (``folds``,
    ``time_budget_s``, ``candidates``, ``feature_sets``, ``force_activate``...), the same
    for every device.

    Each device's writer lock is held, by this process, from before its measurement files
    are listed until its version is registered, as ``train --device`` holds it: a sweep,
    ingest, train or delete of a device in training is refused (or waits) meanwhile.  A
    device another writer holds fails with the holder named, and the others go on; with
    ``wait`` it is waited for (``on_wait`` told first).  A caller that took the locks
    already (the API does, to answer 409 at once) passes them as ``locks``; they are all
    released when this returns.

    With ``reference`` (another device with an active model) every device is trained as
    ``train --device D --reference R`` trains it; the reference itself is left out of the
    devices.  Raises ``UnknownDevice`` or ``NoModel`` for a bad reference.
    """
    devices, ref = with_reference(datadir, devices, reference)
    held = locks or datadir.device_locks(devices, "train", wait=wait, skip_busy=True, on_wait=on_wait)
    with held:
        busy = [DeviceResult(d, False, 0.0, error=exc.message) for d, exc in held.busy.items()]
        plans = {plan.device: plan for plan in plan_fits(datadir, list(held.held), reference=ref)}

        def register(fitted: list[FittedVersion]) -> list[ModelVersion]:
            return register_versions(datadir, fitted)

        def released(result: DeviceResult, done: int, total: int) -> None:
            held.release(result.device)  # registered (or failed): other writers may have it now
            if progress:
                progress(result, done, total)

        fit_kw = {**fit_kw, "activate": activate}
        return _fan_out(client, _fit_task, datadir, plans, fit_kw, register, released, busy)


def with_reference(
    datadir: DataDir, devices: Sequence[str], reference: str | None
) -> tuple[list[str], ModelVersion | None]:
    """The devices to train with ``reference`` (itself left out) and its active version.

    Raises ``NothingSelected`` when the reference is the only device named, ``UnknownDevice``
    or ``NoModel`` when it does not exist or has no model.
    """
    if reference is None:
        return list(devices), None
    devices = [d for d in devices if d != reference]
    if not devices:
        raise NothingSelected(f"the only device named is the reference {reference!r}")
    return devices, check_reference(datadir, devices[0], reference)


def evaluate_fleet(
    datadir: DataDir,
    devices: Sequence[str],
    client: Client,
    *,
    progress: Progress | None = None,
    **evaluate_kw: Any,
) -> FleetReport:
    """Evaluate every device on the cluster (nested cross-validation); each result is a report dict."""
    files = {device: (device, tuple(f)) for device, f in datadir.catalog.measurement_files(devices).items()}
    return _fan_out(client, _evaluate_task, datadir, files, evaluate_kw, lambda reports: reports, progress)


def _fan_out(
    client: Client,
    task: Callable[[str, Any, dict[str, Any]], tuple[float, Any]],
    datadir: DataDir,
    payloads: dict[str, Any],
    options: dict[str, Any],
    finish: Callable[[list[Any]], list[Any]],
    progress: Progress | None,
    failed: Sequence[DeviceResult] = (),
) -> FleetReport:
    """Run ``task`` on each device's payload; ``finish`` turns each batch of outcomes into values.

    ``failed``: devices that failed before any task (busy), reported first.
    """
    from distributed import as_completed

    start = time.perf_counter()
    report = FleetReport(workers=len(client.scheduler_info().get("workers", {})))
    root = str(datadir.root.resolve())
    run = uuid.uuid4().hex[:8]
    futures = {
        client.submit(task, root, payload, options, key=f"{task.__name__}-{run}-{device}", pure=False): device
        for device, payload in payloads.items()
    }
    total = len(futures) + len(failed)
    for result in failed:
        report.results.append(result)
        if progress:
            progress(result, len(report.results), total)
    # Whatever finished since the last look is finished together: registering a batch of
    # versions is one catalog commit, which keeps the client ahead of many fast workers.
    for batch in as_completed(futures).batches():
        done: list[tuple[str, float, Any]] = []
        results: list[DeviceResult] = []
        for future in batch:
            device = futures[future]
            try:
                seconds, outcome = future.result()
            except Exception as exc:  # the task never returned: its worker died, or it could not be sent
                results.append(DeviceResult(device, False, 0.0, error=_one_line(exc)))
            else:
                if isinstance(outcome, _Failure):
                    results.append(DeviceResult(device, False, seconds, error=outcome.reason))
                else:
                    done.append((device, seconds, outcome))
            future.release()
        finishing = time.perf_counter()
        results += _finish(done, finish)
        report.client_seconds += time.perf_counter() - finishing
        for result in results:
            report.results.append(result)
            if progress:
                progress(result, len(report.results), total)
    report.seconds = time.perf_counter() - start
    return report


def _finish(
    done: list[tuple[str, float, Any]], finish: Callable[[list[Any]], list[Any]]
) -> list[DeviceResult]:
    """Finish a batch at once; a domain error (a device gone from the catalog) fails the batch."""
    if not done:
        return []
    try:
        values = finish([outcome for _, _, outcome in done])
    except SsdPredictError as exc:
        return [DeviceResult(device, False, seconds, error=_one_line(exc)) for device, seconds, _ in done]
    return [
        DeviceResult(device, True, seconds, value=value)
        for (device, seconds, _), value in zip(done, values, strict=True)
    ]


def _fit_task(root: str, plan: FitPlan, fit_kw: dict[str, Any]) -> tuple[float, FittedVersion | _Failure]:
    """On a worker: fit a planned device and write its files, or say in one line why not."""
    return _timed(lambda: fit_plan(DataDir(root), plan, **fit_kw), plan.device)


def _evaluate_task(
    root: str, payload: tuple[str, tuple[tuple[int, str], ...]], kw: dict[str, Any]
) -> tuple[float, dict[str, Any] | _Failure]:
    """On a worker: evaluate a device from its measurement files, as a JSON-ready report."""
    device, files = payload

    def work() -> dict[str, Any]:
        frame = read_measurement_files(DataDir(root).measurements_dir, files)
        return evaluate_frame(frame, device=device, **kw).to_dict()

    return _timed(work, device)


def _timed(work: Callable[[], Any], device: str) -> tuple[float, Any]:
    start = time.perf_counter()
    try:
        value = work()
    except SsdPredictError as exc:
        value = _Failure(_one_line(exc))
    except Exception as exc:  # one device's bug must not stop the fleet; its traceback goes to the worker log
        log.exception("device %s failed", device)
        value = _Failure(_one_line(exc))
    return time.perf_counter() - start, value


def _one_line(exc: BaseException) -> str:
    text = str(exc) if isinstance(exc, SsdPredictError) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split()) or type(exc).__name__
