"""Capture a block trace of a device: blktrace where it works, kernel tracepoints otherwise.

Methods, tried in order (or the one named):

1. ``blktrace``: ``blktrace -d DEV -w SECONDS -D DIR``; writes ``DEV.blktrace.N`` files
   (format ``blktrace``).  Kernel lockdown forbids its debugfs files on many machines.
2. ``ftrace``: the kernel's ``block:block_rq_issue`` / ``block:block_rq_complete``
   tracepoints in a private tracefs instance (so other tracing users are undisturbed),
   filtered to the device and read from ``trace_pipe`` while capturing.  Tracefs is
   mounted at /sys/kernel/tracing if it is not already.
3. ``perf``: ``perf record -e block:block_rq_issue -e block:block_rq_complete``, then
   ``perf script`` (same event text as ftrace).

Tracepoint text is kept as ``tracepoints.txt`` and converted to ``trace.csv``, the generic
CSV (``timestamp_s,op,offset,size,complete_s``; issue/completion pairs), which every
command reads with ``--format auto``.  ``capture.json`` records the method used and why the
earlier methods were skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from modeling.errors import InvalidInput, SsdPredictError

TRACEFS = Path("/sys/kernel/tracing")
METHODS = ("auto", "blktrace", "ftrace", "perf")
EVENT_RE = re.compile(
    r"^\s*(?P<comm>.*?)\s+(?:(?P<pid>\d+)\s+)?\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?(?P<ts>\d+\.\d+):\s+"
    r"(?:block:)?(?P<event>block_rq_issue|block_rq_complete):\s+(?P<maj>\d+),(?P<min>\d+)\s+"
    r"(?P<rwbs>\S+)\s+(?:\d+\s+)?\((?P<cmd>[^)]*)\)\s+(?P<sector>\d+)\s+\+\s+(?P<nsect>\d+)"
)


class CaptureFailed(SsdPredictError):
    """No capture method worked."""

    kind = "unavailable"
    code = "capture_failed"


@dataclass
class CaptureResult:
    """What a capture produced and how."""

    method: str
    device: str
    duration_s: float
    trace_path: str
    format: str
    requests: int
    skipped: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return asdict(self)


def device_numbers(device: str) -> tuple[int, int]:
    """(major, minor) of a block device path; raises for anything else."""
    try:
        st = os.stat(device)
    except OSError as exc:
        raise InvalidInput(f"{device}: {exc.strerror}") from exc
    if not stat.S_ISBLK(st.st_mode):
        raise InvalidInput(f"{device} is not a block device")
    return os.major(st.st_rdev), os.minor(st.st_rdev)


def tracepoint_lines_to_csv(lines: Iterable[str], major: int, minor: int, out: Path) -> int:
    """Pair issue/complete tracepoint lines of one device and write the generic CSV."""
    pending: dict[tuple[int, bool], list[tuple[float, int]]] = {}
    rows: list[tuple[float, str, int, int, float | None]] = []
    for line in lines:
        m = EVENT_RE.match(line)
        if not m or int(m["maj"]) != major or int(m["min"]) != minor:
            continue
        rwbs = m["rwbs"]
        nsect = int(m["nsect"])
        if nsect == 0 or "D" in rwbs or not ("R" in rwbs or "W" in rwbs):
            continue  # flushes, discards and zero-length requests are not reads or writes
        is_w = "W" in rwbs
        sector = int(m["sector"])
        ts = float(m["ts"])
        if m["event"] == "block_rq_issue":
            pending.setdefault((sector, is_w), []).append((ts, len(rows)))
            rows.append((ts, "write" if is_w else "read", sector * 512, nsect * 512, None))
        else:
            waiting = pending.get((sector, is_w))
            if waiting:
                _, idx = waiting.pop(0)
                t, op, off, size, _ = rows[idx]
                rows[idx] = (t, op, off, size, ts)
    rows.sort(key=lambda r: r[0])
    t0 = rows[0][0] if rows else 0.0
    tmp = out.with_suffix(".tmp")
    with open(tmp, "w") as fh:
        fh.write("timestamp_s,op,offset,size,complete_s\n")
        for t, op, off, size, done in rows:
            fh.write(f"{t - t0:.9f},{op},{off},{size},{'' if done is None else f'{done - t0:.9f}'}\n")
    tmp.replace(out)
    return len(rows)


def _installed(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise CaptureFailed(f"{tool} is not installed")
    return path


def _ensure_tracefs(run: Callable[..., subprocess.CompletedProcess]) -> Path:
    if (TRACEFS / "events").is_dir():
        return TRACEFS
    proc = run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True, text=True)
    if proc.returncode != 0 or not (TRACEFS / "events").is_dir():
        raise CaptureFailed(f"tracefs is not available: {proc.stderr.strip() or 'mount failed'}")
    return TRACEFS


def capture_blktrace(
    device: str,
    duration_s: float,
    out_dir: Path,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> Path:
    """Run blktrace; return the first per-CPU file or raise ``CaptureFailed`` saying why."""
    binary = _installed("blktrace")
    if not Path("/sys/kernel/debug/block").is_dir():
        # blktrace talks to the kernel through debugfs; mount it as blktrace's docs say.
        run(["mount", "-t", "debugfs", "none", "/sys/kernel/debug"], capture_output=True, text=True)
    name = Path(device).name
    proc = run(
        [binary, "-d", device, "-w", str(max(1, round(duration_s))), "-D", str(out_dir), "-o", name],
        capture_output=True,
        text=True,
        timeout=duration_s + 30,
    )
    files = sorted(out_dir.glob(f"{name}.blktrace.*"))
    if proc.returncode != 0 or not files or all(f.stat().st_size == 0 for f in files):
        for f in files:
            f.unlink()
        msg = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise CaptureFailed(
            "blktrace failed: "
            + (msg[0] if msg else f"exit {proc.returncode}")
            + " (kernel lockdown forbids blktrace's debugfs files?)"
        )
    return files[0]


def capture_ftrace(
    device: str,
    duration_s: float,
    out_dir: Path,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> Path:
    """Record the block tracepoints of ``device`` in a private tracefs instance."""
    major, minor = device_numbers(device)
    root = _ensure_tracefs(run)
    inst = root / "instances" / f"ssdpredict-{os.getpid()}-{time.monotonic_ns() % 10**6}"
    raw = out_dir / "tracepoints.txt"
    try:
        inst.mkdir()
        (inst / "buffer_size_kb").write_text("8192")
        for ev in ("block_rq_issue", "block_rq_complete"):
            # The kernel's dev_t: major << 20 | minor.
            (inst / "events" / "block" / ev / "filter").write_text(f"dev == {(major << 20) | minor}")
            (inst / "events" / "block" / ev / "enable").write_text("1")
        fd = os.open(inst / "trace_pipe", os.O_RDONLY | os.O_NONBLOCK)
        deadline = time.monotonic() + duration_s
        with open(raw, "wb") as fh:
            try:
                stopping = False
                while True:
                    try:
                        data = os.read(fd, 1 << 20)
                    except BlockingIOError:
                        data = b""
                    if data:
                        fh.write(data)
                        continue
                    if stopping:
                        break
                    if time.monotonic() >= deadline:
                        for ev in ("block_rq_issue", "block_rq_complete"):
                            (inst / "events" / "block" / ev / "enable").write_text("0")
                        stopping = True  # one more drain after disabling
                        continue
                    time.sleep(0.05)
            finally:
                os.close(fd)
    except OSError as exc:
        raise CaptureFailed(f"ftrace capture failed: {exc}") from exc
    finally:
        if inst.exists():
            try:
                inst.rmdir()
            except OSError:
                pass
    return raw


def capture_perf(
    device: str,
    duration_s: float,
    out_dir: Path,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> Path:
    """Record the block tracepoints with ``perf record`` and dump them with ``perf script``."""
    perf = _installed("perf")
    data = out_dir / "perf.data"
    rec = run(
        [
            perf,
            "record",
            "-q",
            "-a",
            "-o",
            str(data),
            "-e",
            "block:block_rq_issue",
            "-e",
            "block:block_rq_complete",
            "--",
            "sleep",
            f"{duration_s:g}",
        ],
        capture_output=True,
        text=True,
        timeout=duration_s + 60,
    )
    if rec.returncode != 0:
        raise CaptureFailed(f"perf record failed: {rec.stderr.strip()[:200]}")
    raw = out_dir / "tracepoints.txt"
    with open(raw, "w") as fh:
        scr = run(
            [perf, "script", "-i", str(data)], stdout=fh, stderr=subprocess.PIPE, text=True, timeout=600
        )
    if scr.returncode != 0:
        raise CaptureFailed(f"perf script failed: {scr.stderr.strip()[:200]}")
    return raw


def capture(
    device: str,
    duration_s: float,
    out_dir: Path | str,
    *,
    method: str = "auto",
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> CaptureResult:
    """Capture ``duration_s`` seconds of ``device``'s block I/O into ``out_dir``."""
    if method not in METHODS:
        raise InvalidInput(f"unknown capture method {method!r}; use one of {', '.join(METHODS)}")
    if not 0 < duration_s <= 24 * 3600:
        raise InvalidInput("duration must be between 0 and 24 h")
    major, minor = device_numbers(device)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    order = ["blktrace", "ftrace", "perf"] if method == "auto" else [method]
    skipped: dict[str, str] = {}
    for m in order:
        try:
            if m == "blktrace":
                path = capture_blktrace(device, duration_s, out, run)
                from traces.formats.reader import open_trace

                n = len(open_trace(path, "blktrace").read_all())
                result = CaptureResult(m, device, duration_s, str(path), "blktrace", n, skipped)
            else:
                raw = (
                    capture_ftrace(device, duration_s, out, run)
                    if m == "ftrace"
                    else capture_perf(device, duration_s, out, run)
                )
                csv = out / "trace.csv"
                with open(raw, errors="replace") as fh:
                    n = tracepoint_lines_to_csv(fh, major, minor, csv)
                result = CaptureResult(m, device, duration_s, str(csv), "csv", n, skipped)
        except CaptureFailed as exc:
            skipped[m] = str(exc)
            continue
        (out / "capture.json").write_text(json.dumps(result.to_dict(), indent=2) + "\n")
        return result
    raise CaptureFailed("no capture method worked: " + "; ".join(f"{k}: {v}" for k, v in skipped.items()))
