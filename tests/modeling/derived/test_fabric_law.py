"""The fabric law on an analytic local device: added latency, link cap and the target's IOPS ceiling."""

from __future__ import annotations

import numpy as np
import pytest

from modeling.derived.fabric import FabricLink, predict_fabric
from tests.modeling.derived.analytic import MIB, AnalyticMember, workloads

LOCAL = AnalyticMember(t_us=80.0, iops_max=300_000.0, mib_s=3_000.0)


def test_target_ceiling_cuts_small_random_reads_and_leaves_large_ones() -> None:
    link = FabricLink("tcp", 20.0, link_gbps=100.0, target_iops=100_000.0)
    small, large = workloads([256]), workloads([256], size=1024 * 1024)
    local_small = LOCAL.predict_matrix(small)["iops"][0][0]
    local_large = LOCAL.predict_matrix(large)["bandwidth_mib_s"][0][0]
    got_small = predict_fabric(LOCAL, link, small)["values"]["iops"][0]
    got_large = predict_fabric(LOCAL, link, large)["values"]["bandwidth_mib_s"][0]
    assert got_small == pytest.approx(local_small / 3)  # 300k -> the target's 100k
    assert got_large == pytest.approx(local_large)  # 3000 MiB/s, far below both caps


def test_added_latency_per_io_at_one_request() -> None:
    out = predict_fabric(LOCAL, FabricLink("rdma", 7.0), workloads([1]))["values"]
    assert out["latency_mean_us"][0] == pytest.approx(80.0 + 7.0)
    assert out["iops"][0] == pytest.approx(1e6 / 87.0)


def test_device_holds_only_its_share_of_the_in_flight_requests() -> None:
    # below saturation the device holds L x t / (t + a) requests, each taking t: IOPS = L / (t + a)
    out = predict_fabric(LOCAL, FabricLink("tcp", 20.0), workloads([2, 8, 16]))["values"]
    np.testing.assert_allclose(out["iops"], np.array([2, 8, 16]) * 1e6 / 100.0, rtol=1e-6)


def test_link_bandwidth_caps_large_transfers() -> None:
    fast = AnalyticMember(t_us=80.0, iops_max=1e7, mib_s=10_000.0)
    out = predict_fabric(fast, FabricLink("tcp", 20.0, link_gbps=25.0), workloads([64], size=1024 * 1024))
    assert out["values"]["bandwidth_mib_s"][0] == pytest.approx(25e9 / 8 / MIB)
    assert "link 25 Gb/s" in out["law"] and "nvmeof/tcp" in out["law"]
