"""Which law extends a device beyond its measured load and size: chosen by validation.

The serving path (:func:`modeling.serving.physics.laws.apply_physics`) extends an answer past
the largest measured outstanding I/O and the largest measured size with two one-parameter
laws; each contains the plain plateau as its zero:

* load, ``IOPS(L) = Xmax L / (L + K)`` (the closed-loop saturation curve of a device with
  a fixed service time and internal parallelism: ``1/X = 1/Xmax + (K/Xmax)/L``).  ``K = 0``
  is the plateau (IOPS flat beyond the measured load); ``K > 0`` lets IOPS still rise,
  ever more slowly, by at most ``(Lmax + K) / Lmax``;
* size, ``latency(s) = a + b s`` at a fixed load (a fixed cost per I/O plus a transfer
  time), written ``latency ~ s0 + s`` with ``s0 = a / b``: ``s0 = 0`` is the bandwidth
  plateau (latency proportional to size); ``s0 > 0`` lets bandwidth approach ``1/b``
  asymptotically, by at most ``(s_max + s0) / s_max``.

Neither law may be taken on faith: a device can be saturated already (most SSDs at
32 in flight), or, like some arrays, still climbing.  So each is chosen on the measured
points the way it will be used -- hold out the largest measured load (size) of every
series, fit the parameter on the two below it, predict the held-out point -- and kept only
where it predicts better than the plateau by :data:`MARGIN`; the parameter served is
then refitted on the two largest points.  Each series' parameter is fitted on its own and
the device's is their median: one outlying series (a noisy run) cannot set it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from modeling.serving.physics.limits import MIXES, mix_codes
from modeling.workload_matrix import FIELD_INDEX as _F
from modeling.workload_matrix import mean_request_size, outstanding_io

MARGIN = 0.9
"""A law other than the plateau must cut the held-out error to this share of the plateau's:
the plateau is the safer law (it never invents IOPS), so a tie goes to it."""
LOAD_KNEE_MAX = 1.0
"""K at most this many times the largest measured outstanding I/O: beyond the range IOPS
at most doubles, whatever two noisy points suggest."""
SIZE_KNEE_MAX = 1.0
"""s0 at most this many times the largest measured size: bandwidth beyond the range at
most doubles (the measured cap bounds it anyway)."""
_SIZES = [_F["request_size"], _F["read_size"], _F["write_size"]]


@dataclass
class LawChoice:
    """The law picked for one axis (load, or size of one mix), and why."""

    name: str  # "plateau" or the law's name
    param: float  # K (outstanding I/O) or s0 (bytes); 0 for the plateau
    plateau_mre: float = np.nan  # held-out error of each law (NaN: too few series)
    law_mre: float = np.nan
    series: int = 0

    def as_dict(self) -> dict[str, float | str | int]:
        """For reports."""
        return {"law": self.name, "param": self.param, "plateau_mre": self.plateau_mre,
                "law_mre": self.law_mre, "series": self.series}


@dataclass
class Laws:
    """The laws of a device: ``load_knee`` (K) and per mix ``size_knee`` (s0)."""

    load: LawChoice
    size: dict[str, LawChoice] = field(default_factory=dict)


def _series(w: np.ndarray, axis: list[int], x: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per combination of the other fields, the ``x`` values (ascending) and their row indices.

    Only series of three or more distinct values can hold one out.
    """
    rest = np.round(np.delete(w, axis, axis=1), 9)
    _, group = np.unique(rest, axis=0, return_inverse=True)
    group = np.asarray(group).ravel()
    out = []
    for g in np.unique(group):
        idx = np.flatnonzero(group == g)
        idx = idx[np.argsort(x[idx], kind="stable")]
        if len(np.unique(x[idx])) == len(idx) >= 3:
            out.append((x[idx], idx))
    return out


def _load_knee(l1: np.ndarray, x1: np.ndarray, l2: np.ndarray, x2: np.ndarray, cap: float) -> np.ndarray:
    """K of ``1/X = a + b/L`` through two points per series: 0 where IOPS stopped rising."""
    with np.errstate(divide="ignore", invalid="ignore"):
        b = (1 / x1 - 1 / x2) / (1 / l1 - 1 / l2)
        a = 1 / x2 - b / l2
        k = np.where(b <= 0, 0.0, np.where(a <= 0, cap, b / a))
    return np.clip(k, 0.0, cap)


def _size_knee(s1: np.ndarray, x1: np.ndarray, s2: np.ndarray, x2: np.ndarray, cap: float) -> np.ndarray:
    """s0 of ``latency ~ s0 + s`` (IOPS ~ 1 / (s0 + s) at a fixed load) through two points."""
    rho = x1 / x2  # the latency ratio at a fixed load
    with np.errstate(divide="ignore", invalid="ignore"):
        s0 = np.where(rho <= 1.0, cap, (s2 - rho * s1) / (rho - 1.0))
    return np.clip(s0, 0.0, cap)


_Fit = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float], np.ndarray]
_Predict = Callable[[np.ndarray, np.ndarray, np.ndarray, float], np.ndarray]


def _choose(name: str, fit: _Fit, predict: _Predict, series: list[tuple[np.ndarray, np.ndarray]],
            iops: np.ndarray, cap: float) -> LawChoice:
    """Hold out the top point of every series, fit on the two below, keep the better law."""
    if not series:
        return LawChoice("plateau", 0.0)
    top = [(s[-3], s[-2], s[-1], iops[i[-3]], iops[i[-2]], iops[i[-1]]) for s, i in series]
    v1, v2, v3, x1, x2, x3 = (np.array(c, dtype=np.float64) for c in zip(*top, strict=True))
    held = float(np.median(fit(v1, x1, v2, x2, cap)))
    law = float(np.mean(np.abs(predict(v2, x2, v3, held) / x3 - 1)))
    flat = float(np.mean(np.abs(predict(v2, x2, v3, 0.0) / x3 - 1)))
    if not (held > 0 and law < MARGIN * flat):
        return LawChoice("plateau", 0.0, flat, law, len(series))
    served = float(np.median(fit(v2, x2, v3, x3, cap)))
    return LawChoice(name if served > 0 else "plateau", served, flat, law, len(series))


def _load_predict(l2: np.ndarray, x2: np.ndarray, l3: np.ndarray, k: float) -> np.ndarray:
    return x2 * (l3 / l2) * (l2 + k) / (l3 + k)


def _size_predict(s2: np.ndarray, x2: np.ndarray, s3: np.ndarray, s0: float) -> np.ndarray:
    return x2 * (s0 + s2) / (s0 + s3)


def choose_laws(w: np.ndarray, iops: np.ndarray | None) -> Laws:
    """The load and size laws of measured workloads ``w`` (distinct rows) and their IOPS."""
    if iops is None or not len(w):
        return Laws(LawChoice("plateau", 0.0))
    oio = outstanding_io(w)
    k_cap = LOAD_KNEE_MAX * float(oio.max())
    # along queue depth at fixed numjobs: the axis the ladder and the grid vary fastest
    load = _choose("saturation", _load_knee, _load_predict, _series(w, [_F["queue_depth"]], oio), iops, k_cap)
    size = mean_request_size(w)
    s_cap = SIZE_KNEE_MAX * float(size.max())
    mixes = mix_codes(w)
    sizes = {}
    for code, mix in enumerate(MIXES):
        rows = np.flatnonzero(mixes == code)
        if len(rows):
            found = [(s, rows[i]) for s, i in _series(w[rows], _SIZES, size[rows])]
            sizes[mix] = _choose("linear", _size_knee, _size_predict, found, iops, s_cap)
    return Laws(load, sizes)
