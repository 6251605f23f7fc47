"""What a device showed in its measurements: :class:`PhysicsLimits`, the bounds of a physical answer.

Saved with the model; the laws of :mod:`modeling.serving.physics`, the pull into the
measured range of :mod:`modeling.serving.physics.extrapolation` and the ladder of
:mod:`modeling.serving.physics.ladder` read them, the matrix path as arrays and the single-row
path as the plain floats of :class:`RowLimits` (:meth:`PhysicsLimits.row_limits`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modeling.workload import WORKLOAD_FIELDS
from modeling.workload_matrix import FIELD_INDEX, outstanding_io

BANDWIDTH_TOLERANCE = 1.10
"""A predicted bandwidth may exceed the measured maximum of its mix by this factor (noise)."""
MIXES = ("read", "write", "mixed")
"""The bandwidth-cap groups: reads only, writes only, any mix of both."""
_WR = FIELD_INDEX["write_ratio"]


@dataclass(frozen=True)
class RowLimits:
    """:class:`PhysicsLimits` in plain floats (:meth:`PhysicsLimits.row_limits`), for one workload."""

    lo: list[float]
    hi: list[float]
    max_outstanding: float
    caps: tuple[float, ...]  # per mix (read, write, mixed): the bandwidth cap, tolerance included
    depths: list[float]  # the measured queue depths, ascending; empty: no ladder
    log_depths: list[float]  # their log2
    load_knee: float = 0.0  # K of the load law (PhysicsLimits.load_knee)
    size_knees: tuple[float, ...] = (0.0, 0.0, 0.0)  # per mix, s0 of the size law


@dataclass(frozen=True)
class PhysicsLimits:
    """What the device showed in its measurements: the bounds of a physical answer."""

    lo: np.ndarray  # per workload field, the smallest value measured
    hi: np.ndarray  # per workload field, the largest value measured
    max_outstanding: float  # largest queue_depth x numjobs measured
    bandwidth_max: Mapping[str, float]  # per mix (MIXES), the largest bandwidth measured
    depths: tuple[float, ...] = ()  # the queue depths measured, ascending (see ladder)
    load_knee: float = 0.0  # K of the load law (outstanding I/O); 0: the plateau
    size_knee: Mapping[str, float] = field(default_factory=dict)  # per mix, s0 (bytes); absent: 0

    @classmethod
    def measured(cls, w: np.ndarray, bandwidth: np.ndarray | None) -> PhysicsLimits:
        """The limits of measured workloads ``w`` (distinct rows) and their bandwidths (MiB/s).

        Without bandwidths (data of latencies only) no bandwidth is capped.
        """
        mix = mix_codes(w)
        peaks = (
            {}
            if bandwidth is None
            else {name: float(bandwidth[mix == i].max()) for i, name in enumerate(MIXES) if (mix == i).any()}
        )
        depths = tuple(np.unique(w[:, FIELD_INDEX["queue_depth"]]).tolist())
        return cls(w.min(axis=0), w.max(axis=0), float(outstanding_io(w).max()), peaks, depths)

    def caps(self) -> tuple[float, ...]:
        """Per mix (:data:`MIXES`), the largest bandwidth an answer may have (MiB/s).

        A mix never measured takes the largest of any mix; with no bandwidth measured, none.
        """
        top = max(self.bandwidth_max.values(), default=np.inf)
        return tuple(float(self.bandwidth_max.get(m, top)) * BANDWIDTH_TOLERANCE for m in MIXES)

    def row_limits(self) -> RowLimits:
        """These limits in plain floats, for the single-row path."""
        depths = self.depths if len(self.depths) >= 2 else ()  # as in ladder
        return RowLimits(
            lo=self.lo.tolist(),
            hi=self.hi.tolist(),
            max_outstanding=self.max_outstanding,
            caps=self.caps(),
            depths=list(depths),
            log_depths=np.log2(depths).tolist(),
            load_knee=self.load_knee,
            size_knees=self.size_knees(),
        )

    def size_knees(self) -> tuple[float, ...]:
        """Per mix (:data:`MIXES`), s0 of the size law (0: the bandwidth plateau)."""
        return tuple(float(self.size_knee.get(m, 0.0)) for m in MIXES)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form (see :meth:`from_json`)."""
        return {
            "lo": self.lo.tolist(),
            "hi": self.hi.tolist(),
            "max_outstanding": self.max_outstanding,
            "bandwidth_max": dict(self.bandwidth_max),
            "depths": list(self.depths),
            "load_knee": self.load_knee,
            "size_knee": dict(self.size_knee),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> PhysicsLimits:
        """Rebuild from :meth:`to_json`; raises ``ValueError`` on a malformed document."""
        lo = np.asarray(doc["lo"], dtype=np.float64)
        hi = np.asarray(doc["hi"], dtype=np.float64)
        peaks = {str(k): float(v) for k, v in dict(doc["bandwidth_max"]).items()}
        max_out = float(doc["max_outstanding"])
        depths = tuple(float(d) for d in doc["depths"])
        # limits saved before the laws were chosen hold neither: the plateaus
        knee = float(doc.get("load_knee", 0.0))
        size_knee = {str(k): float(v) for k, v in dict(doc.get("size_knee", {})).items()}
        knees = [*size_knee.values(), knee]
        if not set(size_knee) <= set(MIXES) or not all(np.isfinite(v) and v >= 0 for v in knees):
            raise ValueError("bad physics limits")
        if list(depths) != sorted(set(depths)) or not all(d >= 1 for d in depths):
            raise ValueError("bad physics limits")
        if lo.shape != (len(WORKLOAD_FIELDS),) or hi.shape != lo.shape or not set(peaks) <= set(MIXES):
            raise ValueError("bad physics limits")
        if not all(np.isfinite(v) and v > 0 for v in [*peaks.values(), max_out]):
            raise ValueError("bad physics limits")
        return cls(lo, hi, max_out, peaks, depths, knee, size_knee)


def mix_codes(w: np.ndarray) -> np.ndarray:
    """Index into :data:`MIXES` of each workload: 0 reads only, 1 writes only, 2 a mix."""
    wr = w[:, _WR]
    return np.where(wr <= 0.0, 0, np.where(wr >= 1.0, 1, 2))


def mix_code_row(row: Sequence[float]) -> int:
    """:func:`mix_codes` of one workload (a list of the fields)."""
    wr = row[_WR]
    return 0 if wr <= 0.0 else 1 if wr >= 1.0 else 2
