"""Issue 13's extrapolation in size on a fresh zram reference device (or the disk): sweep it, then the study.

The fio-plot sweeps hold only 4 KiB, so the size law (:mod:`modeling.serving.physics`)
needs a sweep that varies the size.  This makes a zram device
(:mod:`collectors.devices.reference`: RAM, 4 KiB sectors, CPU-bound, repeatable), sweeps
it through the ``ssdpredict`` CLI -- sizes 4 KiB to 1 MiB x queue depth 1 and 8 x
numjobs 1 and 2 x reads and writes x random and sequential, 1 s per point (about 4 minutes
on a quiet 2-core machine) -- removes the device, and runs ``bench/accuracy.py --study
extrapolation`` on it (trained at <= 128 KiB, scored at 256 KiB - 1 MiB; and the load
split).  zram is CPU-bound: on a loaded machine its numbers move with the other work.

    .venv/bin/python bench/size_sweep.py --keep            # prints the --device/--home recipe
    .venv/bin/python bench/size_sweep.py --disk /var/tmp   # a scratch file on the local disk instead
    .venv/bin/python bench/accuracy.py --study extrapolation --budget 3 --device reference --home HOME
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.trace_reference import DEVICE, run_cli, fio_wrapper  # noqa: E402
from collectors.devices.reference import create_reference, destroy_reference  # noqa: E402
from modeling.store import DataDir  # noqa: E402

PLAN = {
    "--write-ratios": "0,1",
    "--sizes": "4k,16k,32k,64k,128k,256k,512k,1m",
    "--queue-depths": "1,8",
    "--numjobs": "1,2",
    "--randomness": "0,1",
}
"""128 points: 5 sizes to train the size law on (3 to choose it by holding one out), 3 to score."""


def _sweep(home: Path, target: str, runtime: str, size_mib: int, *extra: str) -> None:
    plan = [x for kv in PLAN.items() for x in kv]
    run_cli(home, fio_wrapper(home), "sweep", "--device", DEVICE, "--target", target, *extra,
         "--plan", "grid", *plan, "--engine", "libaio", "--runtime", runtime, "--size", f"{size_mib}MiB")


def sweep(home: Path, runtime: str, size_mib: int) -> None:
    """Make a zram device, sweep it as device ``reference`` into ``home``, remove the device."""
    datadir = DataDir(home)
    ref = create_reference(datadir, "zram", size_mib << 20)
    print(f"zram {ref.path}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    start = time.time()
    try:
        _sweep(home, ref.path, runtime, size_mib - 16, "--destroy-data")
    finally:
        destroy_reference(datadir, ref.path)
    print(f"swept in {time.time() - start:.0f} s; load average {os.getloadavg()[0]:.1f}", flush=True)


def sweep_disk(home: Path, directory: Path, runtime: str, size_mib: int) -> None:
    """Sweep a scratch file on the local disk (made by the sweep, removed after) as device ``reference``.

    The disk is noisy (9-35 % between identical runs here, about 28 % drift over hours):
    the study's errors on it hold that noise too; run it twice to see the spread.
    """
    target = directory / f"ssdpredict-size-{os.getpid()}.img"
    load = os.getloadavg()[0]
    print(f"scratch file {target}; load average {load:.1f} on {os.cpu_count()} CPUs", flush=True)
    start = time.time()
    try:
        _sweep(home, str(target), runtime, size_mib)
    finally:
        target.unlink(missing_ok=True)
    print(f"swept in {time.time() - start:.0f} s; load average {os.getloadavg()[0]:.1f}", flush=True)


def main() -> None:
    """Sweep, then the extrapolation study on the sweep."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runtime", default="1s", help="fio runtime per point")
    ap.add_argument("--size-mib", type=int, default=512, help="zram device size")
    ap.add_argument("--budget", default="3", help="tuning seconds per training (bench/accuracy.py)")
    ap.add_argument("--keep", action="store_true", help="keep the data directory (the sweep)")
    ap.add_argument("--disk", type=Path, metavar="DIR",
                    help="sweep a scratch file in DIR (on the local disk) instead of a zram device")
    a = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-size-"))
    try:
        if a.disk:
            sweep_disk(home, a.disk, a.runtime, a.size_mib)
        else:
            sweep(home, a.runtime, a.size_mib)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, str(ROOT / "bench" / "accuracy.py"), "--study", "extrapolation",
                        "--budget", a.budget, "--device", DEVICE, "--home", str(home)], env=env, check=True)
    finally:
        if a.keep:
            print(f"data directory kept: {home} (--device {DEVICE} --home {home})")
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
