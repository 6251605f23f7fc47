"""Bounded memory on every trace input (issue 25, item 1).

A file without newlines used to be carried whole as "the last line": a 1 GB sparse file
took `trace characterize` to 12.9 GB, and a 60 MB upload took the server from 0.3 to 1 GB.
Each parser now refuses a line over 1 MiB, naming it, and uploads stream to scratch.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from modeling.errors import TraceFormatError
from modeling.store import DataDir
from tests.conftest import REPO
from tests.service.test_uvicorn import free_port
from traces.formats.reader import open_trace
from traces.formats.text import iter_blocks

GIB = 1 << 30
DEVICE = "synth"  # the trained device of tests/traces/conftest.py
RSS_LIMIT_KIB = 300 * 1024
# What the file holds before its newline-free gigabyte, per format, and the line named.
HEADS = {
    "auto": (b"timestamp_s,op,offset,size\n", 2),
    "csv": (b"timestamp_s,op,offset,size\n", 2),
    "msr": (b"", 1),
    "spc": (b"0,8,4096,r,0.0\n", 2),
    "mqsim": (b"", 1),
    "disksim": (b"0.0 0 8 8 1\n", 2),
    "blkparse": (b"259,0 1 2 0.000000184 21279 Q RA 2348060440 + 8 [fio]\n", 2),
    "fio": (b"fio version 3 iolog\n", 2),
}


def _sparse(path: Path, head: bytes, size: int = GIB) -> Path:
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(size)
    return path


# Linux credits the high-water RSS of the process that forks to the program it execs, so
# a pytest worker that has trained a model (~700 MB) would be measured, not the command.
# A small Python in between forks the command and reports its children's peak alone.
_MEASURE = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
    "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def _peak_rss_kib(argv: list[str]) -> tuple[int, int, str]:
    """(exit code, peak RSS in KiB, stderr) of ``argv`` run to completion."""
    proc = subprocess.run([sys.executable, "-c", _MEASURE, *argv], cwd=REPO, capture_output=True, check=True)
    code, peak = proc.stdout.split()
    return int(code), int(peak), proc.stderr.decode()


@pytest.mark.slow
@pytest.mark.parametrize("fmt", HEADS)
def test_gigabyte_without_newlines_is_refused_in_bounded_memory(tmp_path: Path, fmt: str) -> None:
    head, line = HEADS[fmt]
    path = _sparse(tmp_path / "z.trace", head)
    code, peak, err = _peak_rss_kib(
        [sys.executable, "-m", "service.cli.main", "trace", "characterize", str(path), "--format", fmt]
    )
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert f"{path}: line {line}: longer than 1048576 bytes" in lines[0]
    assert peak < RSS_LIMIT_KIB, f"peak RSS {peak} KiB"


@pytest.mark.parametrize("fmt", [f for f in HEADS if f != "auto"])
def test_every_text_parser_names_the_overlong_line(tmp_path: Path, fmt: str) -> None:
    head, line = HEADS[fmt]
    path = _sparse(tmp_path / "z.trace", head, len(head) + (4 << 20))
    with pytest.raises(TraceFormatError, match=rf"line {line}: longer than 1048576 bytes"):
        open_trace(path, fmt).read_all()


def test_blocks_refuse_a_long_line_after_short_ones(tmp_path: Path) -> None:
    path = tmp_path / "t"
    path.write_bytes(b"a\nb\n" + b"x" * 5000 + b"\nc\n")
    with pytest.raises(TraceFormatError, match="line 3: longer than 1000 bytes"):
        list(iter_blocks(path, block_bytes=4096, max_line=1000))
    path.write_bytes(b"a\n" + b"x" * 900 + b"\nc")
    assert b"".join(b for _, b in iter_blocks(path, block_bytes=64, max_line=1000)) == path.read_bytes()


def _server(home: Path, **env: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.cli.main", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO, env={**os.environ, "SSDPREDICT_HOME": str(home), **env},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            if httpx.get(base + "/healthz", timeout=5).status_code == 200:
                return proc, base
        except httpx.TransportError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
        time.sleep(0.2)


def _hwm_kib(pid: int) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmHWM:"):
            return int(row.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.slow
def test_trace_upload_streams_to_scratch_and_is_refused_over_the_limit(trained: DataDir) -> None:
    proc, base = _server(trained.root, SSDPREDICT_MAX_UPLOAD_BYTES=str(80 << 20))
    try:
        before = _hwm_kib(proc.pid)
        body = b"timestamp_s,op,offset,size\n" + bytes(60 << 20)
        for route in ("predict-trace", "validate"):
            r = httpx.post(f"{base}/v1/devices/{DEVICE}/{route}", files={"file": ("z.csv", body)},
                           data={"format": "csv"}, timeout=120)
            assert r.status_code == 422, r.text
            assert "z.csv: line 2: longer than 1048576 bytes" in r.json()["error"]["message"]
        grown = _hwm_kib(proc.pid) - before
        # the multipart body itself passes through memory once (60 MiB); the parser adds little
        assert grown < 150 * 1024, f"server grew {grown} KiB for a 60 MiB upload"
        r = httpx.post(f"{base}/v1/devices/{DEVICE}/predict-trace",
                       files={"file": ("big.csv", body + bytes(30 << 20))}, timeout=120)
        assert r.status_code == 413 and r.json()["error"]["code"] == "too_large", r.text
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_measurement_upload_is_read_in_pieces(trained: DataDir) -> None:
    """The device-upload route read the whole body into memory (issue 25, small ones): now the
    form parser's spooled file is read in pieces, as the trace routes do."""
    proc, base = _server(trained.root, SSDPREDICT_MAX_UPLOAD_BYTES=str(200 << 20))
    try:
        row = b"0,1,4096,1,9000\n"
        # refused at the first row: the server reads the head only (it read the whole body before)
        body = b"write_ratio,queue_depth,request_size,randomness,iops\n0,1,4096,1,lots\n"
        body += row * ((150 << 20) // len(row))
        before = _hwm_kib(proc.pid)
        r = httpx.post(f"{base}/v1/devices/big/sweeps", files={"file": ("m.csv", body)}, timeout=300)
        assert r.status_code == 422 and "lots" in r.text, r.text
        grown = _hwm_kib(proc.pid) - before
        # the multipart body passes through the server once on its way to the spooled file
        assert grown < 100 * 1024, f"server grew {grown} KiB for a 150 MiB upload"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
