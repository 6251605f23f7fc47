"""``ssdpredict capacity`` on a trained device (``synth``, real CART model, no open-loop points)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from modeling.errors import InvalidInput
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from service.cli.main import app
from traces.capacity.device import curves_of, device_capacity, mix_table, parse_mix
from traces.capacity.slo import parse_slo

MIX = "write_ratio=0.3,request_size=16k,randomness=1"


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["capacity", *args])
    return res.exit_code, res.output


def test_capacity_json_answer_meets_the_target_at_its_rate(trained: DataDir) -> None:
    code, out = _run("--device", "synth", "--workload", MIX, "--slo", "p99<=300us,mean<=200us", "--json")
    assert code == 0, out
    doc = json.loads(out)
    (a,) = doc["answers"]
    assert a["outcome"] == "limited" and a["binding"] in ("p99<=300us", "mean<=200us")
    assert 0 < a["iops_lower"] <= a["iops"] <= a["iops_upper"] and a["iops"] < a["capacity_iops"]
    assert a["bandwidth_mib_s"] == pytest.approx(a["iops"] * 16384 / 2**20)
    assert a["workload"]["request_size"] == 16384 and a["workload"]["write_ratio"] == 0.3
    # the device has no open-loop points: the answer says it rests on the closed-loop method alone
    assert a["beyond_measured"] and not doc["open_loop_points"]
    # the predicted latency at the answer is under both targets, and just over them 1 % faster
    mc, _ = curves_of(trained, "synth", mix_table([parse_mix(MIX)]))
    at, over = (mc.latency(0, np.array([r])) for r in (a["iops"], a["iops"] * 1.01))
    assert at.p99_us[0] <= 300 and at.mean_us[0] <= 200
    assert over.p99_us[0] > 300 or over.mean_us[0] > 200


def test_capacity_table_names_the_columns_and_the_binding_target(trained: DataDir) -> None:
    code, out = _run("-d", "synth", "-w", MIX, "--slo", "p99<=300us")
    assert code == 0, out
    for header in ("max IO/s", "MiB/s", "interval", "in flight", "utilisation", "binding target", "beyond"):
        assert header in out
    assert "p99<=300us" in out and "no open-loop points" in out
    # and the one command that measures them (synth was not swept: the target is the user's to give)
    flat = " ".join(out.split())
    assert f'ssdpredict sweep --device synth --target TARGET --for-capacity --workload "{MIX}"' in flat


def test_a_loose_target_holds_even_at_saturation(trained: DataDir) -> None:
    code, out = _run("-d", "synth", "-w", MIX, "--slo", "p99<=10s", "--json")
    (a,) = json.loads(out)["answers"]
    assert a["outcome"] == "saturation" and a["iops"] == pytest.approx(a["capacity_iops"])
    code, out = _run("-d", "synth", "-w", MIX, "--slo", "p99<=10s")
    assert code == 0 and "even at saturation" in out


def test_a_target_below_the_lightest_load_latency_is_never_met(trained: DataDir) -> None:
    code, out = _run("-d", "synth", "-w", MIX, "--slo", "mean<=1us", "--json")
    (a,) = json.loads(out)["answers"]
    assert a["outcome"] == "never" and a["iops"] == 0 and a["latency_mean_us"] > 1
    code, out = _run("-d", "synth", "-w", MIX, "--slo", "mean<=1us")
    assert code == 0 and "cannot meet mean<=1us at any load" in out and "lightest load" in out


def test_a_csv_of_mixes_gets_one_answer_each(trained: DataDir, tmp_path: Path) -> None:
    csv = tmp_path / "mixes.csv"
    csv.write_text("write_ratio,queue_depth,request_size,randomness\n0,4,4k,1\n1,8,64k,0\n")
    code, out = _run("-d", "synth", "--input", str(csv), "--slo", "p99<=1ms", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert [a["workload"]["request_size"] for a in doc["answers"]] == [4096, 65536]
    assert any("queue_depth left out" in n for n in doc["notes"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-w", MIX, "--slo", "p95<=1ms"], "cannot target 'p95'"),
        (
            ["-w", "write_ratio=0.3,queue_depth=4,request_size=4k,randomness=1", "--slo", "p99<=1ms"],
            "queue_depth is set by the offered load",
        ),
        (["-w", "write_ratio=2,request_size=4k,randomness=1", "--slo", "p99<=1ms"], "write_ratio"),
        (["-w", "write_ratio=0.3", "--slo", "p99<=1ms"], "request_size"),
        (["-w", "colour=blue", "--slo", "p99<=1ms"], "unknown workload field"),
        (["-w", MIX, "--slo", "p99<=1ms", "--burstiness", "0"], "burstiness"),
        (["--slo", "p99<=1ms"], "give --workload MIX or --input FILE.csv"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(trained: DataDir, args: list[str], message: str) -> None:
    code, out = _run("-d", "synth", *args)
    assert code == 2 and message in out, out
    assert out.strip().count("\n") == 0 or len(out.strip().splitlines()) <= 2  # rich may wrap a long line


def test_an_unknown_device_is_exit_2(trained: DataDir) -> None:
    code, out = _run("-d", "nope", "-w", MIX, "--slo", "p99<=1ms")
    assert code == 2 and "nope" in out


def test_device_capacity_refuses_an_empty_question(trained: DataDir) -> None:
    with pytest.raises(InvalidInput, match="at least one workload mix"):
        device_capacity(trained, "synth", mix_table([]), parse_slo("p99<=1ms"))


def test_the_cached_curve_source_follows_new_sweeps(trained_root: Path, tmp_path: Path) -> None:
    import shutil

    from tests.traces.test_capacity_fleet import open_loop_points
    from traces.capacity.device import cached_source

    home = tmp_path / "home"
    shutil.copytree(trained_root, home)
    d = DataDir(home)
    model = ModelRegistry(d).load("synth")
    first = cached_source(d, "synth", model)
    assert cached_source(d, "synth", model) is first and first.correction is None
    d.catalog.add_measurements("synth", open_loop_points(1.0))  # a new sweep: open-loop points
    second = cached_source(d, "synth", model)
    assert second is not first and second.correction is not None


def test_a_ceiling_caps_the_throughput_and_says_so(trained: DataDir) -> None:
    mixes, slo = mix_table([parse_mix(MIX)]), parse_slo("p99<=10s")
    full = device_capacity(trained, "synth", mixes, slo).answers[0]
    half = device_capacity(trained, "synth", mixes, slo, ceiling=0.5)
    assert half.answers[0].capacity_iops == pytest.approx(0.5 * full.capacity_iops)
    assert any("capped at 50 %" in n or "capped at 50%" in n for n in half.notes)
    # over 1: a load path that serves more than the closed-loop sweep, as measured ceilings may be
    more = device_capacity(trained, "synth", mixes, slo, ceiling=1.2)
    assert more.answers[0].capacity_iops == pytest.approx(1.2 * full.capacity_iops)
    assert any("raised to 120%" in n for n in more.notes)
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(InvalidInput, match="ceiling"):
            device_capacity(trained, "synth", mixes, slo, ceiling=bad)


def test_a_what_if_device_answers_too(
    trained_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from service.config import get_settings

    home = tmp_path / "home"
    shutil.copytree(trained_root, home)
    monkeypatch.setenv("SSDPREDICT_HOME", str(home))
    get_settings.cache_clear()
    res = CliRunner().invoke(
        app, ["whatif", "raid", "--member", "synth", "--level", "0", "--members", "4", "--name", "r0"]
    )
    assert res.exit_code == 0, res.output
    code, out = _run("--devices", "r0,synth", "-w", MIX, "--slo", "p99<=300us", "--json")
    assert code == 0, out
    ranking = json.loads(out)["mixes"][0]["ranking"]
    assert [r["device"] for r in ranking] == ["r0", "synth"]  # four striped members take more
    assert ranking[0]["iops"] > ranking[1]["iops"] > 0
