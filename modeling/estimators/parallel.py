"""Row-block parallelism for predicting large batches.

Tree traversal (scikit-learn's C loop), numpy's element-wise kernels, partitions and
small matrix products all release the GIL, so one thread per CPU on a block of rows each
gives a real speed-up on large batches, with the same numbers as the serial loop.  Small
inputs -- the service's single workloads -- never touch the pool.

BLAS's own threads do not help here: the products are thin (rows x a few hundred
training points), and its worker threads spin on the same cores as these blocks; the
API server limits BLAS to one thread by default.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

PARALLEL_MIN_ROWS = 2048
"""Rows from which a batch is split over threads (half as many rows at least per block)."""

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def cpus() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=cpus(), thread_name_prefix="predict")
        return _pool


def by_row_blocks(fn: Callable[[int, int], np.ndarray], n: int) -> np.ndarray:
    """``fn(start, stop)`` over consecutive row blocks, concatenated; parallel for large ``n``."""
    blocks = min(cpus(), max(1, n // (PARALLEL_MIN_ROWS // 2)))
    if n < PARALLEL_MIN_ROWS or blocks < 2:
        return fn(0, n)
    bounds = np.linspace(0, n, blocks + 1).astype(int).tolist()
    parts = _executor().map(lambda i: fn(bounds[i], bounds[i + 1]), range(blocks))
    return np.concatenate(list(parts))
