"""A Gaussian-process regressor (kriging) with the same contract as the tree models.

Trees are piecewise constant: a held-out corner of the sweep (queue depth 1, one job)
gets its neighbour's value, and a power law between swept points becomes a staircase.
Many devices -- RAID arrays, controllers, disks -- are smooth in the log-scaled workload,
and there a Gaussian process with a Matérn kernel interpolates and extrapolates the trend.
Model selection (:mod:`modeling.training.selection`) picks it only where cross-validation says it
wins; devices with sharp regime changes (SATA SSDs at their NCQ limit) keep the trees.

Fitting uses scikit-learn's ``GaussianProcessRegressor`` (a constant x Matérn kernel with
one length scale per feature, plus white noise, hyperparameters by maximum likelihood).
What is kept is plain arrays -- the standardised training inputs, the dual coefficients,
length scales and amplitude -- so the model is stored as JSON and predicted with a few
numpy operations.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

from modeling.estimators.base import RegressorBase
from modeling.estimators.parallel import by_row_blocks

NUS = (0.5, 1.5, 2.5)
_CHUNK_ELEMENTS = 1 << 16
"""Kernel entries (query rows x training points) per block: 512 KiB of float64, which
stays in a core's cache through the block's half-dozen passes.  Blocks of 2048 rows
made the load gate's 98-point slope on 10,000 rows 3-10x slower (fresh pages and cache
misses on every pass), for the same numbers."""


def _blocks(fn: Callable[[int, int], np.ndarray], n: int, n_train: int) -> np.ndarray:
    """``fn`` over chunks of rows small enough for the cache (:data:`_CHUNK_ELEMENTS`
    kernel entries against ``n_train`` training points), blocks of chunks in parallel."""
    chunk = max(16, _CHUNK_ELEMENTS // max(n_train, 1))

    def chunks(start: int, stop: int) -> np.ndarray:
        parts = [fn(a, min(a + chunk, stop)) for a in range(start, stop, chunk)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    return by_row_blocks(chunks, n) if n else np.zeros(0)


def matern(r: np.ndarray, nu: float) -> np.ndarray:
    """The Matérn correlation at scaled distance ``r`` for nu in 0.5, 1.5, 2.5."""
    if nu == 0.5:
        return np.exp(-r)
    if nu == 1.5:
        s = np.sqrt(3.0) * r
        return (1.0 + s) * np.exp(-s)
    s = np.sqrt(5.0) * r
    return (1.0 + s + s * s / 3.0) * np.exp(-s)


class GaussianProcessModel(RegressorBase):
    """Gaussian-process regression with a Matérn kernel and per-feature length scales."""

    kind = "gp"

    def __init__(
        self,
        nu: float = 1.5,
        n_restarts: int = 2,
        max_rows: int = 3000,
        log_target: bool = True,
        linear_base: bool = False,
        random_state: int = 0,
    ) -> None:
        self.nu = nu
        self.n_restarts = n_restarts
        self.max_rows = max_rows
        self.log_target = log_target
        self.linear_base = linear_base
        self.random_state = random_state

    def _fit_core(self, X32: np.ndarray, target: np.ndarray, weight: np.ndarray | None) -> None:
        if self.nu not in NUS:
            raise ValueError(f"nu must be one of {NUS}, got {self.nu!r}")
        if len(X32) > self.max_rows:
            raise ValueError(f"a Gaussian process is limited to {self.max_rows} rows, got {len(X32)}")
        X = X32.astype(np.float64)
        mean, scale = X.mean(axis=0), X.std(axis=0)
        active = np.flatnonzero(scale > 0)
        self.gp_features_ = active
        self.gp_mean_, self.gp_scale_ = mean[active], scale[active]
        self.gp_offset_ = float(target.mean())
        spread = float(target.std()) or 1.0
        if len(active) == 0:  # nothing varies: the mean is all there is to learn
            self.gp_X_ = np.zeros((0, 0))
            self.gp_alpha_ = np.zeros(0)
            self.gp_length_ = np.ones(0)
            self.gp_amplitude_ = 0.0
            return
        Z = (X[:, active] - self.gp_mean_) / self.gp_scale_
        kernel = ConstantKernel(1.0, (1e-3, 1e3)) * Matern(
            np.ones(len(active)), (1e-2, 1e3), nu=self.nu
        ) + WhiteKernel(1e-2, (1e-8, 1.0))
        gp = GaussianProcessRegressor(
            kernel, n_restarts_optimizer=self.n_restarts, random_state=self.random_state
        )
        with warnings.catch_warnings():
            # a length scale at its bound just means "this feature barely matters"
            warnings.simplefilter("ignore", ConvergenceWarning)
            gp.fit(Z, (target - self.gp_offset_) / spread)
        fitted = gp.kernel_
        self.gp_length_ = np.broadcast_to(np.asarray(fitted.k1.k2.length_scale, float), (len(active),)).copy()
        self.gp_X_ = Z / self.gp_length_
        self.gp_amplitude_ = float(fitted.k1.k1.constant_value) * spread
        self.gp_alpha_ = np.asarray(gp.alpha_, dtype=np.float64).ravel()

    def prepare(self) -> None:
        """Precompute the input scaling and the training rows' squared norms."""
        self.gp_train_sq_ = np.einsum("ij,ij->i", self.gp_X_, self.gp_X_)
        self.gp_factor_ = 1.0 / (self.gp_scale_ * self.gp_length_)
        self.gp_shift_ = self.gp_mean_ * self.gp_factor_
        self.gp_slopes_: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def _scaled(self, X32: np.ndarray) -> np.ndarray:
        """Rows in the kernel's coordinates: standardised, then divided by the length scales."""
        return X32[:, self.gp_features_] * self.gp_factor_ - self.gp_shift_

    def _distances(self, q: np.ndarray) -> np.ndarray:
        d2 = np.einsum("ij,ij->i", q, q)[:, None] + self.gp_train_sq_ - 2.0 * (q @ self.gp_X_.T)
        return np.sqrt(np.maximum(d2, 0.0, out=d2), out=d2)

    def predict_core(self, X32: np.ndarray) -> np.ndarray:
        out = np.full(X32.shape[0], self.gp_offset_)
        if len(self.gp_alpha_) == 0:
            return out
        if X32.shape[0] == 1:
            out[0] += self._mean_of_one_row(X32[0])
            return out

        def block(start: int, stop: int) -> np.ndarray:
            r = self._distances(self._scaled(X32[start:stop]))
            return self.gp_amplitude_ * (matern(r, self.nu) @ self.gp_alpha_)

        return out + _blocks(block, X32.shape[0], len(self.gp_alpha_))

    def slope(self, X32: np.ndarray, direction: np.ndarray) -> np.ndarray:
        """Derivative of the (untransformed) prediction along ``direction`` in feature space.

        Analytic, from one kernel evaluation: for a Matérn kernel k(r), the derivative of
        k(|q - t|) along v is k'(r)/r (q - t).v, and k'(r)/r is smooth at r = 0 for
        nu = 1.5 (-3 exp(-sqrt(3) r)) and nu = 2.5 (-5/3 (1 + sqrt(5) r) exp(-sqrt(5) r)).
        """
        if self.nu == 0.5:
            raise ValueError("the slope of a nu=0.5 process is not defined at its training points")
        if len(self.gp_alpha_) == 0:
            return np.zeros(X32.shape[0])
        key = direction.tobytes()
        if key not in self.gp_slopes_:  # a composite asks along one direction, again and again
            v = direction[self.gp_features_] * self.gp_factor_
            self.gp_slopes_[key] = (v, self.gp_alpha_ * (self.gp_X_ @ v))
        v, weighted = self.gp_slopes_[key]
        if X32.shape[0] == 1:
            return np.array([self._slope_of_one_row(X32[0], v, weighted)])

        c2 = 3.0 if self.nu == 1.5 else 5.0  # the kernel's s = sqrt(c2) r
        scale = self.gp_amplitude_ * (-3.0 if self.nu == 1.5 else -5.0 / 3.0)
        minus_2c2_train = -2.0 * c2 * self.gp_X_
        c2_train_sq = c2 * self.gp_train_sq_

        def block(start: int, stop: int) -> np.ndarray:
            q = self._scaled(X32[start:stop])
            # s^2 = c2 |q - t|^2, built in one buffer: the blocks are large, and every
            # fresh array of them would cost page faults as well as a pass
            s = q @ minus_2c2_train.T
            s += c2_train_sq
            s += (c2 * np.einsum("ij,ij->i", q, q))[:, None]
            np.maximum(s, 0.0, out=s)
            np.sqrt(s, out=s)
            if self.nu == 1.5:  # k'(r)/r = -3 exp(-s)
                g = np.exp(np.negative(s, out=s), out=s)
            else:  # k'(r)/r = -5/3 (1 + s) exp(-s)
                g = np.exp(-s)
                s *= g
                g += s
            # sum_k alpha_k g_ik ((q_i - t_k) . v) = (q_i . v)(g alpha)_i - (g (alpha * t.v))_i
            return scale * ((q @ v) * (g @ self.gp_alpha_) - g @ weighted)

        return _blocks(block, X32.shape[0], len(self.gp_alpha_))

    # -- one row: the service's common case ---------------------------------------------------
    # The percentile models of the tail are often Gaussian processes (issue 13), so a single
    # prediction runs several; the matrix path's blocks and thread pool cost more than the
    # kernel on one row.  tests/modeling/test_fast_paths.py holds each equal to its twin.

    def _one_row_distances(self, x32: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The row's scaled coordinates ``q`` and its distance to every training point."""
        q = x32[self.gp_features_] * self.gp_factor_
        q -= self.gp_shift_
        d2 = self.gp_X_ @ q
        d2 *= -2.0
        d2 += self.gp_train_sq_
        d2 += q @ q
        np.maximum(d2, 0.0, out=d2)
        return q, np.sqrt(d2, out=d2)

    def _mean_of_one_row(self, x32: np.ndarray) -> float:
        """Twin of :meth:`predict_core` for one row, before its offset."""
        q, r = self._one_row_distances(x32)
        if self.nu == 0.5:
            k = np.exp(-r)
        else:
            s = r * math.sqrt(3.0 if self.nu == 1.5 else 5.0)
            k = 1.0 + s if self.nu == 1.5 else 1.0 + s + s * s / 3.0
            k *= np.exp(-s)
        return self.gp_amplitude_ * float(k @ self.gp_alpha_)

    def _slope_of_one_row(self, x32: np.ndarray, v: np.ndarray, weighted: np.ndarray) -> float:
        """Twin of :meth:`slope` for one row, with vectors instead of matrices."""
        q, r = self._one_row_distances(x32)
        if self.nu == 1.5:  # k'(r)/r = -3 exp(-sqrt(3) r)
            r *= -np.sqrt(3.0)
            g = np.exp(r, out=r)
            g *= -3.0
        else:  # k'(r)/r = -5/3 (1 + sqrt(5) r) exp(-sqrt(5) r)
            s = r * np.sqrt(5.0)
            g = np.exp(-s)
            g *= s + 1.0
            g *= -5.0 / 3.0
        return self.gp_amplitude_ * (float(q @ v) * float(g @ self.gp_alpha_) - float(g @ weighted))
