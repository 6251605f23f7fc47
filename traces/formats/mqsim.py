"""The 5-field ASCII trace of DiskSim and MQSim: ``time device sector size_sectors type``.

``type`` is 1 for a read, 0 for a write; sector and size are in 512-byte units.  The two
simulators differ only in the time unit: MQSim uses nanoseconds (format ``mqsim``, what
``auto`` assumes), DiskSim milliseconds (format ``disksim``).  No latency field.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from modeling.errors import TraceFormatError
from traces.formats.fields import float_field, int_field, lines_locator, request_chunk
from traces.formats.text import iter_blocks, numeric_table
from traces.chunks import SECTOR, Trace, TraceChunk, TraceInfo

TIME_UNITS = {"mqsim": 1e-9, "disksim": 1e-3}


def _chunks(path: Path, unit: float, what: str) -> Iterator[TraceChunk]:
    t0: float | None = None
    for first_line, block in iter_blocks(path):
        v = numeric_table(block, first_line, 5, path=path, what=what)
        if not len(v):
            continue
        locate = lines_locator(block, first_line)
        kind = v[:, 4]
        bad = ~np.isin(kind, (0.0, 1.0))
        if bad.any():
            where = locate(int(np.argmax(bad)))
            raise TraceFormatError(f"{path}: {where}: request type must be 1 (read) or 0 (write)")
        t = float_field(v[:, 0], "timestamp", path, locate)
        if t0 is None:
            t0 = float(t[0])
        yield request_chunk(
            path,
            locate,
            (t - t0) * unit,
            kind == 0.0,
            int_field(v[:, 2], "sector", path, locate, scale=SECTOR),
            int_field(v[:, 3], "size", path, locate, scale=SECTOR),
        )


def read(path: Path, fmt: str = "mqsim") -> Trace:
    """Open a 5-field DiskSim/MQSim text trace."""
    unit = TIME_UNITS[fmt]
    return Trace(TraceInfo(fmt, [str(path)]), _chunks(Path(path), unit, f"{fmt} 5-field"))
