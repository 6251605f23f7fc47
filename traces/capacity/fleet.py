"""Which device has the most headroom for a mix: the capacity question asked of many devices.

The batched fleet path of :mod:`modeling.serving.fleet_rank`, for capacity: the workload
rows are checked once, each device loads its active model once and gives every mix's
closed-loop curve in one batch call (:meth:`MixCurves.of`), and each mix is then a search
on arithmetic.  The ranking of a mix is its devices by the most IO/s they take under the
SLO, best first (a device that never meets it takes 0 and comes last; ties keep the order
the devices were named in).

A device that cannot answer (no active model, a damaged one) is left out of the ranking
and listed in :attr:`FleetCapacity.skipped` with the reason, as the fleet prediction does;
a device without open-loop points is ranked but marked, since its latency under load is
the closed-loop method's alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from modeling.errors import CorruptModel, NoModel, NotFound
from modeling.serving.fleet_rank import SkippedDevice
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from traces.capacity.device import DeviceCapacity, device_capacity
from traces.capacity.slo import Slo


@dataclass
class FleetCapacity:
    """Every device's answers for the same mixes and SLO, and each mix's ranking."""

    slo: str
    arrival_cv2: float
    mixes: pd.DataFrame
    devices: list[DeviceCapacity]  # in the order they were named
    skipped: list[SkippedDevice] = field(default_factory=list)

    def headroom(self) -> np.ndarray:
        """(mixes, devices) most IO/s under the SLO."""
        return np.array([[d.answers[i].iops for d in self.devices] for i in range(len(self.mixes))])

    def order(self) -> np.ndarray:
        """(mixes, devices) indices into :attr:`devices`, most headroom first (stable)."""
        return np.argsort(-self.headroom(), axis=1, kind="stable")

    def ranking(self) -> list[list[str]]:
        """Each mix's device names, most headroom first."""
        names = np.array([d.device for d in self.devices], dtype=object)
        return names[self.order()].tolist()  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: per mix, the ranked devices' answers; the devices without open-loop
        points and those skipped, with why."""
        order = self.order()
        mixes = []
        for i in range(len(self.mixes)):
            ranked = []
            for rank, j in enumerate(order[i], start=1):
                d = self.devices[j]
                ranked.append(
                    {
                        "rank": rank,
                        "device": d.device,
                        "model_version": d.model_version,
                        "open_loop_points": d.open_loop_points,
                        **d.answers[i].to_dict(),
                    }
                )
            mixes.append({"workload": ranked[0]["workload"] if ranked else {}, "ranking": ranked})
        return {
            "slo": self.slo,
            "arrival_cv2": self.arrival_cv2,
            "mixes": mixes,
            "without_open_loop_points": [d.device for d in self.devices if not d.open_loop_points],
            "device_notes": {d.device: d.notes for d in self.devices if d.notes},
            "skipped": [vars(s) for s in self.skipped],
        }


def fleet_capacity(
    datadir: DataDir,
    devices: Sequence[str],
    mixes: pd.DataFrame,
    slo: Slo,
    arrival_cv2: float = 1.0,
    registry: ModelRegistry | None = None,
) -> FleetCapacity:
    """Every mix's capacity under ``slo`` on each of ``devices``, ranked by headroom.

    Raises ``NoModel`` when no device at all can answer (the reasons in its details), and
    ``InvalidInput`` for a bad burstiness, as :func:`device_capacity` does.
    """
    registry = registry or ModelRegistry(datadir)
    answered: list[DeviceCapacity] = []
    skipped: list[SkippedDevice] = []
    for device in dict.fromkeys(devices):
        try:
            answered.append(
                device_capacity(datadir, device, mixes, slo, arrival_cv2, registry, suggest=False)
            )
        except (NoModel, NotFound, CorruptModel) as exc:
            skipped.append(SkippedDevice(device, exc.code, exc.message))
    if not answered:
        raise NoModel(
            f"none of the {len(skipped)} devices can answer: "
            + "; ".join(f"{s.device}: {s.reason}" for s in skipped[:5]),
            details={"skipped": [vars(s) for s in skipped]},
        )
    return FleetCapacity(str(slo), float(arrival_cv2), mixes.reset_index(drop=True), answered, skipped)
