"""Each RAID level's law on an analytic member (IOPS = min(L / t, X)), against closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from modeling.derived.raid import RaidLayout, predict_raid
from tests.modeling.derived.analytic import MIB, AnalyticMember, workloads

T, X = 100.0, 40_000.0  # 100 us per request, saturated at 40k IOPS (4 in flight: a grid point)
LOADS = [1, 2, 3, 4, 6, 8, 16, 24, 64, 256]


def _iops(level: int, n: int, w: np.ndarray, **kw: float) -> np.ndarray:
    return predict_raid(AnalyticMember(T, X), RaidLayout(level, n, **kw), w)["values"]["iops"]


def _closed(in_flight: list[int], per_request_us: float, saturated: float) -> np.ndarray:
    return np.minimum(np.array(in_flight) * 1e6 / per_request_us, saturated)


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_raid0_random_reads_spread_over_members_up_to_n_times_the_member(n: int) -> None:
    got = _iops(0, n, workloads(LOADS))
    np.testing.assert_allclose(got, _closed(LOADS, T, n * X), rtol=1e-9)


def test_raid1_reads_from_any_mirror_writes_to_every_mirror() -> None:
    np.testing.assert_allclose(_iops(1, 2, workloads(LOADS)), _closed(LOADS, T, 2 * X), rtol=1e-9)
    np.testing.assert_allclose(
        _iops(1, 3, workloads(LOADS, write_ratio=1.0)), _closed(LOADS, T, X), rtol=1e-9
    )


def test_raid10_writes_cost_two_member_writes() -> None:
    np.testing.assert_allclose(
        _iops(10, 4, workloads(LOADS, write_ratio=1.0)), _closed(LOADS, T, 2 * X), rtol=1e-9
    )
    np.testing.assert_allclose(_iops(10, 4, workloads(LOADS)), _closed(LOADS, T, 4 * X), rtol=1e-9)


@pytest.mark.parametrize(("level", "n", "ios"), [(5, 4, 4), (5, 6, 4), (6, 6, 6), (6, 8, 6)])
def test_raid5_6_small_random_writes_are_read_modify_writes(level: int, n: int, ios: int) -> None:
    got = _iops(level, n, workloads(LOADS, write_ratio=1.0))
    # two dependent phases (reads, then writes): 2 t per write; N members / ios member I/Os each
    np.testing.assert_allclose(got, _closed(LOADS, 2 * T, n * X / ios), rtol=1e-9)


@pytest.mark.parametrize(("level", "n", "parity"), [(5, 4, 1), (5, 5, 1), (6, 6, 2)])
def test_full_stripe_sequential_writes_keep_data_share_of_member_bandwidth(
    level: int, n: int, parity: int
) -> None:
    chunk = 64 * 1024
    member = AnalyticMember(T, 1e9, mib_s=500.0)  # bandwidth-bound at 64 KiB
    stripe = (n - parity) * chunk
    w = workloads([64, 256], write_ratio=1.0, size=stripe, randomness=0.0)
    got = predict_raid(member, RaidLayout(level, n, chunk), w)["values"]["bandwidth_mib_s"]
    # every member writes at its full bandwidth; (N - p) / N of it is data
    np.testing.assert_allclose(got, n * 500.0 * (n - parity) / n, rtol=1e-9)


def test_reads_larger_than_the_chunk_span_several_members() -> None:
    member = AnalyticMember(T, 1e9, mib_s=500.0)
    w = workloads([256], size=256 * 1024)
    one = predict_raid(member, RaidLayout(0, 4, 1024 * 1024), w)["values"]["bandwidth_mib_s"]
    four = predict_raid(member, RaidLayout(0, 4, 64 * 1024), w)["values"]["bandwidth_mib_s"]
    np.testing.assert_allclose([one[0], four[0]], [4 * 500.0, 4 * 500.0], rtol=1e-9)
    # at one request in flight, a request split over 4 members finishes 4x sooner
    w1 = workloads([1], size=256 * 1024)
    lat_one = predict_raid(member, RaidLayout(0, 4, 1024 * 1024), w1)["values"]["latency_mean_us"][0]
    lat_four = predict_raid(member, RaidLayout(0, 4, 64 * 1024), w1)["values"]["latency_mean_us"][0]
    assert lat_one == pytest.approx(256 * 1024 / (500.0 * MIB) * 1e6)
    assert lat_four == pytest.approx(lat_one / 4)


def test_ceilings_cap_iops_and_bandwidth() -> None:
    w = workloads([1, 256])
    got = _iops(0, 4, w, ceiling_iops=50_000.0)
    np.testing.assert_allclose(got, [1e6 / T, 50_000.0])
    big = workloads([256], size=1024 * 1024)
    bw = predict_raid(AnalyticMember(T, 1e9, 500.0), RaidLayout(0, 4, ceiling_mib_s=800.0), big)
    assert bw["values"]["bandwidth_mib_s"][0] == pytest.approx(800.0)
    assert bw["values"]["latency_mean_us"][0] == pytest.approx(256 * 1e6 / 800.0)


def test_every_answer_names_its_law() -> None:
    out = predict_raid(AnalyticMember(), RaidLayout(5, 4), workloads([1]))
    assert "raid5 of 4" in out["law"] and "read-modify-write 4" in out["law"]
