"""``capacity --devices / --all-devices``: devices ranked by headroom under an SLO (real models)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from modeling.errors import NoModel
from modeling.store import DataDir
from service.cli.main import app
from service.config import get_settings
from tests.service.utils import quick_train
from tests.traces.conftest import synthetic_rows
from traces.capacity.device import mix_table, parse_mix
from traces.capacity.fleet import fleet_capacity
from traces.capacity.slo import parse_slo

MIX = "write_ratio=0.5,request_size=4k,randomness=1"


def open_loop_points(scale: float) -> list[dict[str, float]]:
    """Poisson open-loop points of the same device at the mix asked (M/M/1 on its QD1 time)."""
    svc = scale * (20e-6 + 4096 / 2e9 + 30e-6 + 0.5 * 10e-6)
    out = []
    for frac in (0.05, 0.2, 0.4, 0.6, 0.8):
        rate = frac / svc
        mean = 1e6 * svc / (1 - frac)
        out.append(
            dict(
                write_ratio=0.5,
                queue_depth=1,
                request_size=4096,
                randomness=1,
                numjobs=1,
                offered_iops=rate,
                iops=rate,
                bandwidth_mib_s=rate * 4096 / 2**20,
                latency_mean_us=mean,
                latency_p99_us=mean * np.log(100),
            )
        )
    return out


@pytest.fixture(scope="module")
def fleet_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four devices: fast (0.5x), mid (1x), slow (2x, with open-loop points), untrained."""
    root = tmp_path_factory.mktemp("fleet-home")
    d = DataDir(root)
    for name, scale in (("mid", 1.0), ("fast", 0.5), ("slow", 2.0), ("untrained", 1.0)):
        d.catalog.ensure_device(name)
        extra = open_loop_points(scale) if name == "slow" else []
        d.catalog.add_measurements(name, synthetic_rows(scale) + extra)
        if name != "untrained":
            quick_train(d, name)
    return root


@pytest.fixture
def fleet(fleet_root: Path, monkeypatch: pytest.MonkeyPatch) -> DataDir:
    monkeypatch.setenv("SSDPREDICT_HOME", str(fleet_root))
    get_settings.cache_clear()
    return DataDir(fleet_root)


def test_devices_are_ranked_by_headroom_and_the_untrained_one_is_listed(fleet: DataDir) -> None:
    mixes = mix_table([parse_mix(MIX), parse_mix("write_ratio=0,request_size=64k,randomness=0")])
    result = fleet_capacity(fleet, ["mid", "slow", "fast", "untrained"], mixes, parse_slo("p99<=600us"))
    assert result.ranking() == [["fast", "mid", "slow"]] * 2
    head = result.headroom()
    assert (head[:, 0] > head[:, 1]).all() and (head[:, 2] > head[:, 0]).all()
    assert [(s.device, s.code) for s in result.skipped] == [("untrained", "no_model")]
    doc = result.to_dict()
    assert doc["without_open_loop_points"] == ["mid", "fast"]
    first = doc["mixes"][0]["ranking"]
    assert [r["rank"] for r in first] == [1, 2, 3] and first[2]["open_loop_points"] is True
    assert first[0]["workload"]["write_ratio"] == 0.5


def test_a_device_that_never_meets_the_target_ranks_last(fleet: DataDir) -> None:
    # ~110 us at QD1 on slow, ~55 on mid, ~28 on fast: a 60 us mean leaves slow out
    result = fleet_capacity(
        fleet, ["slow", "mid", "fast"], mix_table([parse_mix(MIX)]), parse_slo("mean<=60us")
    )
    outcomes = {d.device: d.answers[0].outcome for d in result.devices}
    assert outcomes["slow"] == "never" and outcomes["fast"] == "limited"
    assert result.ranking()[0][-1] == "slow"


def test_no_device_able_to_answer_is_an_error(fleet: DataDir) -> None:
    with pytest.raises(NoModel, match="none of the 1 devices"):
        fleet_capacity(fleet, ["untrained"], mix_table([parse_mix(MIX)]), parse_slo("p99<=1ms"))


def test_cli_all_devices_table_marks_and_lists(fleet: DataDir) -> None:
    res = CliRunner().invoke(app, ["capacity", "--all-devices", "-w", MIX, "--slo", "p99<=600us"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    ranked = [ln for ln in lines if any(f" {n}" in ln for n in ("fast", "mid", "slow"))][:3]
    assert ["fast" in ranked[0], "mid" in ranked[1], "slow" in ranked[2]] == [True] * 3
    assert "mid *" in res.output and "no open-loop points" in res.output
    assert "skipped untrained:" in res.output


def test_cli_devices_json_and_bad_choices(fleet: DataDir) -> None:
    res = CliRunner().invoke(
        app, ["capacity", "--devices", "slow,fast", "-w", MIX, "--slo", "p99<=600us", "--json"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert [r["device"] for r in doc["mixes"][0]["ranking"]] == ["fast", "slow"]
    for args, message in (
        (["--devices", "nope"], "nope"),
        (["-d", "mid", "--devices", "fast"], "give one of"),
        (["--devices", "zz*"], "no device matches"),
    ):
        res = CliRunner().invoke(app, ["capacity", *args, "-w", MIX, "--slo", "p99<=1ms"])
        assert res.exit_code == 2 and message in res.output, res.output
