"""Fleet benchmark: train N synthetic devices on Dask with 1 and 2 workers, check them, serve them.

Usage::

    .venv/bin/python bench/fleet.py --devices 200              # the issue's run (quiet machine)
    .venv/bin/python bench/fleet.py --devices 20               # a quick check
    .venv/bin/python bench/fleet.py --devices 200 --candidates cart,xgboost --folds 3

The fleet: synthetic device k is real fio-plot device ``k mod 6``, every point scaled by
``s_k`` (log-normal, sigma 0.5) times a smooth wave along queue depth
(``1 + a_k sin(w_k log2(qd) + phi_k)``, a_k up to 0.15): IOPS and bandwidth are
multiplied by that factor and both latencies divided by it, so bandwidth = IOPS x size
and Little's law still hold.  These values are the device's **truth**.  What is ingested
("measured") is the truth times 2 % log-normal noise, and 20 % of each device's workloads
are held out of the ingest; the fleet's accuracy is the trained models' error on those
held-out workloads against the truth.

Printed:

* devices trained per minute on a ``LocalCluster`` of 1 and of 2 single-threaded worker
  processes (the same N devices each time; workers are warmed up first, so imports are
  not counted) and the ratio, with each worker's peak RSS;
* the held-out accuracy (mean relative error per metric, over all held-out points);
* the memory of a real ``ssdpredict serve`` process (uvicorn) holding the N models:
  its RSS at start (no model), then with a quarter, half, all of them loaded (by asking
  each for a prediction, so the growth per model and its linearity show), then after
  retraining every device twice with the fleet (the server picks each new version up by
  itself and must drop the old ones).

Training configuration: ``--candidates cart`` (CART only, untuned) and ``--folds 2`` by
default, the fast configuration a fleet run uses; ``--candidates`` takes any estimator
kinds (``cart,xgboost,extra_trees,load_gated,gp``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.accuracy import SHORT, fio_plot_devices  # noqa: E402
from collectors.fio.results import parse_fio_output  # noqa: E402
from modeling.training.fleet import dask_client, train_fleet  # noqa: E402
from modeling.serving.registry import ModelRegistry  # noqa: E402
from modeling.training.selection import candidates_of_kinds, relative_errors  # noqa: E402
from modeling.store import DataDir  # noqa: E402
from modeling.workload import METRICS, WORKLOAD_FIELDS  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HOLDOUT = 0.2
NOISE = 0.02


def real_devices() -> list[pd.DataFrame]:
    """The fio-plot devices' measured rows, one frame per device."""
    frames = []
    for folder in fio_plot_devices():
        rows = [
            r.row
            for f in sorted(folder.glob("*.json"))
            for r in parse_fio_output(f.read_text(), source=f.name)
        ]
        frames.append(pd.DataFrame(rows))
    return frames


def synthetic_device(base: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """A scaled, smoothly perturbed copy of a real device: its truth, one row per workload."""
    scale = rng.lognormal(0.0, 0.5)
    amp, freq, phase = rng.uniform(0.0, 0.15), rng.uniform(0.5, 1.5), rng.uniform(0, 2 * np.pi)
    factor = scale * (1 + amp * np.sin(freq * np.log2(base["queue_depth"].astype(float)) + phase))
    truth = base.copy()
    for metric in ("iops", "bandwidth_mib_s"):
        truth[metric] = base[metric] * factor
    for metric in ("latency_mean_us", "latency_p99_us"):
        truth[metric] = base[metric] / factor
    return truth


def build_fleet(datadir: DataDir, n: int, seed: int) -> dict[str, pd.DataFrame]:
    """Ingest ``n`` synthetic devices (noisy, 80 % of their workloads); returns each one's held-out truth."""
    rng = np.random.default_rng(seed)
    bases = real_devices()
    held: dict[str, pd.DataFrame] = {}
    for k in range(n):
        truth = synthetic_device(bases[k % len(bases)], rng)
        out = rng.random(len(truth)) < HOLDOUT
        measured = truth.loc[~out].copy()
        for metric in METRICS:
            measured[metric] = measured[metric] * rng.lognormal(0.0, NOISE, len(measured))
        name = f"fleet-{k:05d}"
        datadir.catalog.ensure_device(name)
        datadir.catalog.add_measurements(name, measured.to_dict("records"), info={"source": "bench/fleet.py"})
        held[name] = truth.loc[out].reset_index(drop=True)
    return held


def _peak_rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _warm_up() -> bool:
    import modeling.training.fleet  # noqa: F401  (the training stack, imported once before the clock starts)

    return True


def train_rate(datadir: DataDir, devices: list[str], workers: int, fit_kw: dict[str, Any]) -> dict[str, Any]:
    """Train every device on a LocalCluster of ``workers`` processes; rate and peak memory."""
    with dask_client(None, workers=workers) as client:
        client.run(_warm_up)
        report = train_fleet(datadir, devices, client, **fit_kw)
        peaks = client.run(_peak_rss_kib)
    failed = {r.device: r.error for r in report.failed}
    return {
        "workers": workers,
        "seconds": report.seconds,
        "per_minute": 60 * len(report.succeeded) / report.seconds,
        "task_seconds": float(np.mean([r.seconds for r in report.succeeded])) if report.succeeded else None,
        "peak_rss_mib": sorted(v / 1024 for v in peaks.values()),
        "failed": failed,
        "register_ms": 1000 * report.client_seconds / max(len(report.succeeded), 1),
    }


def fleet_accuracy(
    datadir: DataDir, held: dict[str, pd.DataFrame]
) -> tuple[dict[str, float], dict[str, float], float]:
    """Mean and median relative error of the active models on the held-out workloads against the
    truth, and the cache's estimated KiB per model."""
    registry = ModelRegistry(datadir)
    errors: dict[str, list[np.ndarray]] = {m: [] for m in METRICS}
    for name, truth in held.items():
        if truth.empty:
            continue
        pred = registry.load(name).predict_frame(truth[[f for f in WORKLOAD_FIELDS if f in truth]])
        for metric in METRICS:
            errors[metric].append(
                relative_errors(pred[f"pred_{metric}"].to_numpy(), truth[metric].to_numpy())
            )
    mre = {m: float(np.mean(np.concatenate(e))) for m, e in errors.items() if e}
    median = {m: float(np.median(np.concatenate(e))) for m, e in errors.items() if e}
    return mre, median, registry.cache.nbytes / max(len(registry.cache), 1) / 1024


# -- a real server -------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(port: int, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(), {"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        result: dict[str, Any] = json.loads(response.read())
        return result


def _rss_mib(pid: int) -> float:
    import psutil

    return float(psutil.Process(pid).memory_info().rss / 2**20)


def _ask_all(port: int, devices: list[str], workload: dict[str, Any]) -> dict[str, str]:
    return {
        d: _post(port, "/v1/predict", {"device": d, "workload": workload})["model_version"] for d in devices
    }


def server_memory(
    datadir: DataDir, devices: list[str], fit_kw: dict[str, Any], workers: int, refresh_ms: int
) -> dict[str, Any]:
    """RSS of a real server: empty, holding 1/4, 1/2 and all models, after two fleet retrains."""
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "SSDPREDICT_HOME": str(datadir.root),
        "SSDPREDICT_MODEL_REFRESH_MS": str(refresh_ms),
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "bench.fleet:server_without_preload",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=REPO,
    )
    workload = {"write_ratio": 0.3, "queue_depth": 8, "request_size": 16384, "randomness": 1}
    began = time.perf_counter()
    try:
        _wait_ready(port, server)
        steps = sorted({0, len(devices) // 4, len(devices) // 2, len(devices)})
        held: list[tuple[int, float]] = []
        for k in steps:
            _ask_all(port, devices[:k], workload)
            held.append((k, _rss_mib(server.pid)))
        counts = np.array([k for k, _ in held], dtype=float)
        rss = np.array([r for _, r in held])
        slope, intercept = np.polyfit(counts, rss, 1)
        fitted = slope * counts + intercept
        r2 = 1 - float(np.sum((rss - fitted) ** 2) / max(np.sum((rss - rss.mean()) ** 2), 1e-12))
        before = _ask_all(port, devices, workload)
        after_rounds = []
        for _ in range(2):
            with dask_client(None, workers=workers) as client:
                report = train_fleet(datadir, devices, client, **fit_kw)
            wanted = {r.device: r.value.version for r in report.succeeded}
            deadline = time.monotonic() + 30 + refresh_ms / 1000
            while True:  # the server finds the new versions by itself within the refresh interval
                served = _ask_all(port, devices, workload)
                if all(served[d] == v for d, v in wanted.items()):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("the server did not pick up the retrained versions")
                time.sleep(refresh_ms / 1000)
            after_rounds.append(_rss_mib(server.pid))
        changed = sum(before[d] != served[d] for d in devices)
        return {
            "seconds": time.perf_counter() - began,
            "steps": held,
            "per_model_mib": float(slope),
            "linear_r2": r2,
            "holding_all_mib": held[-1][1],
            "after_retrains_mib": after_rounds,
            "versions_changed": changed,
            "refresh_ms": refresh_ms,
        }
    finally:
        server.terminate()
        server.wait(timeout=30)


def _share(k: int, n: int) -> str:
    return f"{round(100 * k / n) if n else 0} %"


def server_without_preload() -> Any:
    """The service app, but without loading every model at start (so growth per model shows)."""
    import service.api.main as main

    main.preload_models = lambda state: state.preload_done.set()  # type: ignore[assignment]
    return main.create_app()


def _wait_ready(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError("the server exited")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the server did not start")


def main() -> None:
    """Run the benchmark and print its numbers."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", type=int, default=200, help="synthetic devices in the fleet")
    parser.add_argument("--workers", default="1,2", help="local cluster sizes to compare")
    parser.add_argument("--candidates", default="cart", help="estimator kinds, untuned (fast fleet training)")
    parser.add_argument("--folds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--refresh-ms", type=int, default=500, help="the server's SSDPREDICT_MODEL_REFRESH_MS"
    )
    parser.add_argument("--no-server", action="store_true", help="skip the server memory part")
    parser.add_argument("--home", type=Path, help="data directory to use (default: a temporary one)")
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="ssdpredict-bench-fleet-"))
    datadir = DataDir(home)
    fit_kw = {"folds": args.folds, "candidates": candidates_of_kinds(args.candidates.split(","))}
    sizes = [int(w) for w in args.workers.split(",")]
    print(
        f"fleet of {args.devices} synthetic devices in {home}; training: {args.candidates}, untuned,"
        f" {args.folds}-fold CV; machine: {os.cpu_count()} cores"
    )
    try:
        start = time.perf_counter()
        held = build_fleet(datadir, args.devices, args.seed)
        devices = sorted(held)
        print(
            f"ingested in {time.perf_counter() - start:.1f} s"
            f" ({sum(len(datadir.catalog.measurements(d)) for d in devices[:3]) / 3:.0f} points per device)"
        )
        rates = []
        for w in sizes:
            r = train_rate(datadir, devices, w, fit_kw)
            rates.append(r)
            peaks = ", ".join(f"{p:.0f}" for p in r["peak_rss_mib"])
            print(
                f"{w} worker(s): {r['seconds']:.1f} s, {r['per_minute']:.1f} devices/min"
                f" ({r['task_seconds']:.2f} s per device task), peak RSS per worker {peaks} MiB,"
                f" client registration {r['register_ms']:.1f} ms per device, failed {len(r['failed'])}"
            )
            for device, error in r["failed"].items():
                print(f"  failed: {device}: {error}")
        if len(rates) >= 2:
            print(
                f"scaling {sizes[-1]} vs {sizes[0]} workers:"
                f" {rates[-1]['per_minute'] / rates[0]['per_minute']:.2f}x"
                " (target at N = 200 on 2 quiet cores: >= 1.7x)"
            )
        acc, median, estimated_kib = fleet_accuracy(datadir, held)
        n_held = sum(len(t) for t in held.values())
        print(
            f"held-out error vs truth ({n_held} points), mean / median: "
            + ", ".join(f"{SHORT[m]} {acc[m]:.1%} / {median[m]:.1%}" for m in METRICS)
        )
        if not args.no_server:
            mem = server_memory(datadir, devices, fit_kw, sizes[-1], args.refresh_ms)
            print(
                "server RSS by models held: "
                + ", ".join(f"{_share(k, args.devices)} ({k}): {v:.0f} MiB" for k, v in mem["steps"])
            )
            print(
                f"  {mem['per_model_mib'] * 1024:.0f} KiB per model"
                f" (the cache's estimate: {estimated_kib:.0f} KiB),"
                f" linear fit R² {mem['linear_r2']:.3f}"
            )
            print(
                f"  holding all {args.devices}: {mem['holding_all_mib']:.0f} MiB; after retraining all twice:"
                f" {', '.join(f'{v:.0f}' for v in mem['after_retrains_mib'])} MiB"
                f" ({mem['versions_changed']} devices serving a new version;"
                f" {max(mem['after_retrains_mib']) - mem['holding_all_mib']:+.0f} MiB against holding all"
                " before)"
            )
            print(f"server part: {mem['seconds']:.0f} s")
        print(f"whole run: {time.perf_counter() - start:.0f} s")
    finally:
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
