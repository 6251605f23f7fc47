"""The KDiskMark-style summary: four standard tests, read and write, measured or predicted.

KDiskMark (and CrystalDiskMark before it) reports four tests that storage engineers
compare devices by: sequential 1 MiB at queue depth 8 and 1, random 4 KiB at queue depth
32 with 16 threads and at queue depth 1, each as 100 % reads and 100 % writes.  A test
the sweep measured is reported as measured (the median of its repeats); any other is
predicted by the device's model, with the model's extrapolation flag.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from modeling.serving.device_model import DeviceModel
from modeling.workload import KIB, METRICS, MIB, SIZE_FIELDS, WORKLOAD_FIELDS, Workload, format_size
from modeling.workload_matrix import workload_matrix


@dataclass(frozen=True)
class StandardTest:
    """One KDiskMark test: a name and its workload shape."""

    name: str
    request_size: int
    randomness: float
    queue_depth: int
    numjobs: int

    def workload(self, write_ratio: float) -> Workload:
        """The test's workload for 100 % reads (0) or 100 % writes (1)."""
        return Workload.model_validate(
            {
                "write_ratio": write_ratio,
                "queue_depth": self.queue_depth,
                "request_size": self.request_size,
                "randomness": self.randomness,
                "numjobs": self.numjobs,
            }
        )


STANDARD_TESTS: tuple[StandardTest, ...] = (
    StandardTest("SEQ1M Q8T1", MIB, 0.0, 8, 1),
    StandardTest("SEQ1M Q1T1", MIB, 0.0, 1, 1),
    StandardTest("RND4K Q32T16", 4 * KIB, 1.0, 32, 16),
    StandardTest("RND4K Q1T1", 4 * KIB, 1.0, 1, 1),
)
DIRECTIONS: tuple[tuple[str, float], ...] = (("read", 0.0), ("write", 1.0))
MB_PER_MIB = MIB / 1e6
"""KDiskMark reports decimal MB/s; the sweep stores MiB/s."""


@dataclass(frozen=True)
class SummaryCell:
    """One test in one direction on one device."""

    test: str
    direction: str
    source: str  # "measured", "predicted", or "unavailable" (not measured and no model)
    values: dict[str, float]  # by metric; empty when unavailable
    extrapolated: bool = False
    intervals: dict[str, tuple[float, float]] | None = None
    runs: int = 0
    outside: tuple[str, ...] = ()  # why a prediction is an extrapolation: fields beyond the sweep

    @property
    def mb_s(self) -> float | None:
        """Bandwidth in decimal MB/s, as KDiskMark shows it."""
        bw = self.values.get("bandwidth_mib_s")
        return None if bw is None else bw * MB_PER_MIB


def summary_table(measurements: pd.DataFrame, model: DeviceModel | None) -> list[SummaryCell]:
    """Every standard test in both directions: measured where swept, else predicted."""
    swept = workload_matrix(measurements) if not measurements.empty else np.empty((0, len(WORKLOAD_FIELDS)))
    cells = []
    for test in STANDARD_TESTS:
        for direction, write_ratio in DIRECTIONS:
            workload = test.workload(write_ratio)
            target = np.array([float(workload.as_row()[f]) for f in WORKLOAD_FIELDS])
            hit = np.all(np.isclose(swept, target, rtol=0, atol=1e-9), axis=1)
            if hit.any():
                runs = measurements.loc[hit, list(METRICS)].astype(float)
                values = {m: float(runs[m].median()) for m in METRICS if runs[m].notna().any()}
                cells.append(SummaryCell(test.name, direction, "measured", values, runs=int(hit.sum())))
            elif model is not None:
                pred = model.predict_one(workload).predictions
                cells.append(
                    SummaryCell(
                        test.name,
                        direction,
                        "predicted",
                        {m: p.value for m, p in pred.items()},
                        extrapolated=any(p.extrapolated for p in pred.values()),
                        intervals={
                            m: (p.lower, p.upper)
                            for m, p in pred.items()
                            if p.lower is not None and p.upper is not None
                        },
                        outside=outside_swept(target, swept) if len(swept) else (),
                    )
                )
            else:
                cells.append(SummaryCell(test.name, direction, "unavailable", {}))
    return cells


def outside_swept(row: np.ndarray, swept: np.ndarray) -> tuple[str, ...]:
    """The fields of a workload row outside the measured range, as ``request_size 1m (swept 4k)``."""
    out = []
    for i, name in enumerate(WORKLOAD_FIELDS):
        lo, hi = float(swept[:, i].min()), float(swept[:, i].max())
        if lo - 1e-9 <= row[i] <= hi + 1e-9 or name in _SHADOW_FIELDS:
            continue
        out.append(
            f"{name} {_value(name, row[i])} (swept {_value(name, lo)}"
            + (f"-{_value(name, hi)})" if hi > lo else ")")
        )
    return tuple(out)


def _value(field: str, value: float) -> str:
    return format_size(int(value)) if field in SIZE_FIELDS else f"{value:g}"


# the per-direction fields repeat the basic ones in these tests: naming both would say it twice
_SHADOW_FIELDS = frozenset({"read_size", "write_size", "read_randomness", "write_randomness"})
