"""The one columnar trace representation: chunks of parallel numpy arrays.

Every parser yields :class:`TraceChunk` objects in arrival order.  Columns:

* ``time_s``   -- arrival (queue/issue) time in seconds from the trace start, float64
* ``is_write`` -- True for writes, False for reads (other operations are dropped), bool
* ``offset``   -- byte offset, int64
* ``size``     -- bytes, int64
* ``latency_s`` -- completion minus arrival in seconds, float64, NaN where unknown

:class:`TraceInfo` says where latency came from: ``"pairs"`` (matched issue/completion
events, so outstanding I/O is known exactly), ``"response_time"`` (a per-request latency
field, as in MSR Cambridge) or ``None`` (arrivals only).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

LatencySource = Literal["pairs", "response_time"] | None
COLUMNS = ("time_s", "is_write", "offset", "size", "latency_s")
SECTOR = 512
DEFAULT_CHUNK = 1 << 20  # requests per chunk: big enough for numpy to pay off, small in memory


@dataclass
class TraceChunk:
    """A block of requests as parallel arrays (see the module docstring)."""

    time_s: np.ndarray
    is_write: np.ndarray
    offset: np.ndarray
    size: np.ndarray
    latency_s: np.ndarray

    def __len__(self) -> int:
        return len(self.time_s)

    @classmethod
    def build(
        cls,
        time_s: np.ndarray,
        is_write: np.ndarray,
        offset: np.ndarray,
        size: np.ndarray,
        latency_s: np.ndarray | None = None,
    ) -> TraceChunk:
        """Make a chunk with canonical dtypes (latency NaN when not given)."""
        n = len(time_s)
        lat = np.full(n, np.nan) if latency_s is None else np.asarray(latency_s, dtype=np.float64)
        return cls(
            np.asarray(time_s, dtype=np.float64),
            np.asarray(is_write, dtype=bool),
            np.asarray(offset, dtype=np.int64),
            np.asarray(size, dtype=np.int64),
            lat,
        )

    @classmethod
    def empty(cls) -> TraceChunk:
        """A chunk with no requests."""
        return cls.build(np.empty(0), np.empty(0, bool), np.empty(0, np.int64), np.empty(0, np.int64))

    def take(self, index: np.ndarray | slice) -> TraceChunk:
        """The requests selected by a mask, index array or slice."""
        return TraceChunk(
            self.time_s[index],
            self.is_write[index],
            self.offset[index],
            self.size[index],
            self.latency_s[index],
        )

    @staticmethod
    def concat(chunks: list[TraceChunk]) -> TraceChunk:
        """Join chunks end to end."""
        chunks = [c for c in chunks if len(c)]
        if not chunks:
            return TraceChunk.empty()
        if len(chunks) == 1:
            return chunks[0]
        return TraceChunk(*(np.concatenate([getattr(c, k) for c in chunks]) for k in COLUMNS))

    def to_frame(self) -> pd.DataFrame:
        """The chunk as a DataFrame with an ``op`` column ('read'/'write')."""
        df = pd.DataFrame({k: getattr(self, k) for k in COLUMNS})
        df.insert(1, "op", np.where(self.is_write, "write", "read"))
        return df.drop(columns="is_write")


@dataclass
class TraceInfo:
    """What is known about a trace besides its requests."""

    format: str
    paths: list[str] = field(default_factory=list)
    latency_source: LatencySource = None


@dataclass
class Trace:
    """An opened trace: its info and a one-shot iterator of chunks."""

    info: TraceInfo
    chunks: Iterator[TraceChunk]

    def __iter__(self) -> Iterator[TraceChunk]:
        return self.chunks

    def read_all(self) -> TraceChunk:
        """Every request in one chunk (small traces and tests only)."""
        return TraceChunk.concat(list(self.chunks))


def rechunk(chunks: Iterator[TraceChunk], size: int = DEFAULT_CHUNK) -> Iterator[TraceChunk]:
    """Regroup chunks into chunks of at most ``size`` requests, dropping empty ones."""
    buf: list[TraceChunk] = []
    n = 0
    for chunk in chunks:
        if not len(chunk):
            continue
        buf.append(chunk)
        n += len(chunk)
        if n >= size:
            whole = TraceChunk.concat(buf)
            full = len(whole) // size * size
            for start in range(0, full, size):
                yield whole.take(slice(start, start + size))
            rest = whole.take(slice(full, None))
            buf, n = ([rest], len(rest)) if len(rest) else ([], 0)
    if buf:
        yield TraceChunk.concat(buf)
