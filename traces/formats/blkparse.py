"""blkparse's default text output (``blkparse -i trace``), the per-event lines.

Event line: ``dev cpu seq time pid action rwbs sector + nsectors [process]``, e.g.
``259,0 1 2 0.000000184 21279 Q RA 2348060440 + 8 [fio]``.  Queue (Q) events of reads and
writes are the requests, Complete (C) events give their latency; a trace without Q events
uses Issue (D) events.  The per-CPU summary blkparse prints at the end is skipped.  A line
that is neither an event nor part of that summary is an error naming the line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from modeling.errors import TraceFormatError
from traces.formats.fields import Locate, float_field, int_field, lines_locator, request_chunk
from traces.formats.text import iter_blocks
from traces.chunks import SECTOR, Trace, TraceChunk, TraceInfo
from traces.formats.pairing import EventPairer, direction_key

_HEAD = rb"^[ \t]*\d+,\d+[ \t]+\d+[ \t]+\d+[ \t]+"
# Every event line: time, action, then (for request events) rwbs, sector and size.
LINE_RE = re.compile(
    _HEAD
    + rb"(\d+\.\d+)[ \t]+\d+[ \t]+([A-Za-z]{1,2})"
    + rb"(?:[ \t]+([A-Z]+)(?:[ \t]+(\d+)[ \t]+\+[ \t]+(\d+))?)?[^\n]*$",
    re.M,
)
HEADER_RE = re.compile(_HEAD + rb"\d+\.\d+[ \t]+\d+[ \t]+\S+")
SUMMARY_RE = re.compile(rb"^(CPU\d+|Total) \(", re.M)


def looks_like(head: bytes) -> bool:
    """True when the first line of ``head`` is a blkparse event line."""
    return HEADER_RE.match(head) is not None


def _summary_start(block: bytes) -> int | None:
    """Offset where blkparse's closing summary starts, if it is in ``block``."""
    hits = [i for i in (block.find(b"\nCPU"), block.find(b"\nTotal (")) if i >= 0]
    if block.startswith((b"CPU", b"Total (")):
        hits.append(-1)
    for i in sorted(hits):
        if SUMMARY_RE.match(block, i + 1):
            return i + 1
    return None


def _bad_line(block: bytes, first_line: int, path: Path, why: str) -> TraceFormatError:
    for i, line in enumerate(block.split(b"\n")):
        m = LINE_RE.match(line)
        if line.strip() and (
            m is None
            or (
                m.group(2) in (b"Q", b"C", b"D")
                and m.group(3)
                and re.search(rb"[RW]", m.group(3))
                and not m.group(4)
            )
        ):
            return TraceFormatError(
                f"{path}: line {first_line + i}: {why}: {line[:80].decode('utf-8', 'replace')!r}"
            )
    return TraceFormatError(f"{path}: lines {first_line}+: {why}")


Events = tuple[Locate, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _events(path: Path) -> Iterator[Events]:
    """Per block: a locator and the request events' time (s), action, rwbs, offset and size (bytes)."""
    blocks = iter_blocks(path)
    pending = next(blocks, None)
    while pending is not None:
        first_line, block = pending
        pending = next(blocks, None)
        cut = _summary_start(block)
        if cut is not None:
            block = block[:cut]
        rows = LINE_RE.findall(block)
        n_lines = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
        if len(rows) != n_lines - block.count(b"\n\n") - (1 if block.startswith(b"\n") else 0):
            raise _bad_line(block, first_line, path, "not a blkparse event line")
        if (pending is None or cut is not None) and not block.endswith(b"\n"):
            last = block.rsplit(b"\n", 1)[-1]
            if not re.search(rb"(\]|\) \d+|\] \d+)\s*$", last):
                line_no = first_line + block.count(b"\n")
                raise TraceFormatError(f"{path}: line {line_no}: truncated blkparse event line")
        if rows:
            arr = np.array(rows)
            action, rwbs, sector = arr[:, 1], arr[:, 2], arr[:, 3]
            req = np.isin(action, (b"Q", b"C", b"D")) & (
                (np.char.find(rwbs, b"R") >= 0) | (np.char.find(rwbs, b"W") >= 0)
            )
            if (req & (sector == b"")).any():
                raise _bad_line(block, first_line, path, "request event without 'sector + size'")
            kept = np.flatnonzero(req)
            arr = arr[kept]
            locate = lines_locator(block, first_line, kept)
            yield (
                locate,
                float_field(arr[:, 0], "timestamp", path, locate),
                arr[:, 1],
                arr[:, 2],
                int_field(arr[:, 3], "sector", path, locate, scale=SECTOR),
                int_field(arr[:, 4], "size", path, locate, scale=SECTOR),
            )
        if cut is not None:
            return


def _subset(locate: Locate, rows: np.ndarray) -> Locate:
    return lambda i: locate(int(rows[i]))


def _requests(path: Path) -> Iterator[TraceChunk]:
    pairer = EventPairer()
    t0 = 0.0  # blkparse times are already relative to the trace start
    arrival: bytes | None = None
    for locate, t, action, rwbs, offset, nbytes in _events(path):
        has_w = np.char.find(rwbs, b"W") >= 0
        has_r = np.char.find(rwbs, b"R") >= 0
        rw = (has_w | has_r) & (np.char.find(rwbs, b"D") < 0) & (nbytes > 0)
        if arrival is None:
            if (rw & (action == b"Q")).any():
                arrival = b"Q"
            elif (rw & (action == b"D")).any():
                arrival = b"D"
        a = np.flatnonzero(rw & (action == (arrival or b"Q")))
        c = rw & (action == b"C")
        arrivals = request_chunk(path, _subset(locate, a), t[a] - t0, has_w[a], offset[a], nbytes[a])
        out = pairer.feed(arrivals, t[c] - t0, direction_key(offset[c], has_w[c]), nbytes[c])
        if len(out):
            yield out
    rest = pairer.finish()
    if len(rest):
        yield rest


def read(path: Path) -> Trace:
    """Open blkparse default text output."""
    return Trace(TraceInfo("blkparse", [str(path)], latency_source="pairs"), _requests(Path(path)))
