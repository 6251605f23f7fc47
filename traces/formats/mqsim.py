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
from traces.formats.text import iter_blocks, numeric_table
from traces.model import SECTOR, Trace, TraceChunk, TraceInfo

TIME_UNITS = {"mqsim": 1e-9, "disksim": 1e-3}


def _chunks(path: Path, unit: float, what: str) -> Iterator[TraceChunk]:
    t0: float | None = None
    for first_line, block in iter_blocks(path):
        v = numeric_table(block, first_line, 5, path=path, what=what)
        if not len(v):
            continue
        kind = v[:, 4]
        if not np.isin(kind, (0.0, 1.0)).all():
            bad = first_line + int(np.argmax(~np.isin(kind, (0.0, 1.0))))
            raise TraceFormatError(f"{path}: line {bad}: request type must be 1 (read) or 0 (write)")
        if t0 is None:
            t0 = float(v[0, 0])
        yield TraceChunk.build(
            (v[:, 0] - t0) * unit,
            kind == 0.0,
            v[:, 2].astype(np.int64) * SECTOR,
            v[:, 3].astype(np.int64) * SECTOR,
        )


def read(path: Path, fmt: str = "mqsim") -> Trace:
    """Open a 5-field DiskSim/MQSim text trace."""
    unit = TIME_UNITS[fmt]
    return Trace(TraceInfo(fmt, [str(path)]), _chunks(Path(path), unit, f"{fmt} 5-field"))
