"""fio iolog version 2 and version 3 (fio's HOWTO, "Trace file format").

v2: ``fio version 2 iolog`` then ``filename action`` (add/open/close) or
``filename action offset length`` (read/write/trim/sync/datasync/wait); time comes only
from ``wait`` actions (microseconds relative to the previous wait).
v3: ``fio version 3 iolog`` then the same lines prefixed by a timestamp in microseconds
from the start of the run (fio 3.33 writes and replays microseconds); no ``wait``.
Reads and writes are the requests; trims and syncs are skipped.  No latency field.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from modeling.errors import TraceFormatError
from traces.formats.fields import float_field, int_field, lines_locator, request_chunk
from traces.formats.text import iter_blocks
from traces.chunks import Trace, TraceChunk, TraceInfo

HEADERS = {b"fio version 2 iolog": 2, b"fio version 3 iolog": 3}
_IO = rb"(read|write|trim|sync|datasync|wait)[ \t]+(\d+)[ \t]+(\d+)"
_FILE = rb"(add|open|close)"
LINE_RE = {
    2: re.compile(rb"^[ \t]*()(\S+)[ \t]+(?:" + _IO + rb"|" + _FILE + rb")[ \t]*\r?$", re.M),
    3: re.compile(rb"^[ \t]*(\d+)[ \t]+(\S+)[ \t]+(?:" + _IO + rb"|" + _FILE + rb")[ \t]*\r?$", re.M),
}
NONBLANK_RE = re.compile(rb"^[ \t]*\S", re.M)


def version_of(head: bytes) -> int | None:
    """2 or 3 when ``head`` starts with a fio iolog header line."""
    first = head.split(b"\n", 1)[0].strip()
    return HEADERS.get(first)


def _chunks(path: Path, version: int) -> Iterator[TraceChunk]:
    rx = LINE_RE[version]
    clock_us = 0.0
    t0: float | None = None
    for first_line, block in iter_blocks(path, skip_lines=1):
        rows = rx.findall(block)
        if len(rows) != len(NONBLANK_RE.findall(block)):
            for i, line in enumerate(block.split(b"\n")):
                if line.strip() and not rx.match(line):
                    what = (
                        "wait is not allowed in v3"
                        if (version == 3 and b" wait " in line)
                        else "not a fio iolog line (truncated or corrupt?)"
                    )
                    raise TraceFormatError(f"{path}: line {first_line + i}: {what}")
        if version == 3 and any(r[2] == b"wait" for r in rows):
            raise TraceFormatError(f"{path}: the wait action is not allowed in a version 3 iolog")
        if not rows:
            continue
        arr = np.array(rows)
        action = arr[:, 2]
        keep = (action == b"read") | (action == b"write")
        if version == 3:
            t_us = float_field(arr[:, 0], "timestamp", path, lines_locator(block, first_line))
        else:
            is_wait = np.flatnonzero(action == b"wait")
            waits = np.zeros(len(arr))
            waits[is_wait] = float_field(
                arr[is_wait, 3], "wait", path, lines_locator(block, first_line, is_wait)
            )
            t_us = clock_us + np.cumsum(waits)
            clock_us = float(t_us[-1])
        if not keep.any():
            continue
        kept = np.flatnonzero(keep)
        locate = lines_locator(block, first_line, kept)
        offset = int_field(arr[kept, 3], "offset", path, locate)
        size = int_field(arr[kept, 4], "length", path, locate)
        if t0 is None:
            t0 = float(t_us[kept[0]])
        yield request_chunk(path, locate, (t_us[kept] - t0) / 1e6, action[kept] == b"write", offset, size)


def read(path: Path) -> Trace:
    """Open a fio iolog (version detected from its first line)."""
    with open(path, "rb") as fh:
        version = version_of(fh.read(64))
    if version is None:
        raise TraceFormatError(f"{path}: line 1: not a fio iolog header ('fio version 2|3 iolog')")
    return Trace(TraceInfo(f"fio-v{version}", [str(path)]), _chunks(Path(path), version))
