"""Calibrating a what-if with K measured points of the real device: a learned log-ratio.

:class:`LogRatioCorrection` is a scikit-learn estimator of ``log(measured / what-if)``
from three workload features (log2 in flight, write ratio, log2 mean request size):
either a constant (the median log-ratio) or a ridge line, whichever has the lower
leave-one-out error on the K points.  It is stored as plain numbers in the derived
device's JSON spec.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from modeling.errors import InvalidInput
from modeling.workload_matrix import FIELD_INDEX, mean_request_size, outstanding_io

_I = FIELD_INDEX
CALIBRATED_METRICS = ("iops", "latency_mean_us", "bandwidth_mib_s", "latency_p99_us")


def correction_features(w: np.ndarray) -> np.ndarray:
    """log2 in-flight, write ratio and log2 mean request size of workload rows."""
    return np.column_stack(
        [np.log2(outstanding_io(w)), w[:, _I["write_ratio"]], np.log2(mean_request_size(w))]
    )


class LogRatioCorrection(RegressorMixin, BaseEstimator):
    """``log(measured / what-if)`` as a constant or a ridge line, chosen by leave-one-out."""

    def __init__(self, alpha: float = 1.0) -> None:
        self.alpha = alpha

    def _line(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        mu = X.mean(axis=0)
        Xc = X - mu
        coef = np.linalg.solve(Xc.T @ Xc + self.alpha * np.eye(X.shape[1]), Xc.T @ (y - y.mean()))
        return np.concatenate([[y.mean() - mu @ coef], coef])

    def fit(self, X: Any, y: Any) -> LogRatioCorrection:
        """Choose constant or line by leave-one-out absolute log error; returns ``self``."""
        X, y = validate_data(self, X, y, y_numeric=True)
        n = len(y)
        loo = {"constant": 0.0, "linear": 0.0}
        for i in range(n):
            keep = np.arange(n) != i
            if n < 3:
                loo["linear"] = np.inf
                loo["constant"] += abs(y[i] - np.median(y[keep])) if n > 1 else 0.0
                continue
            loo["constant"] += abs(y[i] - np.median(y[keep]))
            c = self._line(X[keep], y[keep])
            loo["linear"] += abs(y[i] - (c[0] + X[i] @ c[1:]))
        self.kind_ = min(loo, key=lambda k: loo[k])
        self.loo_error_ = loo[self.kind_] / n
        if self.kind_ == "constant":
            self.coef_ = np.concatenate([[np.median(y)], np.zeros(X.shape[1])])
        else:
            self.coef_ = self._line(X, y)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """The log-ratio to add to the what-if's log prediction."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return self.coef_[0] + X @ self.coef_[1:]


def fit_calibration(
    w: np.ndarray, whatif: dict[str, np.ndarray], measured: dict[str, np.ndarray], device: str
) -> dict[str, Any]:
    """The JSON calibration of each metric both sides have, learned on ``device``'s points."""
    X = correction_features(w)
    metrics: dict[str, Any] = {}
    for m in CALIBRATED_METRICS:
        if m not in whatif or m not in measured:
            continue
        ok = (measured[m] > 0) & (whatif[m] > 0)
        if ok.sum() < 1:
            continue
        est = LogRatioCorrection().fit(X[ok], np.log(measured[m][ok]) - np.log(whatif[m][ok]))
        metrics[m] = {
            "kind": est.kind_,
            "coef": [float(c) for c in est.coef_],
            "loo_log_error": est.loo_error_,
        }
    if not metrics:
        raise InvalidInput(f"device {device!r} has no measured metric the what-if predicts")
    return {"device": device, "points": int(len(w)), "metrics": metrics}


def apply_calibration(calib: dict[str, Any] | None, w: np.ndarray, values: dict[str, np.ndarray]) -> None:
    """Multiply each calibrated metric by its learned ratio, in place."""
    if not calib:
        return
    X = correction_features(w)
    for m, c in calib["metrics"].items():
        if m in values:
            coef = np.asarray(c["coef"])
            values[m] = values[m] * np.exp(coef[0] + X @ coef[1:])


def parse_calibration(calib: Any) -> dict[str, Any]:
    """A checked copy of a stored calibration."""
    try:
        metrics = {}
        for m, c in calib["metrics"].items():
            if m not in CALIBRATED_METRICS or c["kind"] not in ("constant", "linear"):
                raise ValueError(m)
            coef = [float(x) for x in c["coef"]]
            if len(coef) != 4 or not all(np.isfinite(coef)):
                raise ValueError(m)
            metrics[m] = {
                "kind": c["kind"],
                "coef": coef,
                "loo_log_error": float(c.get("loo_log_error", 0.0)),
            }
        return {"device": str(calib["device"]), "points": int(calib["points"]), "metrics": metrics}
    except (KeyError, TypeError, ValueError, AttributeError):
        raise InvalidInput(
            "a derived device's calibration is malformed", details={"field": "calibration"}
        ) from None
