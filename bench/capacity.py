"""Capacity under a latency target: how fast the search answers, and whether fio agrees.

Speed (default): one answer (``device_capacity`` of one mix: the model's curves once, then
the search) and the search alone, median of repeated runs; then ``fleet_capacity`` of one mix
over N devices, cloned from one trained device in a temporary data directory (each clone has
the device's measurements and its model under its own name, so every device pays its own
catalog read, model load and curve).  Targets: one answer < 20 ms, 200 devices < 5 s.

    .venv/bin/python bench/capacity.py                       # fio-plot's Intel S4610, trained here
    .venv/bin/python bench/capacity.py --home DIR --device D  # clone a device of your own

Validation (``--validate``, :mod:`bench.capacity_validate`): on the zram reference (and the
throttled one with ``--throttled N``, the loop one with ``--loop``), predicted capacities of 3
mixes under 2 targets each, then fio open loop with Poisson arrivals at 0.9x, 1.0x and 1.1x of each.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from modeling.serving.registry import ModelRegistry, register_model, write_model_files  # noqa: E402
from modeling.store import DataDir  # noqa: E402
from traces.capacity.device import device_capacity, mix_table, parse_mix  # noqa: E402
from traces.capacity.fleet import fleet_capacity  # noqa: E402
from traces.capacity.mix_latency import MixCurves  # noqa: E402
from traces.capacity.search import search_capacity  # noqa: E402
from traces.capacity.slo import parse_slo  # noqa: E402
from traces.predict.windows import device_source  # noqa: E402

MIX = "write_ratio=0.3,request_size=16k,randomness=1"


def train_fio_plot(home: Path) -> str:
    """A data directory holding fio-plot's Intel D3-S4610, trained with CART (seconds)."""
    from tests.service.utils import DEVICE, fio_files, ingest_fio, quick_train

    datadir = DataDir(home)
    ingest_fio(datadir, DEVICE, fio_files())
    quick_train(datadir, DEVICE)
    return DEVICE


def clone_devices(datadir: DataDir, source: str, n: int) -> list[str]:
    """``n`` copies of ``source``: its measurements and its active model, each under its own name."""
    frame = datadir.catalog.measurements(source)
    model = ModelRegistry(datadir).load(source)
    manifest = {
        k: v
        for k, v in datadir.catalog.active_model_version(source).manifest.items()
        if k not in ("format", "format_version", "device", "version", "files")
    }
    names, version = [], model.version
    rows = frame.to_dict("records")
    for k in range(n):
        name = f"clone-{k:04d}"
        datadir.catalog.ensure_device(name)
        datadir.catalog.add_measurements(name, rows, info={"source": "bench/capacity.py"})
        model.device, model.version = name, f"{version}-{k:04d}"  # versions are unique over the catalog
        register_model(datadir, write_model_files(datadir, model, manifest), activate=True)
        names.append(name)
    model.device, model.version = source, version
    return names


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """Median wall and CPU seconds of ``repeats`` calls, and the last result.

    The CPU time is this process's: on a shared machine (8 engineers on 2 cores) the wall
    time is mostly waiting for a core, and the CPU time is what a quiet machine would take.
    """
    wall, cpu, out = [], [], None
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu), out


def speed(datadir: DataDir, device: str, n_devices: int, slo_text: str, repeats: int) -> None:
    """Print one answer's time, the search's alone, and a fleet of ``n_devices`` clones."""
    slo, mixes = parse_slo(slo_text), mix_table([parse_mix(MIX)])
    registry = ModelRegistry(datadir)
    registry.load(device)  # the model cached, as in a running server
    t_one, c_one, one = timed(
        lambda: device_capacity(datadir, device, mixes, slo, registry=registry), repeats
    )
    model = registry.load(device)
    mc = MixCurves.of(model, mixes, device_source(datadir, device, model))
    t_search, c_search, _ = timed(lambda: search_capacity(mc, 0, slo), repeats)
    t_value, c_value, _ = timed(lambda: search_capacity(mc, 0, slo, interval=False), repeats)
    a = one.answers[0]
    print(
        f"device {device}, {MIX}, {slo}: {a.iops:,.0f} IO/s ({a.outcome}, interval {a.iops_lower:,.0f}-"
        f"{a.iops_upper:,.0f}); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(
        f"  one answer (curves + search, model cached): {t_one * 1e3:.1f} ms wall, {c_one * 1e3:.1f} ms CPU,"
        f" median of {repeats} (target < 20 ms)"
    )
    print(
        f"  the search alone: {t_search * 1e3:.1f} ms wall / {c_search * 1e3:.1f} ms CPU with its interval,"
        f" {t_value * 1e3:.1f} / {c_value * 1e3:.1f} ms without"
    )
    t0 = time.perf_counter()
    names = clone_devices(datadir, device, n_devices)
    print(f"  {n_devices} clones of {device} made in {time.perf_counter() - t0:.1f} s")
    fleet_registry = ModelRegistry(datadir)
    t_cold, c_cold, cold = timed(
        lambda: fleet_capacity(datadir, names, mixes, slo, registry=fleet_registry), 1
    )
    t_warm, c_warm, warm = timed(
        lambda: fleet_capacity(datadir, names, mixes, slo, registry=fleet_registry), 2
    )
    same = all(d.answers[0].iops == a.iops for d in warm.devices)
    print(
        f"  {len(cold.devices)} devices ranked: {t_cold:.2f} s wall / {c_cold:.2f} s CPU with every model"
        f" and measurement read from disk, {t_warm:.2f} s / {c_warm:.2f} s with them cached (target < 5 s);"
        f" every clone's answer equal to the device's: {same}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--home", type=Path, help="a data directory holding --device (default: train one)")
    parser.add_argument("--device", help="the device to time and clone")
    parser.add_argument("--devices", type=int, default=200, help="clones in the fleet run")
    parser.add_argument("--slo", default="p99<=1ms,mean<=500us")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--validate", action="store_true", help="fio against the predictions (zram)")
    parser.add_argument(
        "--throttled", type=int, help="with --validate: also the throttled reference at N IO/s"
    )
    parser.add_argument("--quick", action="store_true", help="with --validate: a smaller sweep")
    parser.add_argument("--no-zram", action="store_true", help="with --validate: leave zram out")
    parser.add_argument(
        "--loop", action="store_true", help="with --validate: also the loop reference (loop over tmpfs)"
    )
    parser.add_argument("--json", type=Path, help="with --validate: every row to this file")
    parser.add_argument(
        "--throttled-targets",
        help="with --throttled: AT,P99X,MEANX (targets P99X x the predicted p99 and MEANX x the mean at AT"
        " of the capacity) in place of the kind's (0.5,3,2)",
    )
    parser.add_argument(
        "--open-loop-requests", type=int, help="with --validate: the sweep's --open-loop-requests (1,500)"
    )
    parser.add_argument("--keep-home", type=Path, help="with --validate: copy each data directory here")
    args = parser.parse_args()
    if args.validate:
        from bench.capacity_validate import validate

        overrides: dict[str, Any] = {}
        if args.throttled_targets:
            overrides["targets"] = tuple(float(x) for x in args.throttled_targets.split(","))
        validate(
            open_loop_requests=args.open_loop_requests,
            quick=args.quick,
            throttled=args.throttled,
            zram=not args.no_zram,
            json_path=args.json,
            throttled_overrides=overrides,
            keep_home=args.keep_home,
            loop=args.loop,
        )
        return
    scratch = Path(tempfile.mkdtemp(prefix="bench-capacity-"))
    try:
        if args.home:
            home = scratch / "home"
            shutil.copytree(args.home, home)  # the clones go to a copy, never to the user's directory
            device = args.device or sys.exit("--home needs --device")
        else:
            home = scratch / "home"
            device = train_fio_plot(home)
        speed(DataDir(home), device, args.devices, args.slo, args.repeats)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
