"""RAID what-if: an array's performance from one member's model.

Each array request becomes member I/Os (how many, reads or writes, of which size) by the
level's layout; the array's requests in flight spread evenly over the members, so each
member holds ``L x c / (phases x N)`` of them (``L`` in flight on the array, ``c`` member
I/Os per array request, ``phases`` the dependent steps of one request: 2 for a
read-modify-write, whose reads precede its writes).  The array then completes
``N x X(l) / c`` requests per second (``X`` the member's IOPS at ``l`` in flight) and,
by Little's law, each takes ``phases x W(l)``.

Layouts (``N`` members, ``chunk`` the strip size):

* RAID 0: a request of ``s`` bytes spans ``ceil(s / chunk)`` members (at most ``N``).
* RAID 1 (``N``-way mirror): a read goes to one mirror, a write to every mirror.
* RAID 10 (``N / 2`` mirrored pairs, striped): reads as RAID 0 over ``N`` members' data
  halves, each write to both members of its pair.
* RAID 5 / 6: a random write inside one stripe is a read-modify-write: the old data and
  parity are read, then new data and parity written -- 4 member I/Os (RAID 5) or 6
  (RAID 6) for one chunk, ``2 (k + p)`` for ``k`` chunks; a sequential or full-stripe
  write writes ``N / (N - p)`` of its data (parity ``p`` = 1 or 2), no reads.

A controller or host path in front of the members is shared by the whole array: below
its knee (where its IOPS are under 80 % of its saturated IOPS) a member's latency rises
with in-flight I/O before its own queue does (on the HP P420i the MX200 alone and the
RAID 0 of three both take 255 us at 8 in flight).  The law keeps that part of the
member's curve for the array's total in flight, so ``W_array = phases x max(W(l),
W(min(L_path, knee)))``; for a member whose latency is flat up to its knee the term is
inert.  Optional ceilings (controller IOPS, MiB/s) cap the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from modeling.derived.curve import CurveCache, Curves, Member, as_result, rate_values
from modeling.units import MIB
from modeling.workload_matrix import FIELD_INDEX, mean_request_size, outstanding_io

_I = FIELD_INDEX
LEVELS = (0, 1, 5, 6, 10)


@dataclass(frozen=True)
class RaidLayout:
    """An array's geometry and optional ceilings."""

    level: int
    members: int
    chunk: int = 64 * 1024
    ceiling_iops: float | None = None
    ceiling_mib_s: float | None = None

    def law(self) -> str:
        """The law's name, as every prediction reports it."""
        cost = {
            0: "striped",
            1: "each write to every mirror",
            10: "each write to both mirrors of a pair",
            5: "read-modify-write 4 I/Os, full stripe (N-1)/N",
            6: "read-modify-write 6 I/Os, full stripe (N-2)/N",
        }
        caps = [
            f"ceiling {self.ceiling_iops:g} IOPS" if self.ceiling_iops else "",
            f"ceiling {self.ceiling_mib_s:g} MiB/s" if self.ceiling_mib_s else "",
        ]
        extra = "; ".join(c for c in caps if c)
        return (
            f"raid{self.level} of {self.members}, chunk {self.chunk // 1024} KiB: "
            "in-flight share per member, "
            f"{cost[self.level]}, shared path below the member's knee" + (f"; {extra}" if extra else "")
        )

    @property
    def parity(self) -> int:
        return {5: 1, 6: 2}.get(self.level, 0)

    @property
    def data_members(self) -> int:
        """Members a stripe's data spreads over."""
        if self.level == 1:
            return 1
        if self.level == 10:
            return self.members // 2
        return self.members - self.parity


def _span(size: np.ndarray, chunk: int, most: int) -> np.ndarray:
    return np.clip(np.ceil(size / chunk), 1, most)


def member_load(lay: RaidLayout, w: np.ndarray) -> dict[str, np.ndarray]:
    """Per array request: member reads and writes, their sizes, and the dependent phases."""
    wr, rs, ws = w[:, _I["write_ratio"]], w[:, _I["read_size"]], w[:, _I["write_size"]]
    wrand = w[:, _I["write_randomness"]]
    d = lay.data_members
    span_r = _span(rs, lay.chunk, max(d, 1) if lay.level != 1 else 1)
    if lay.level == 10:
        span_r = _span(rs, lay.chunk, lay.members)  # both halves of a pair serve reads
    span_w = _span(ws, lay.chunk, d)
    if lay.level == 0:
        w_reads, w_writes, phases = np.zeros_like(ws), span_w, np.ones_like(ws)
    elif lay.level in (1, 10):
        copies = lay.members if lay.level == 1 else 2
        w_reads, w_writes, phases = np.zeros_like(ws), span_w * copies, np.ones_like(ws)
    else:
        p = lay.parity
        full = ws >= d * lay.chunk
        # random sub-stripe writes: read old data + parity, write new data + parity
        rmw = wrand * ~full
        stripe_writes = span_w * lay.members / d  # data plus its share of parity, no reads
        w_reads = rmw * (span_w + p)
        w_writes = rmw * (span_w + p) + (1 - rmw) * stripe_writes
        phases = 1 + rmw
    reads = (1 - wr) * span_r + wr * w_reads
    writes = wr * w_writes
    total = np.maximum(reads + writes, 1e-12)
    piece = ws / span_w
    # an array read's pieces, and a read-modify-write's reads of the old data and parity
    read_size = np.where(reads > 0, ((1 - wr) * rs + wr * w_reads * piece) / np.maximum(reads, 1e-12), rs)
    mean_phases = (1 - wr) + wr * phases
    return {
        "ios": total,
        "write_ratio": writes / total,
        "read_size": read_size,
        "write_size": piece,
        "phases": mean_phases,
    }


def _round_size(size: np.ndarray) -> np.ndarray:
    return np.maximum(np.round(size / 512.0) * 512.0, 512.0)


def member_workloads(lay: RaidLayout, w: np.ndarray, load: dict[str, np.ndarray]) -> np.ndarray:
    """The workload one member sees (its in-flight count is set later, per grid point)."""
    m = w.copy()
    m[:, _I["write_ratio"]] = np.clip(load["write_ratio"], 0.0, 1.0)
    m[:, _I["read_size"]] = _round_size(load["read_size"])
    m[:, _I["write_size"]] = _round_size(load["write_size"])
    wr = m[:, _I["write_ratio"]]
    m[:, _I["request_size"]] = _round_size(np.where(wr > 0.5, m[:, _I["write_size"]], m[:, _I["read_size"]]))
    return m


def predict_raid(
    member: Member, lay: RaidLayout, w: np.ndarray, model: str = "auto", cache: CurveCache | None = None
) -> dict[str, Any]:
    """The array's IOPS, bandwidth and latencies (mean, p99 if the member has it) for workload rows."""
    load = member_load(lay, w)
    curves = Curves(member, member_workloads(lay, w, load), model, cache)
    big_l = outstanding_io(w)
    concurrent = load["ios"] / load["phases"]  # member I/Os one array request has in flight at once
    per_member = big_l * concurrent / lay.members
    path = np.minimum(big_l * concurrent, curves.knee())
    phase_lat = np.maximum(curves.latency_us(per_member), curves.latency_us(path))
    latency = load["phases"] * phase_lat
    iops = 1e6 * big_l / latency
    size = mean_request_size(w)
    iops = _ceilings(iops, size, lay.ceiling_iops, lay.ceiling_mib_s)
    values = rate_values(iops, size, big_l)
    latency = values["latency_mean_us"]
    # the spread follows the queue the host sees: on the P420i RAID 0 of 3, the member's p99/mean ratio at
    # the array's whole in-flight count missed the reads' p99 by 21 % (mean), at each member's share by 30 %
    tail = curves.tail(big_l)
    if tail is not None:
        values["latency_p99_us"] = latency * tail
    return as_result(values, curves.extrapolated(per_member, path), lay.law())


def _ceilings(
    iops: np.ndarray, size: np.ndarray, cap_iops: float | None, cap_mib_s: float | None
) -> np.ndarray:
    if cap_iops:
        iops = np.minimum(iops, cap_iops)
    if cap_mib_s:
        iops = np.minimum(iops, cap_mib_s * MIB / size)
    return iops
