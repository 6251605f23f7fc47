"""Evaluate a whole forest of scikit-learn trees at once, for small batches.

``Tree.predict`` is fast in C but costs a few microseconds of call overhead per tree, so
a 60-tree forest spends ~0.5 ms on a single workload -- the service's common case.
:class:`PackedForest` lays every tree's nodes end to end and walks all trees in
lock-step with a handful of numpy operations per level (leaves loop onto themselves, so
``max_depth`` steps reach every leaf).  For a single row it first decides, for
every node at once, which child the row goes to -- one vectorised comparison over all
nodes -- so that each level is then a single gather.  Large batches still go tree by tree:
there the C loop wins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from modeling.estimators.parallel import by_row_blocks

SMALL_BATCH_LANES = 4096
"""Rows x trees up to which lock-step evaluation beats calling each tree."""


def tree_by_tree(
    trees: list[Any], X32: np.ndarray, combine: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """``combine`` of the ``(n_trees, n_rows)`` tree predictions, each tree by its own C loop.

    Large batches are split into row blocks predicted and combined in parallel
    (:func:`modeling.estimators.parallel.by_row_blocks`).
    """

    def block(start: int, stop: int) -> np.ndarray:
        part = X32[start:stop]
        leaves = np.empty((len(trees), stop - start))
        for i, tree in enumerate(trees):
            leaves[i] = tree.predict(part)[:, 0]
        return combine(leaves)

    return by_row_blocks(block, X32.shape[0])


class PackedForest:
    """The node arrays of several trees, concatenated, with each tree's root offset."""

    def __init__(self, trees: list[Any]) -> None:
        lefts, rights, features, thresholds, values, roots = [], [], [], [], [], []
        offset = 0
        for tree in trees:
            n = tree.node_count
            idx = np.arange(n)
            leaf = tree.children_left == -1
            lefts.append(np.where(leaf, idx, tree.children_left) + offset)
            rights.append(np.where(leaf, idx, tree.children_right) + offset)
            features.append(np.where(leaf, 0, tree.feature))
            # a leaf compares x <= +inf and "goes left" to itself
            thresholds.append(np.where(leaf, np.inf, tree.threshold))
            values.append(tree.value[:, 0, 0])
            roots.append(offset)
            offset += n
        # children interleaved: node k's left child at 2k, right child at 2k + 1
        self.children = (
            np.column_stack([np.concatenate(lefts), np.concatenate(rights)]).ravel().astype(np.intp)
        )
        self.feature = np.concatenate(features).astype(np.intp)
        self.threshold = np.concatenate(thresholds)
        self.value = np.concatenate(values)
        self.roots = np.asarray(roots, dtype=np.intp)
        self.depth = max(int(tree.max_depth) for tree in trees)
        self.node_count = offset
        self.left = self.children[0::2].copy()
        self.right_step = self.children[1::2] - self.left

    def leaf_values(self, X32: np.ndarray) -> np.ndarray:
        """``(n_trees, n_rows)`` leaf values; the same numbers as each tree's ``predict``."""
        n, d = X32.shape
        if n == 1:
            return self._leaves_of_one_row(X32)
        node = np.repeat(self.roots, n)  # lanes: tree-major, then row
        row_start = np.tile(np.arange(n, dtype=np.intp) * d, len(self.roots))
        # scikit-learn compares the float32 input, widened, with its float64 threshold
        flat = X32.astype(np.float64).ravel()
        for _ in range(self.depth):
            go_right = flat[row_start + self.feature[node]] > self.threshold[node]
            node = self.children[2 * node + go_right]
        return self.value[node].reshape(len(self.roots), n)

    def _leaves_of_one_row(self, X32: np.ndarray) -> np.ndarray:
        """Twin of :meth:`leaf_values` for one row: ``(n_trees, 1)`` leaf values.

        The row's next node is decided from every node at once (a leaf steps to itself), then
        each level is one gather, instead of a compare and a gather per level and tree.
        """
        x = X32[0].astype(np.float64)
        step = self.left + self.right_step * (x[self.feature] > self.threshold)
        node = self.roots
        for _ in range(self.depth):
            node = step[node]
        return self.value[node][:, None]


class ForestCells:
    """The cells into which every split threshold of a forest cuts the feature space.

    Two rows in one cell go the same way at every node of every tree, so they get the
    same prediction: a large batch is predicted at one row per cell it touches, and
    the rest copied (the same numbers, exactly).  Sweeps measure few levels of each
    field, so a batch of 10,000 random workloads touches fewer than half as many cells
    (a forest of tail latencies on INTEL_D3_S4610: 4,602), yet a lookup table of every
    cell would be too large to build (:mod:`modeling.estimators.compiled`).
    """

    MAX_SHARE = 0.75
    """Above this share of distinct cells in a batch, predicting every row is cheaper."""

    def __init__(self, trees: list[Any]) -> None:
        d = int(trees[0].n_features)
        inner = [tree.children_left != -1 for tree in trees]
        feature = np.concatenate([tree.feature[i] for tree, i in zip(trees, inner, strict=True)])
        threshold = np.concatenate([tree.threshold[i] for tree, i in zip(trees, inner, strict=True)])
        cuts = [np.unique(threshold[feature == f]).astype(np.float64) for f in range(d)]
        self.used = [f for f in range(d) if len(cuts[f])]
        self.thresholds = [cuts[f] for f in self.used]
        sizes = [len(th) + 1 for th in self.thresholds]
        self.strides = [int(np.prod(sizes[i + 1 :], dtype=np.float64)) for i in range(len(sizes))]
        # the flat cell index must fit an int64
        self.usable = bool(sizes) and float(np.prod(sizes, dtype=np.float64)) < 2.0**62

    def representatives(self, X32: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(one row per distinct cell, each row's index among them); None when not worth it."""
        if not self.usable:
            return None
        idx = np.zeros(X32.shape[0], dtype=np.int64)
        for col, th, stride in zip(self.used, self.thresholds, self.strides, strict=True):
            # x <= t goes left: the cell is the count of thresholds below x
            idx += np.searchsorted(th, X32[:, col].astype(np.float64), side="left") * stride
        cells, first, inverse = np.unique(idx, return_index=True, return_inverse=True)
        if len(cells) > self.MAX_SHARE * len(idx):
            return None
        return first, inverse
