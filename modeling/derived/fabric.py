"""Fabric what-if: a local device exported over NVMe-oF (TCP or RDMA), from its local model.

Three costs, each a published effect of exporting a namespace (GRAID / PoseidonOS over
NVMe-oF on a 4-SSD RAID 6: 4 KiB random reads fell to about a third, 1 MiB reads were
unchanged):

* an added latency per I/O (the network stack and the target's handling), so a request
  spends ``W_local(l) + added`` in flight and the device itself holds
  ``l = L x W_local(l) / (W_local(l) + added)`` of the ``L`` requests (a fixed point,
  solved by iteration);
* the link's bandwidth, a cap on MiB/s in each direction summed;
* the target's submission threads, a ceiling on IOPS: it binds small requests and not
  large ones, whose IOPS the link already holds far below it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from modeling.derived.curve import CurveCache, Curves, Member, as_result, rate_values
from modeling.units import MIB
from modeling.workload_matrix import FIELD_INDEX, mean_request_size, outstanding_io

_I = FIELD_INDEX
TRANSPORTS = {"tcp": 20.0, "rdma": 5.0}
"""Transport -> default added latency per I/O (us) when none is given."""


@dataclass(frozen=True)
class FabricLink:
    """The transport, its added latency, link speed and the target's IOPS ceiling."""

    transport: str
    added_latency_us: float
    link_gbps: float = 25.0
    target_iops: float | None = None

    @property
    def link_mib_s(self) -> float:
        return self.link_gbps * 1e9 / 8 / MIB

    def law(self) -> str:
        """The law's name, as every prediction reports it."""
        cap = f", target ceiling {self.target_iops:g} IOPS" if self.target_iops else ""
        return (
            f"nvmeof/{self.transport}: +{self.added_latency_us:g} us per I/O, "
            f"link {self.link_gbps:g} Gb/s ({self.link_mib_s:.0f} MiB/s){cap}"
        )


def predict_fabric(
    local: Member, link: FabricLink, w: np.ndarray, model: str = "auto", cache: CurveCache | None = None
) -> dict[str, Any]:
    """The exported device's IOPS, bandwidth and latencies for workload rows."""
    curves = Curves(local, w, model, cache)
    big_l = outstanding_io(w)
    at_device = big_l.copy()
    for _ in range(30):  # the fixed point converges fast: the share only shrinks with added latency
        w_local = curves.latency_us(at_device)
        at_device = np.maximum(big_l * w_local / (w_local + link.added_latency_us), 1e-3)
    device_latency = curves.latency_us(at_device)
    latency = device_latency + link.added_latency_us
    iops = 1e6 * big_l / latency
    size = mean_request_size(w)
    iops = np.minimum(iops, link.link_mib_s * MIB / size)
    if link.target_iops:
        iops = np.minimum(iops, link.target_iops)
    values = rate_values(iops, size, big_l)
    latency = values["latency_mean_us"]
    tail = curves.tail(at_device)
    if tail is not None:
        # the device's own spread; the added latency and the ceilings' waits are a constant shift
        values["latency_p99_us"] = latency + device_latency * (tail - 1.0)
    return as_result(values, curves.extrapolated(at_device), link.law())
