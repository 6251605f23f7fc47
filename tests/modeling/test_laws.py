"""The laws beyond the measured range, chosen by validation on devices whose truth is known
(issue 13): the closed-loop saturation curve, the fixed-plus-transfer latency of a size,
and the plateau where the device has stopped rising."""

from __future__ import annotations

import numpy as np
import pytest

from modeling.serving.physics.laws import apply_physics_row
from modeling.serving.physics.extrapolation import stretch_row
from modeling.serving.physics.limits import PhysicsLimits
from modeling.serving.physics.laws import apply_physics
from modeling.serving.physics.extrapolation import stretch
from modeling.training.laws import choose_laws
from modeling.workload_matrix import FIELD_INDEX as F

DEPTHS = (1, 2, 4, 8, 16, 32)
SIZES = (4096, 16384, 65536, 131072)


def grid(depths=DEPTHS, sizes=(4096,), mixes=(0.0, 1.0), jobs=(1, 2)) -> np.ndarray:
    rows = [
        (wr, qd, s, 1.0, nj, s, s, 1.0, 1.0) for wr in mixes for s in sizes for nj in jobs for qd in depths
    ]
    return np.array(rows, dtype=np.float64)


def oio(w: np.ndarray) -> np.ndarray:
    return w[:, F["queue_depth"]] * w[:, F["numjobs"]]


def test_a_device_still_climbing_gets_its_saturation_knee():
    """IOPS = Xmax L / (L + K) exactly: the held-out top is predicted, K is found."""
    w = grid()
    iops = 50_000 * oio(w) / (oio(w) + 24.0)
    laws = choose_laws(w, iops)
    assert laws.load.name == "saturation"
    assert laws.load.param == pytest.approx(24.0, rel=1e-6)
    assert laws.load.law_mre < 1e-9 < laws.load.plateau_mre


def test_a_saturated_device_keeps_the_plateau():
    """IOPS = min(L / t, Imax), flat from 4 in flight: nothing invents IOPS beyond it."""
    w = grid()
    iops = np.minimum(oio(w) / 100e-6, 40_000.0)
    laws = choose_laws(w, iops)
    assert (laws.load.name, laws.load.param) == ("plateau", 0.0)


def test_latency_linear_in_size_gets_its_fixed_part():
    """latency = a + b s at a fixed load: s0 = a / b, bandwidth still rising past the sweep."""
    w = grid(depths=(1, 4), sizes=SIZES)
    a, b = 50e-6, 1 / (2000 * 2**20)  # 50 us fixed, 2 GiB/s transfer
    latency = a + b * w[:, F["request_size"]]
    iops = oio(w) / latency
    laws = choose_laws(w, iops)
    for mix in ("read", "write"):
        assert laws.size[mix].name == "linear"
        assert laws.size[mix].param == pytest.approx(a / b, rel=1e-6)


def test_limits_round_trip_with_the_laws_and_without_them():
    w = grid()
    limits = PhysicsLimits.measured(w, np.full(len(w), 100.0))
    limits = PhysicsLimits(limits.lo, limits.hi, limits.max_outstanding, limits.bandwidth_max,
                           limits.depths, 12.5, {"read": 4096.0})
    doc = limits.to_json()
    back = PhysicsLimits.from_json(doc)
    assert (back.load_knee, dict(back.size_knee)) == (12.5, {"read": 4096.0})
    old = {k: v for k, v in doc.items() if k not in ("load_knee", "size_knee")}
    legacy = PhysicsLimits.from_json(old)  # a model saved before the laws: the plateaus
    assert (legacy.load_knee, dict(legacy.size_knee)) == (0.0, {})
    with pytest.raises(ValueError):
        PhysicsLimits.from_json({**doc, "load_knee": -1.0})


def test_the_single_row_path_applies_the_same_laws():
    w = grid()
    base = PhysicsLimits.measured(w, np.full(len(w), 400.0))
    limits = PhysicsLimits(base.lo, base.hi, base.max_outstanding, base.bandwidth_max, base.depths,
                           9.0, {"read": 30_000.0, "write": 8192.0})
    rng = np.random.default_rng(4)
    picks = zip(
        rng.choice([0.0, 1.0, 0.5], 40),
        rng.choice([1, 8, 64, 512], 40),
        rng.choice([4096, 262144, 1 << 20], 40),
        rng.choice([1, 2, 8], 40),
        strict=True,
    )
    asked = np.array([(wr, qd, s, 1.0, nj, s, s, 1.0, 1.0) for wr, qd, s, nj in picks], dtype=np.float64)
    st = stretch(asked, limits)
    values = {"iops": rng.uniform(1e3, 5e4, 40), "bandwidth_mib_s": rng.uniform(10, 300, 40),
              "latency_mean_us": rng.uniform(50, 500, 40), "latency_p99_us": rng.uniform(500, 900, 40)}
    matrix = {m: v.copy() for m, v in values.items()}
    apply_physics(matrix, asked, st, limits)
    lim = limits.row_limits()
    for i in range(len(asked)):
        row = {m: float(v[i]) for m, v in values.items()}
        apply_physics_row(row, asked[i].tolist(), stretch_row(asked[i].tolist(), lim), lim)
        for m in values:
            assert row[m] == pytest.approx(matrix[m][i], rel=1e-9), (i, m)
    # and the laws did something here: some answers differ from the plateaus'
    flat = {m: v.copy() for m, v in values.items()}
    apply_physics(flat, asked, st, base)
    assert not np.allclose(flat["iops"], matrix["iops"])
