"""The laws every answer obeys, written once for the matrix and the single-row path.

See :mod:`modeling.serving.physics` for the laws and why.  :func:`extend_and_cap` holds
them; :func:`apply_physics` calls it on arrays (one value per workload) and
:func:`apply_physics_row` on one workload's plain floats.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from modeling.serving.physics.extrapolation import RowStretch, Stretch
from modeling.serving.physics.limits import PhysicsLimits, RowLimits, mix_code_row, mix_codes
from modeling.workload import LATENCY_METRICS, MIB, PERCENTILE_ORDER
from modeling.workload import PERCENTILE_ANCHOR as ANCHOR
from modeling.workload_matrix import FIELD_INDEX as _F
from modeling.workload_matrix import mean_request_size, mean_request_size_row, outstanding_io

_QD, _NJ = _F["queue_depth"], _F["numjobs"]
Pick = Callable[[Any, Any], Any]
"""Elementwise ``min`` or ``max`` of two values: numpy's on arrays, Python's on floats."""


def apply_physics(
    values: dict[str, np.ndarray], w: np.ndarray, st: Stretch, limits: PhysicsLimits | None
) -> None:
    """Extend predictions made at ``st.w_eval`` back to ``w`` and enforce the laws, in place.

    ``values`` holds every metric the device has, predicted at ``st.w_eval``.  Without
    limits (a model saved before they were recorded) nothing is changed.
    """
    if limits is None:
        return
    mix = mix_codes(w)
    size_knee, cap = np.array(limits.size_knees())[mix], np.array(limits.caps())[mix]
    oio, size = outstanding_io(w), mean_request_size(w)
    extend_and_cap(
        values, oio, size, st.load, st.size, limits.load_knee, size_knee, cap, np.minimum, np.maximum
    )


def apply_physics_row(values: dict[str, float], row: Sequence[float], st: RowStretch, lim: RowLimits) -> None:
    """:func:`apply_physics` of one workload (a list of the fields), in plain floats."""
    mix = mix_code_row(row)
    oio, size = row[_QD] * row[_NJ], mean_request_size_row(row)
    extend_and_cap(
        values, oio, size, st.load, st.size, lim.load_knee, lim.size_knees[mix], lim.caps[mix], min, max
    )


def extend_and_cap(
    values: dict[str, Any],
    oio: Any,
    size: Any,
    load: Any,
    size_factor: Any,
    knee: float,
    size_knee: Any,
    cap: Any,
    least: Pick,
    most: Pick,
) -> None:
    """The laws on values of one workload (floats) or many (arrays), in place.

    ``oio`` and ``size`` are the outstanding I/O and mean request size asked for, ``load``
    and ``size_factor`` how many times those exceed the ones the models were evaluated at
    (:func:`~modeling.serving.physics.extrapolation.stretch`), ``knee`` and ``size_knee`` K and s0
    of the load and size laws, ``cap`` the mix's bandwidth cap; ``least`` and ``most``
    are the elementwise ``min`` and ``max`` of the values' kind.
    """
    # the load law and Little's law beyond the measured load; the size law beyond the
    # measured size (see the module docstring): IOPS x gain / grow, latency x load / gain x grow
    gain = load * (oio / load + knee) / (oio + knee) if knee > 0 else 1.0
    grow = (size_knee + size) / (size_knee + size / size_factor)
    if "iops" in values:
        values["iops"] = values["iops"] * (gain / grow)
    if "bandwidth_mib_s" in values:
        values["bandwidth_mib_s"] = values["bandwidth_mib_s"] * (gain * size_factor / grow)
    for metric in LATENCY_METRICS:
        if metric in values:
            values[metric] = values[metric] * (load / gain * grow)
    if "bandwidth_mib_s" in values:
        values["bandwidth_mib_s"] = least(values["bandwidth_mib_s"], cap)
    if "iops" in values:
        # IOPS that would carry more than the cap are slowed to it, and the time each
        # I/O spends in the device grows by the same factor (Little's law)
        bw_implied = values["iops"] * size / MIB
        slow = least(1.0, cap / most(bw_implied, 1e-12))
        values["iops"] = values["iops"] * slow
        for metric in LATENCY_METRICS:
            if metric in values:
                values[metric] = values[metric] / slow
    order_percentiles(values, least, most)


def order_percentiles(values: dict[str, Any], least: Pick = np.minimum, most: Pick = np.maximum) -> None:
    """p50 <= p90 <= p99 <= p99.9 and p99 >= mean, anchored on p99, in place.

    Each tail model is a separate estimate of one point of a monotone curve.  The p99 is
    the rung every device learns and the one most tuned, so it is the anchor: it is only
    raised to the mean; a rung above it is raised to it (the conservative answer for the
    far tail), a rung below it is lowered to it.  Anchoring makes each rung depend only on
    the rungs between it and p99, so a request that does not ask for p50/p90/p99.9 never
    pays for their models, and the p99 is the same whichever rungs are asked for
    (:func:`needed_metrics`).  Arrays by default; floats with Python's ``min`` and ``max``.
    """
    present = [m for m in PERCENTILE_ORDER if m in values]
    if not present:
        return
    anchor = ANCHOR if ANCHOR in values else present[0]
    if anchor == ANCHOR and "latency_mean_us" in values:
        values[anchor] = most(values[anchor], values["latency_mean_us"])
    at = present.index(anchor)
    for i in range(at + 1, len(present)):
        values[present[i]] = most(values[present[i]], values[present[i - 1]])
    for i in range(at - 1, -1, -1):
        values[present[i]] = least(values[present[i]], values[present[i + 1]])


def needed_metrics(wanted: Sequence[str], known: Sequence[str]) -> list[str]:
    """The metrics whose values the laws need to answer ``wanted``, in ``known``'s order.

    Latencies are slowed with IOPS under the bandwidth cap, and each percentile is ordered
    against the rungs between it and the p99, the p99 against the mean.
    """
    if wanted is known or set(wanted) >= set(known):  # every metric: the common request
        return list(known)
    need = set(wanted)
    for metric in wanted:
        if metric in LATENCY_METRICS:
            need.add("iops")
        if metric in PERCENTILE_ORDER:
            i, a = PERCENTILE_ORDER.index(metric), PERCENTILE_ORDER.index(ANCHOR)
            need.update(PERCENTILE_ORDER[min(i, a) : max(i, a) + 1])
            need.add("latency_mean_us")
    return [m for m in known if m in need]
