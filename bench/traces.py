"""Benchmark of the traces package: parse throughput per format, and validation MRE.

Throughput: large generated traces (``--requests``, default 2,000,000) in every format are
parsed to the end; requests/s per format is printed (target >= 1,000,000 for the blktrace
binary and the 5-field text).

Validation: with ``--device NAME --home PATH`` (a device swept and trained on this
machine's disk, e.g. by ``make run``), the shared traces are replayed with fio on a scratch
file under PATH and the model's per-window predictions are compared with the replay; the
per-trace table of the reference run (both methods, drift, saturation) is printed beside
the disk's own repeat-noise floor.

    .venv/bin/python bench/traces.py                      # throughput only
    .venv/bin/python bench/traces.py --device local-scratch --home ~/.local/share/ssdpredict  # make run's
    .venv/bin/python bench/traces.py --reference --skip-throughput   # open-loop, zram (trace_reference.py)
    .venv/bin/python bench/traces.py --user-flow --skip-throughput   # user's commands (trace_user_flow.py)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from traces.characterize import characterize_chunks  # noqa: E402
from traces.formats.blktrace import TA_COMPLETE, TA_ISSUE, TA_QUEUE, TC_READ, TC_WRITE, header_dtype  # noqa: E402
from traces.formats.reader import open_trace  # noqa: E402

TESTDATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "traces"


def _workload(n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    t_ns = np.cumsum(rng.exponential(20_000, n)).astype(np.int64)  # ~50k IO/s
    is_w = rng.random(n) < 0.3
    sectors = rng.integers(0, 1 << 31, n)
    nsect = rng.choice([8, 16, 32, 128], n)
    lat_ns = rng.integers(50_000, 500_000, n)
    return t_ns, is_w, sectors, nsect, lat_ns


def gen_blktrace(path: Path, n: int) -> None:
    """Q, D and C events per request, plus a plug/unplug pair (8-byte payload) every 16 requests."""
    t, w, sec, ns, lat = _workload(n)
    rw = np.where(w, TC_WRITE, TC_READ)
    kinds = [(TA_QUEUE, t), (TA_ISSUE, t + 1000), (TA_COMPLETE, t + lat)]
    ev_t = np.concatenate([k[1] for k in kinds])
    ev_a = np.concatenate([rw | (k[0] | (1 << 22 if k[0] == TA_QUEUE else 0)) for k in kinds])
    ev_sec = np.tile(sec, 3)
    ev_b = np.tile(ns * 512, 3)
    plug = t[::16] + 500
    ev_t = np.concatenate([ev_t, plug, plug + 1])
    ev_a = np.concatenate([ev_a, np.full(len(plug), 9), np.full(len(plug), 10)])  # plug, unplug_io
    ev_sec = np.concatenate([ev_sec, np.zeros(2 * len(plug), np.int64)])
    ev_b = np.concatenate([ev_b, np.zeros(2 * len(plug), np.int64)])
    pdu = np.concatenate([np.zeros(3 * n + len(plug), np.int64), np.full(len(plug), 8)])
    order = np.argsort(ev_t, kind="stable")
    m = len(order)
    hdr = np.zeros(m, dtype=header_dtype("<"))
    hdr["magic"] = 0x65617407
    hdr["sequence"] = np.arange(m)
    hdr["time"] = ev_t[order]
    hdr["sector"] = ev_sec[order]
    hdr["bytes"] = ev_b[order]
    hdr["action"] = ev_a[order]
    hdr["device"] = 259 << 20
    hdr["pdu_len"] = pdu[order]
    sizes = 48 + hdr["pdu_len"].astype(np.int64)
    pos = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    buf = np.zeros(int(sizes.sum()), np.uint8)
    buf[pos[:, None] + np.arange(48)] = hdr.view(np.uint8).reshape(m, 48)
    path.write_bytes(buf.tobytes())


def _write_lines(path: Path, header: str, lines: np.ndarray) -> None:
    with open(path, "w") as fh:
        fh.write(header)
        fh.write("\n".join(lines.tolist()))
        fh.write("\n")


def _fmt(*cols: np.ndarray, sep: str = " ") -> np.ndarray:
    out = cols[0].astype(str)
    for c in cols[1:]:
        out = np.char.add(np.char.add(out, sep), c.astype(str))
    return out


def gen_text(path: Path, fmt: str, n: int) -> None:
    """The same workload in a text format."""
    t, w, sec, ns, lat = _workload(n)
    if fmt == "mqsim":
        _write_lines(path, "", _fmt(t, np.zeros(n, np.int64), sec, ns, (~w).astype(np.int64)))
    elif fmt == "fio":
        _write_lines(
            path,
            "fio version 3 iolog\n0 /dev/x add\n0 /dev/x open\n",
            _fmt(t // 1000, np.full(n, "/dev/x"), np.where(w, "write", "read"), sec * 512, ns * 512),
        )
    elif fmt == "msr":
        _write_lines(
            path,
            "",
            _fmt(
                128166372003061629 + t // 100,
                np.full(n, "hm"),
                np.ones(n, np.int64),
                np.where(w, "Write", "Read"),
                sec * 512,
                ns * 512,
                lat // 100,
                sep=",",
            ),
        )
    elif fmt == "spc":
        _write_lines(
            path,
            "",
            _fmt(
                np.zeros(n, np.int64),
                sec,
                ns * 512,
                np.where(w, "w", "r"),
                np.char.mod("%.6f", t / 1e9),
                sep=",",
            ),
        )
    elif fmt == "csv":
        _write_lines(
            path,
            "timestamp_s,op,offset,size,latency_us\n",
            _fmt(
                np.char.mod("%.9f", t / 1e9),
                np.where(w, "write", "read"),
                sec * 512,
                ns * 512,
                lat // 1000,
                sep=",",
            ),
        )
    elif fmt == "blkparse":
        rw = np.where(w, "W", "R")
        q = _fmt(
            np.full(n, "259,0    1"),
            np.arange(n),
            np.char.mod("%.9f", t / 1e9),
            np.full(n, "100  Q"),
            rw,
            sec,
            np.full(n, "+"),
            ns,
            np.full(n, "[fio]"),
        )
        c = _fmt(
            np.full(n, "259,0    1"),
            np.arange(n),
            np.char.mod("%.9f", (t + lat) / 1e9),
            np.full(n, "0  C"),
            rw,
            sec,
            np.full(n, "+"),
            ns,
            np.full(n, "[0]"),
        )
        order = np.argsort(np.concatenate([t, t + lat]), kind="stable")
        _write_lines(path, "", np.concatenate([q, c])[order])


def throughput(n: int, text_n: int, workdir: Path) -> None:
    """Print parse throughput per format."""
    print(
        f"parse throughput (requests/s), {n:,} requests for blktrace/mqsim, {text_n:,} for the others;"
        f" load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (cpu = process time)"
    )
    for fmt in ("blktrace", "mqsim", "fio", "msr", "spc", "csv", "blkparse"):
        count = n if fmt in ("blktrace", "mqsim") else text_n
        path = workdir / f"big.{fmt}"
        t0 = time.perf_counter()
        if fmt == "blktrace":
            gen_blktrace(path, count)
        else:
            gen_text(path, fmt, count)
        gen = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        got = sum(len(c) for c in open_trace(path, fmt))
        parse, parse_cpu = time.perf_counter() - t0, time.process_time() - c0
        trace = open_trace(path, fmt)
        t0 = time.perf_counter()
        characterize_chunks(trace.info, trace.chunks, window_s=1.0)
        both = time.perf_counter() - t0
        size_mb = path.stat().st_size / 1e6
        print(
            f"  {fmt:9s} {got:>10,} req {size_mb:7.1f} MB  parse {got / parse:>11,.0f} req/s wall"
            f" {got / parse_cpu:>11,.0f} req/s cpu   parse+characterize {got / both:>11,.0f} req/s wall"
            f"  (generated in {gen:.1f} s)"
        )
        path.unlink()


def validation(device: str, home: Path, window_s: float, quick: bool = False) -> None:
    """The reference run's table for a device swept on this machine's disk, beside its noise floor.

    The shared traces are replayed on a scratch file under ``home``; both methods are
    compared per window (``trace_reference.run_traces``), and the same replay of the wsrch
    cut is repeated to give the disk's own floor (no target: a disk's repeat drift here is
    about 28 %).
    """
    from modeling.store import DataDir
    from trace_reference import _cut, noise_floor, print_floor, run_traces

    datadir = DataDir(home)
    known = [d.name for d in datadir.catalog.list_devices()]
    if device not in known:  # before the replays, not after them
        raise SystemExit(f"no device {device!r} in {home}; devices there: {', '.join(known) or 'none'}")
    scratch = datadir.scratch_dir
    scratch.mkdir(parents=True, exist_ok=True)
    target = scratch / "trace-replay.img"
    out = Path(tempfile.mkdtemp(prefix="bench-disk-"))
    print(f"validation on device {device!r} (replay target {target}; results in {out})")
    wsrch = _cut(TESTDATA / "wsrch-small.trace", 10.0 if quick else 60.0, out / "wsrch-cut.trace")
    # (trace, window, capacity ceiling): a disk's replay path is not the bottleneck, so no ceiling
    traces = [(TESTDATA / "sample.blktrace.0", 0.1, 1.0), (TESTDATA / "tpcc-small.trace", 0.05, 1.0),
              (wsrch, window_s, 1.0)]
    try:
        print_floor(noise_floor(wsrch, str(target), window_s, 2))
        run_traces(datadir, device, str(target), traces, out)
    finally:
        target.unlink(missing_ok=True)


def main() -> None:
    """Run the benchmark."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--text-requests", type=int, default=500_000)
    ap.add_argument("--device")
    ap.add_argument("--home", type=Path)
    ap.add_argument("--window", type=float, default=1.0, help="validation window, seconds")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--reference", action="store_true",
                    help="open-loop validation on a fresh zram reference device (bench/trace_reference.py)")
    ap.add_argument("--user-flow", action="store_true",
                    help="the user's commands, exactly, on zram and throttled references"
                    " (bench/trace_user_flow.py)")
    ap.add_argument("--references", default="zram,throttled",
                    help="with --user-flow: which references, in order (zram, throttled)")
    ap.add_argument("--traces", default="shared,poisson,h2",
                    help="with --user-flow: which traces (shared, poisson, h2): one quiet run each")
    ap.add_argument("--keep-home", action="store_true",
                    help="with --user-flow: keep each reference's data directory (to predict again)")
    ap.add_argument("--quick", action="store_true",
                    help="with --reference: the short version (~7 min); with --device: a 10 s wsrch cut;"
                    " with --user-flow: one shared trace and one synthetic one per reference")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bench-trace-reference",
                    help="with --reference: where the synthetic traces and results go")
    args = ap.parse_args()
    if not args.skip_throughput:
        with tempfile.TemporaryDirectory(prefix="bench-traces-") as tmp:
            throughput(args.requests, args.text_requests, Path(tmp))
    if args.reference:
        from trace_reference import run

        run(args.quick, args.out)
    if args.user_flow:
        from trace_user_flow import run as run_user_flow

        kinds = tuple(k.strip() for k in args.references.split(","))
        subsets = tuple(t.strip() for t in args.traces.split(","))
        out = args.out.with_name("bench-trace-user-flow" + ("" if len(kinds) > 1 else f"-{kinds[0]}")
                                 + ("" if len(subsets) == 3 else f"-{'-'.join(subsets)}"))
        run_user_flow(args.quick, out, kinds, subsets, args.keep_home)
    if args.device:
        if args.home is None:
            ap.error("--device needs --home")
        validation(args.device, args.home, args.window, args.quick)


if __name__ == "__main__":
    main()
