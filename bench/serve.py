"""Serving benchmark: /v1/predict latency and throughput next to a trivial endpoint, and batch speed.

Usage::

    .venv/bin/python bench/serve.py                 # full run (3 rounds)
    .venv/bin/python bench/serve.py --rounds 1 --requests 1000 --quick-model
    .venv/bin/python bench/serve.py --home PATH     # reuse a home holding the trained device

A temporary data directory gets one device ingested from the real fio-plot results and
trained (the product's default training, or CART only with ``--quick-model``).  uvicorn
then serves the app in its own process on 127.0.0.1 (one worker), with one extra route,
``GET /bench/trivial`` -> ``{"ok": true}``, added by this script only for comparison.
The client is a small keep-alive HTTP/1.1 client on asyncio in this process (raw
sockets: an HTTP library would cost more CPU than the server on a 2-core machine).

Reported per concurrency (1, 8, 32 connections): p50 / p99 latency and requests/s of
the trivial endpoint, of single-workload /v1/predict, and of /v1/predict on a what-if device
(``whatif``: RAID 5 of 4 of the trained device, computed from its model; issue 26), and their
throughput ratios;
then /v1/predict/batch with 10,000 distinct random workloads, as rows and as columns, in workloads/s
(client-observed: request sent to response fully received), and one first batch of 10,000 new
workloads to the trained device and to the what-if (whose member-curve cache is then cold).
Each round interleaves the endpoints so background load hits both alike; the spread over
rounds is printed.  Targets (issue 5): p99 < 10 ms at 8 clients, predict >= 60 % of trivial,
batch >= 200,000 workloads/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fastapi import FastAPI  # noqa: E402

from collectors.fio.results import parse_fio_output  # noqa: E402
from modeling.derived.store import register_derived  # noqa: E402
from modeling.training.selection import Candidate  # noqa: E402
from modeling.store import DataDir  # noqa: E402
from modeling.training.train import train_device  # noqa: E402
from service.api.main import create_app  # noqa: E402

FIO_DATA = ROOT / "tests" / "data" / "fio-plot" / "HPDL380G8" / "HBA" / "INTEL_D3_S4610"
DEVICE = "intel-s4610"
WHATIF = "intel-s4610-raid5x4"


def bench_app() -> FastAPI:
    """The service app plus a trivial route, for comparison only (uvicorn --factory)."""
    app = create_app()

    @app.get("/bench/trivial")
    async def trivial() -> dict[str, bool]:
        return {"ok": True}

    return app


def build_home(home: Path, quick: bool) -> str:
    """Ingest the fio-plot device into ``home`` and train it; returns the model version."""
    datadir = DataDir(home)
    rows = [
        r.row for p in sorted(FIO_DATA.glob("*.json")) for r in parse_fio_output(p.read_text(), source=p.name)
    ]
    datadir.catalog.ensure_device(DEVICE)
    datadir.catalog.add_measurements(DEVICE, rows)
    kw: dict[str, Any] = (
        {"candidates": [Candidate("extended", "cart", (("min_samples_leaf", 1),))]} if quick else {}
    )
    return train_device(datadir, DEVICE, **kw).version


# -- a minimal keep-alive HTTP/1.1 client --------------------------------------------------


def http_request(method: str, path: str, body: bytes | None = None) -> bytes:
    """Encode one request (keep-alive)."""
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + (body or b"")


async def roundtrip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, raw: bytes
) -> tuple[int, bytes]:
    """Send one request and read its whole response; returns (status, body)."""
    writer.write(raw)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    lower = head.lower()
    i = lower.find(b"content-length:")
    if i < 0:
        raise RuntimeError("response without Content-Length")
    length = int(lower[i + 15 : lower.find(b"\r\n", i)])
    return status, await reader.readexactly(length)


async def load(
    port: int, requests: list[bytes], total: int, concurrency: int
) -> tuple[list[float], int, float]:
    """``total`` requests over ``concurrency`` connections; latencies (s), errors, wall time."""
    latencies: list[float] = []
    errors = 0
    remaining = total

    async def client(k: int) -> None:
        nonlocal remaining, errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 24)
        i = k
        try:
            while remaining > 0:
                remaining -= 1
                raw = requests[i % len(requests)]
                i += concurrency
                t = time.perf_counter()
                status, _ = await roundtrip(reader, writer, raw)
                latencies.append(time.perf_counter() - t)
                errors += status != 200
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(concurrency)))
    return latencies, errors, time.perf_counter() - start


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(port: int, timeout: float = 60.0) -> None:
    """Wait until /readyz answers 200."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status, _ = asyncio.run(_once(port, http_request("GET", "/readyz")))
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the server did not become ready")


async def _once(port: int, raw: bytes) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 24)
    try:
        return await roundtrip(reader, writer, raw)
    finally:
        writer.close()


def server_seconds(port: int, route: str) -> tuple[float, float]:
    """(sum of seconds, count) the app's own latency histogram holds for ``route``."""
    _, body = asyncio.run(_once(port, http_request("GET", "/metrics")))
    total = count = 0.0
    for line in body.decode().splitlines():
        if f'route="{route}"' in line and line.startswith("ssdpredict_http_request_duration_seconds_"):
            value = float(line.rsplit(" ", 1)[1])
            if line.startswith("ssdpredict_http_request_duration_seconds_sum"):
                total += value
            elif line.startswith("ssdpredict_http_request_duration_seconds_count"):
                count += value
    return total, count


def spread(values: list[float], fmt: str) -> str:
    """median [min..max] of rounds."""
    return (
        f"{format(statistics.median(values), fmt)} [{format(min(values), fmt)}..{format(max(values), fmt)}]"
    )


def main() -> None:
    """Run the benchmark and print the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--requests", type=int, default=2000, help="requests per endpoint, concurrency and round"
    )
    parser.add_argument("--batch-repeats", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=10_000)
    parser.add_argument(
        "--quick-model", action="store_true", help="CART only instead of the default training"
    )
    parser.add_argument("--home", type=Path, help="reuse a data directory holding the trained device")
    args = parser.parse_args()

    if args.home:
        home = args.home
        version = DataDir(home).catalog.active_model_version(DEVICE).version  # type: ignore[union-attr]
        print(f"device {DEVICE}: model {version} (reused from {home})")
    else:
        home = Path(tempfile.mkdtemp(prefix="ssdpredict-bench-serve-"))
        t = time.perf_counter()
        version = build_home(home, args.quick_model)
        print(
            f"device {DEVICE}: model {version} trained in {time.perf_counter() - t:.1f} s "
            f"({'CART only' if args.quick_model else 'default training'}); home {home}"
        )

    register_derived(DataDir(home), WHATIF, {"kind": "raid", "base": DEVICE, "level": 5, "members": 4,
                                             "chunk": 65536})
    port = free_port()
    env = {**os.environ, "SSDPREDICT_HOME": str(home), "SSDPREDICT_MAX_BATCH": str(args.batch_size)}
    env.pop("SSDPREDICT_API_TOKEN", None)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "bench.serve:bench_app",
            "--factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--no-access-log",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        wait_ready(port)
        rng = random.Random(1)
        workloads = [
            {
                "write_ratio": rng.choice([0.0, 0.3, 0.5, 1.0]),
                "queue_depth": rng.choice([1, 4, 16, 64]),
                "request_size": 4096,
                "randomness": 1.0,
                "numjobs": rng.choice([1, 2, 8, 32]),
            }
            for _ in range(64)
        ]
        predict = [
            http_request("POST", "/v1/predict", json.dumps({"device": DEVICE, "workload": w}).encode())
            for w in workloads
        ]
        whatif = [
            http_request("POST", "/v1/predict", json.dumps({"device": WHATIF, "workload": w}).encode())
            for w in workloads
        ]
        trivial = [http_request("GET", "/bench/trivial")]
        for raw in (predict[0], trivial[0], whatif[0]):  # warm-up (and a check that both answer 200)
            status, body = asyncio.run(_once(port, raw))
            assert status == 200, body
        print(
            f"server: uvicorn, 1 worker, 127.0.0.1:{port}; "
            f"cpus {os.cpu_count()}; python {platform.python_version()}"
        )
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        results: dict[tuple[str, int], list[dict[str, float]]] = {}
        for rnd in range(args.rounds):
            for c in (1, 8, 32):
                for name, reqs in (("trivial", trivial), ("predict", predict), ("whatif", whatif)):
                    asyncio.run(load(port, reqs, 200, c))  # warm-up at this concurrency
                    lat, errors, wall = asyncio.run(load(port, reqs, args.requests, c))
                    assert errors == 0, f"{errors} non-200 answers from {name}"
                    results.setdefault((name, c), []).append(
                        {"p50": pct(lat, 0.5) * 1e3, "p99": pct(lat, 0.99) * 1e3, "rps": len(lat) / wall}
                    )
            print(f"round {rnd + 1}/{args.rounds} done (load average {os.getloadavg()[0]:.2f})")

        print("\nsingle-workload latency and throughput: median [min..max] over rounds")
        print(f"{'clients':>7}  {'endpoint':8} {'p50 ms':>20} {'p99 ms':>20} {'req/s':>22}")
        for c in (1, 8, 32):
            for name in ("trivial", "predict", "whatif"):
                rows = results[(name, c)]
                print(
                    f"{c:>7}  {name:8} {spread([r['p50'] for r in rows], '.2f'):>20} "
                    f"{spread([r['p99'] for r in rows], '.2f'):>20} "
                    f"{spread([r['rps'] for r in rows], '.0f'):>22}"
                )
            ratios = [
                p["rps"] / t["rps"]
                for p, t in zip(results[("predict", c)], results[("trivial", c)], strict=True)
            ]
            print(f"{c:>7}  predict/trivial throughput ratio: {spread([100 * r for r in ratios], '.0f')} %")
            derived = [
                d["rps"] / p["rps"]
                for d, p in zip(results[("whatif", c)], results[("predict", c)], strict=True)
            ]
            print(f"{c:>7}  whatif/predict throughput ratio: {spread([100 * r for r in derived], '.0f')} %")

        p99_8 = statistics.median(r["p99"] for r in results[("predict", 8)])
        ratio_8 = statistics.median(
            p["rps"] / t["rps"] for p, t in zip(results[("predict", 8)], results[("trivial", 8)], strict=True)
        )

        # distinct workloads, as from a trace's windows: nothing for a cache to reuse
        rows = [
            {
                "write_ratio": round(rng.random(), 3),
                "queue_depth": rng.choice([1, 2, 4, 8, 16, 32, 64]),
                "request_size": rng.choice([4096, 8192, 16384, 65536, 131072, 262144]),
                "randomness": round(rng.random(), 3),
                "numjobs": rng.choice([1, 2, 4, 8]),
            }
            for _ in range(args.batch_size)
        ]
        shapes = {
            "rows": {"device": DEVICE, "workloads": rows},
            "columns": {"device": DEVICE, "columns": {f: [r[f] for r in rows] for f in rows[0]}},
        }
        batch_rates: dict[str, list[float]] = {}
        for shape, payload in shapes.items():
            before = server_seconds(port, "/v1/predict/batch")
            batch = http_request("POST", "/v1/predict/batch", json.dumps(payload).encode())
            rates = []
            for _ in range(args.batch_repeats + 1):
                lat, errors, _ = asyncio.run(load(port, [batch], 1, 1))
                assert errors == 0
                rates.append(args.batch_size / lat[0])
            batch_rates[shape] = rates[1:]  # the first call warms caches
            after = server_seconds(port, "/v1/predict/batch")
            inside = (after[0] - before[0]) / (after[1] - before[1])
            print(
                f"\nbatch ({shape}): {args.batch_size} workloads, {len(batch) / 1e6:.2f} MB request, "
                f"x {args.batch_repeats}: {spread(batch_rates[shape], ',.0f')} workloads/s; "
                f"mean time inside the app {inside * 1e3:.1f} ms "
                f"({args.batch_size / inside:,.0f} workloads/s)"
            )
        # first answers to workloads nobody asked before: the single-workload rows above repeat
        # 64 workloads, which the what-if's member-curve cache answers after the first pass
        fresh = [{**r, "write_ratio": round(rng.random(), 3)} for r in rows]
        for name, device in (("predict", DEVICE), ("whatif", WHATIF)):
            raw = http_request("POST", "/v1/predict/batch",
                               json.dumps({"device": device, "workloads": fresh}).encode())
            lat, errors, _ = asyncio.run(load(port, [raw], 1, 1))
            assert errors == 0
            rate = len(fresh) / lat[0]
            print(f"first batch of {len(fresh)} new workloads, {name:7}: {rate:,.0f} workloads/s")
        print("\ntargets:")
        print(f"  p99 at 8 clients  {p99_8:.2f} ms  (< 10 ms)       {'ok' if p99_8 < 10 else 'MISSED'}")
        print(
            f"  predict/trivial   {100 * ratio_8:.0f} %      (>= 60 %)      "
            f"{'ok' if ratio_8 >= 0.6 else 'MISSED'}"
        )
        for shape, rates in batch_rates.items():
            rate = statistics.median(rates)
            print(
                f"  batch ({shape:7}) {rate:,.0f} workloads/s (>= 200,000)  "
                f"{'ok' if rate >= 200_000 else 'MISSED'}"
            )
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
