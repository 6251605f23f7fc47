"""Loaded device models, least recently used first out when over a memory budget.

A model's size is estimated once, by walking what it holds: numpy arrays (their buffers),
scikit-learn trees and XGBoost boosters (their serialised state, which is what they keep in
memory) and the Python containers around them; under a budget when it is loaded, without one
when the cache's size is first asked.  The estimate is a budget, not an RSS reading;
``bench/fleet.py`` compares the two.  Outside a server a model's lookup tables are built on
first use (:meth:`~modeling.serving.metric_models.ScopeModel.prepared`), after a budget's
estimate: that estimate leaves them out (on fio-plot's Intel D3-S4610 all 11 would add 52 KB
to its 84 KB; a capacity question builds 2).  A server's registry builds them at load
(``ModelRegistry(build_tables=True)``), so its estimate counts them.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from modeling.serving.device_model import DeviceModel


def estimate_bytes(obj: Any) -> int:
    """Approximate memory held by ``obj`` and everything it references (each object once)."""
    seen: set[int] = set()
    stack = [obj]
    total = 0
    while stack:
        item = stack.pop()
        if id(item) in seen or item is None or isinstance(item, (bool, int, float, type)):
            continue
        seen.add(id(item))
        if isinstance(item, np.ndarray):
            total += item.nbytes + 112
            if item.dtype == object:
                stack.extend(item.ravel().tolist())
            continue
        total += sys.getsizeof(item, 64)
        if isinstance(item, (str, bytes, bytearray, memoryview)):
            continue
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        elif callable(getattr(item, "save_raw", None)):  # an XGBoost Booster: its trees live in C++
            total += len(item.save_raw("ubj"))
            stack.append(vars(item))
        elif hasattr(item, "__dict__"):
            stack.append(vars(item))
        elif callable(item):
            continue
        else:  # extension objects (a scikit-learn Tree, an XGBoost Booster) describe themselves here
            try:
                stack.append(item.__getstate__())
            except Exception:  # an object that cannot say what it holds counts as its shell only
                continue
    return total


class ModelCache:
    """A thread-safe LRU of models by key, bounded by the sum of their estimated sizes.

    Without a bound a model is estimated only when :attr:`nbytes` is asked (a cold fleet's
    answers never ask: the walk was 0.6 of its 25 ms a device).
    """

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, tuple[DeviceModel, int | None]] = OrderedDict()
        self._bytes = 0  # of the entries estimated so far

    def get(self, key: Hashable) -> DeviceModel | None:
        """The cached model (now the most recently used), or None."""
        with self._lock:
            entry = self._items.get(key)
            if entry is None:
                return None
            self._items.move_to_end(key)
            return entry[0]

    def put(self, key: Hashable, model: DeviceModel, size: int | None = None) -> None:
        """Cache ``model``; the least recently used go until the rest fit (the newest always stays)."""
        if size is None and self.max_bytes is not None:
            size = estimate_bytes(model)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1] or 0
            self._items[key] = (model, size)
            self._bytes += size or 0
            while self.max_bytes is not None and self._bytes > self.max_bytes and len(self._items) > 1:
                _, (_, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped or 0

    def evict(self, doomed: Callable[[Hashable], bool]) -> int:
        """Drop every entry whose key ``doomed`` accepts; returns how many went."""
        with self._lock:
            keys = [k for k in self._items if doomed(k)]
            for key in keys:
                self._bytes -= self._items.pop(key)[1] or 0
            return len(keys)

    def keys(self) -> list[Hashable]:
        """Cached keys, least recently used first."""
        with self._lock:
            return list(self._items)

    @property
    def nbytes(self) -> int:
        """Sum of the cached models' estimated sizes (estimating those not estimated yet)."""
        with self._lock:
            pending = [(k, m) for k, (m, size) in self._items.items() if size is None]
            for key, model in pending:
                size = estimate_bytes(model)
                self._items[key] = (model, size)  # an existing key: its place in the order stays
                self._bytes += size
            return self._bytes

    def __len__(self) -> int:
        return len(self._items)
