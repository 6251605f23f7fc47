"""Open a trace of any supported format; ``auto`` detects the format from the first bytes.

Formats: ``blktrace`` (binary), ``blkparse`` (text), ``fio`` (iolog v2/v3), ``msr``,
``spc``, ``mqsim`` (5-field, ns), ``disksim`` (5-field, ms), ``csv`` (generic).
"""

from __future__ import annotations

import re
from pathlib import Path

from modeling.errors import TraceFormatError
from traces.formats import blkparse, blktrace, csvs, fiolog, mqsim
from traces.chunks import DEFAULT_CHUNK, Trace, rechunk

FORMATS = ("auto", "blktrace", "blkparse", "fio", "msr", "spc", "mqsim", "disksim", "csv")
_FIVE_RE = re.compile(rb"^\s*\d+(\.\d+)?\s+\d+\s+\d+\s+\d+\s+[01]\s*$")
_MSR_RE = re.compile(rb"^\d+,[^,]*,\d+,(read|write),\d+,\d+,\d+\s*$", re.I)
_SPC_RE = re.compile(rb"^\s*\d+,\s*\d+,\s*\d+,\s*[rw],\s*\d+(\.\d*)?(,.*)?$", re.I)


def detect_format(path: Path) -> str:
    """Name the format of the trace at ``path`` from its first bytes."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read trace: {exc.strerror}") from exc
    if not head:
        raise TraceFormatError(f"{path}: empty trace file")
    if blktrace.detect_byteorder(head):
        return "blktrace"
    if fiolog.version_of(head):
        return "fio"
    lines = [ln for ln in head.split(b"\n")[:-1] or head.split(b"\n") if ln.strip()]
    first = lines[0].strip() if lines else b""
    names = [n.strip().lower() for n in first.decode("utf-8", "replace").split(",")]
    if all(c in names for c in csvs.GENERIC_REQUIRED):
        return "csv"
    if first.lower().startswith(b"timestamp,hostname") or _MSR_RE.match(first):
        return "msr"
    if _SPC_RE.match(first):
        return "spc"
    if blkparse.looks_like(first):
        return "blkparse"
    if _FIVE_RE.match(first):
        return "mqsim"
    raise TraceFormatError(
        f"{path}: unknown trace format (line 1: {first[:60].decode('utf-8', 'replace')!r}); "
        f"name one with --format ({', '.join(FORMATS[1:])})"
    )


def open_trace(path: Path | str, fmt: str = "auto", *, chunk_requests: int = DEFAULT_CHUNK) -> Trace:
    """Open a trace; iterate the result for :class:`~traces.chunks.TraceChunk` objects."""
    path = Path(path)
    if fmt not in FORMATS:
        raise TraceFormatError(f"unknown trace format {fmt!r}; use one of {', '.join(FORMATS)}")
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such trace file")
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "blktrace":
        trace = blktrace.read(path)
    elif fmt == "blkparse":
        trace = blkparse.read(path)
    elif fmt == "fio":
        trace = fiolog.read(path)
    elif fmt in ("mqsim", "disksim"):
        trace = mqsim.read(path, fmt)
    else:
        trace = csvs.read(path, fmt)
    trace.chunks = rechunk(trace.chunks, chunk_requests)
    return trace
