"""Builders of traces whose characteristics are known by construction."""

from __future__ import annotations

from pathlib import Path

import numpy as np


DATA = Path(__file__).resolve().parent.parent / "data" / "traces"


def write_generic(
    path: Path,
    t: np.ndarray,
    is_write: np.ndarray,
    offset: np.ndarray,
    size: np.ndarray,
    complete: np.ndarray | None = None,
    latency_us: np.ndarray | None = None,
) -> Path:
    """Write a generic CSV trace."""
    cols = ["timestamp_s", "op", "offset", "size"]
    if complete is not None:
        cols.append("complete_s")
    if latency_us is not None:
        cols.append("latency_us")
    with open(path, "w") as fh:
        fh.write(",".join(cols) + "\n")
        for i in range(len(t)):
            row = [f"{t[i]:.9f}", "write" if is_write[i] else "read", str(int(offset[i])), str(int(size[i]))]
            if complete is not None:
                row.append(f"{complete[i]:.9f}")
            if latency_us is not None:
                row.append(f"{latency_us[i]:.3f}")
            fh.write(",".join(row) + "\n")
    return path


def sequential_writes(n: int, size: int, depth: int, latency_s: float) -> tuple[np.ndarray, ...]:
    """Sequential writes keeping exactly ``depth`` requests in flight (one arrives as one completes)."""
    t = np.arange(n) * (latency_s / depth)
    off = np.arange(n, dtype=np.int64) * size
    return t, np.ones(n, bool), off, np.full(n, size), t + latency_s


def write_blktrace(
    path: Path,
    t: np.ndarray,
    is_write: np.ndarray,
    offset: np.ndarray,
    size: np.ndarray,
    complete: np.ndarray,
    byteorder: str = "<",
) -> Path:
    """Write Queue and Complete events as a blktrace binary (struct blk_io_trace, no payloads)."""
    from traces.formats.blktrace import TA_COMPLETE, TA_QUEUE, TC_READ, TC_WRITE, header_dtype

    n = len(t)
    times = np.concatenate([t, complete])
    order = np.argsort(times, kind="stable")
    hdr = np.zeros(2 * n, dtype=header_dtype(byteorder))
    rw = np.where(is_write, TC_WRITE, TC_READ)
    hdr["magic"] = 0x65617407
    hdr["sequence"] = np.arange(2 * n)
    hdr["time"] = np.round(times[order] * 1e9).astype(np.uint64)
    hdr["sector"] = np.tile(offset // 512, 2)[order]
    hdr["bytes"] = np.tile(size, 2)[order]
    hdr["action"] = np.concatenate([rw | TA_QUEUE, rw | TA_COMPLETE])[order]
    path.write_bytes(hdr.tobytes())
    return path
