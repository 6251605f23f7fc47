"""Benchmark of CSV ingest: time, peak memory and stored size for a large measurements CSV.

A CSV of ``--size`` (default 200 MB) is generated in a temporary folder: every workload
column (fractions with full float precision, as an LHS sweep writes them) and the main,
percentile and per-direction metrics.  It is then imported by ``ssdpredict ingest`` in a
child process, whose wall time and peak RSS (``getrusage`` of the child) are printed, with
the sizes of the catalog and of the stored Parquet.  Target: 200 MB in under a minute
and under 1 GB.

    .venv/bin/python bench/ingest.py               # 200 MB
    .venv/bin/python bench/ingest.py --size 20MB
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from modeling.workload import parse_size  # noqa: E402

BLOCK_ROWS = 100_000


def _block(rng: np.random.Generator, n: int) -> pd.DataFrame:
    size = rng.choice([4096, 8192, 16384, 65536, 131072, 1048576], n)
    qd = rng.choice([1, 2, 4, 8, 16, 32, 64, 128], n)
    iops = rng.uniform(1e3, 5e5, n)
    lat = qd / iops * 1e6
    return pd.DataFrame(
        {
            "write_ratio": rng.random(n),
            "queue_depth": qd,
            "request_size": size,
            "randomness": rng.random(n),
            "numjobs": rng.choice([1, 2, 4, 8], n),
            "iops": iops,
            "bandwidth_mib_s": iops * size / 2**20,
            "latency_mean_us": lat,
            "latency_p50_us": lat * 0.9,
            "latency_p99_us": lat * rng.uniform(1.5, 4, n),
            "read_iops": iops / 2,
            "write_iops": iops / 2,
        }
    )


def generate(path: Path, target_bytes: int, seed: int = 0) -> int:
    """Write a valid measurements CSV of about ``target_bytes``; return its row count."""
    rng = np.random.default_rng(seed)
    rows = 0
    with open(path, "w") as fh:
        header = True
        while fh.tell() < target_bytes:
            _block(rng, BLOCK_ROWS).to_csv(fh, index=False, header=header)
            header = False
            rows += BLOCK_ROWS
    return rows


def ingest_child(path: Path, home: Path) -> tuple[float, float, int, str]:
    """Run ``ssdpredict ingest`` on ``path`` in a child; (seconds, CPU seconds, peak RSS bytes, output)."""
    env = {**os.environ, "SSDPREDICT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "service.cli.main", "ingest", "-d", "bench", "--max-bytes", "100g", str(path)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"ingest failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    # ru_maxrss is KiB on Linux; the machine may be shared, so CPU time is printed beside wall time.
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, proc.stdout.strip()


def main() -> None:
    """Generate, ingest, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="200MB", help="CSV size, e.g. 20MB, 200MB, 1GB (default 200MB)")
    args = parser.parse_args()
    target = parse_size(args.size.upper().replace("B", "").lower())
    with tempfile.TemporaryDirectory(prefix="ssdpredict-bench-ingest-") as tmp:
        csv = Path(tmp) / "measurements.csv"
        t0 = time.perf_counter()
        rows = generate(csv, target)
        took = time.perf_counter() - t0
        print(f"generated {csv.stat().st_size / 1e6:.1f} MB, {rows:,} rows in {took:.1f} s")
        seconds, cpu, peak, output = ingest_child(csv, Path(tmp) / "home")
        catalog = sum(p.stat().st_size for p in (Path(tmp) / "home").glob("catalog.sqlite3*"))
        parquet = sum(p.stat().st_size for p in (Path(tmp) / "home" / "measurements").rglob("*.parquet"))
        print(output.splitlines()[-1])
        print(
            f"ingest: {seconds:.1f} s wall, {cpu:.1f} s CPU, peak RSS {peak / 2**20:.0f} MiB, "
            f"{rows / seconds:,.0f} rows/s"
        )
        print(f"stored: catalog {catalog / 2**20:.2f} MiB, Parquet {parquet / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
