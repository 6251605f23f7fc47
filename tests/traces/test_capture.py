"""Capture for real on a loop device: blktrace if it works, else the tracepoint fallback."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from modeling.errors import InvalidInput
from service.cli.main import app
from traces.capture import CaptureFailed, capture, tracepoint_lines_to_csv
from traces.formats.reader import open_trace

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("losetup") is None, reason="needs root and losetup for a loop device"
)


@pytest.fixture
def loop_device(tmp_path: Path) -> Iterator[str]:
    """A 32 MiB loop device over a temp file, detached afterwards."""
    img = tmp_path / "loop.img"
    with open(img, "wb") as fh:
        fh.truncate(32 << 20)
    proc = subprocess.run(["losetup", "-f", "--show", str(img)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot create a loop device: {proc.stderr.strip()}")
    dev = proc.stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


def _load(dev: str, fio: str, delay: float) -> threading.Thread:
    """32 sequential 64 KiB writes, then 16 random 4 KiB reads, from one fio process (one
    start-up: two processes started late enough on a loaded CI machine to miss the window)."""
    def run() -> None:
        time.sleep(delay)
        subprocess.run(
            [
                fio,
                f"--filename={dev}",
                "--direct=1",
                "--name=w", "--rw=write", "--bs=64k", "--size=2m", "--ioengine=libaio", "--iodepth=2",
                "--name=r", "--stonewall", "--rw=randread", "--bs=4k", "--size=8m", "--io_size=64k",
                "--ioengine=psync",
            ],
            capture_output=True,
            check=True,
        )

    th = threading.Thread(target=run)
    th.start()
    return th


def _check(path: str) -> None:
    c = open_trace(path).read_all()
    writes, reads = c.take(c.is_write), c.take(~c.is_write)
    assert len(writes) == 32 and set(writes.size.tolist()) == {65536}
    assert sorted(writes.offset.tolist()) == [i * 65536 for i in range(32)]
    assert len(reads) == 16 and set(reads.size.tolist()) == {4096}
    assert not np.isnan(c.latency_s).any() and (c.latency_s > 0).all()


@needs_root
@pytest.mark.parametrize("method", ["ftrace", "perf"])
def test_tracepoint_fallback_captures_fio_io_on_loop_device(
    loop_device: str, fio_available: str, tmp_path: Path, method: str
) -> None:
    if method == "perf" and shutil.which("perf") is None:
        pytest.skip("perf is not installed")
    th = _load(loop_device, fio_available, 1.0 if method == "perf" else 0.5)
    result = capture(loop_device, 4.0, tmp_path / "cap", method=method)
    th.join()
    assert result.method == method and result.format == "csv"
    _check(result.trace_path)
    assert (tmp_path / "cap" / "capture.json").exists()


@needs_root
def test_auto_capture_says_which_method_and_why_others_were_skipped(
    loop_device: str, fio_available: str, tmp_path: Path
) -> None:
    th = _load(loop_device, fio_available, 1.0)
    runner = CliRunner()
    res = runner.invoke(
        app, ["trace", "capture", "--device", loop_device, "--duration", "4s", "-o", str(tmp_path / "auto")]
    )
    th.join()
    assert res.exit_code == 0, res.output
    assert "captured 48 requests with" in res.output
    if "with blktrace" not in res.output:  # locked-down kernel: the reason is printed
        assert "blktrace not used" in res.output
    path = next(p for p in (tmp_path / "auto").iterdir() if p.name == "trace.csv" or ".blktrace." in p.name)
    _check(str(path))


def test_capture_rejects_a_non_block_device(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(InvalidInput, match="not a block device"):
        capture(str(tmp_path / "f"), 1, tmp_path / "o")


def test_all_methods_failing_is_reported_fake_runner(tmp_path: Path) -> None:
    def fake_run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, 1, "", "Operation not permitted")

    with pytest.raises(CaptureFailed, match="perf"):
        capture(_any_block_device(), 0.1, tmp_path / "o", method="perf", run=fake_run)


def _any_block_device() -> str:
    for name in sorted(os.listdir("/sys/block")):
        if os.path.exists(f"/dev/{name}"):
            return f"/dev/{name}"
    pytest.skip("no block device node")


def test_tracepoint_text_of_ftrace_and_perf_is_paired(tmp_path: Path) -> None:
    lines = [
        "   dd-6569    [000] .....  1250.257363: block_rq_issue: 7,0 WS 65536 () 0 + 128 be,0,4 [dd]",
        "   dd-6569    [000] .....  1250.257400: block_rq_issue: 7,1 WS 65536 () 0 + 128 be,0,4 [dd]",
        "   ksoftirqd/0-14 [000] ..s..  1250.258830: block_rq_complete: 7,0 WS () 0 + 128 be,0,4 [0]",
        "   dd  6570 [001]  1250.261778: block:block_rq_issue: 7,0 R 4096 () 8 + 8 be,0,4 [dd]",
        "   swapper 0 [001]  1250.261798: block:block_rq_complete: 7,0 R () 8 + 8 be,0,4 [0]",
        "   kworker 9 [001]  1250.2618: block:block_rq_issue: 7,0 FF 0 () 0 + 0 none,0,0 [k]",
    ]
    n = tracepoint_lines_to_csv(lines, 7, 0, tmp_path / "t.csv")
    c = open_trace(tmp_path / "t.csv").read_all()
    assert n == 2 and c.is_write.tolist() == [True, False] and c.size.tolist() == [65536, 4096]
    assert c.latency_s.tolist() == pytest.approx([0.001467, 0.00002], abs=1e-7)
