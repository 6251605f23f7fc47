"""CLI paths of train, evaluate, predict and models, through typer's CliRunner."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

import modeling.training.evaluate
import modeling.training.fit
import modeling.training.transfer
from service.cli.main import app
from tests.modeling.conftest import fast_candidates, synthetic_rows

runner = CliRunner()


@pytest.fixture(autouse=True)
def quick_candidates(monkeypatch):
    """The CLI trains with the default candidates; keep them tiny in tests."""
    for module in (modeling.training.fit, modeling.training.evaluate, modeling.training.transfer):
        monkeypatch.setattr(module, "default_candidates", lambda *a, **k: fast_candidates())


# one workload, as the predict command's options
WORKLOAD = ("--write-ratio", "0.3", "--queue-depth", "8", "--request-size", "16k", "--randomness", "1")


def run(*args: str):
    return runner.invoke(app, list(args))


@pytest.mark.slow
def test_train_evaluate_predict_and_models(device_with_data, tmp_path):
    r = run("train", "--device", "synth", "--folds", "3", "--time-budget", "5")
    assert r.exit_code == 0, r.output
    assert "trained" in r.output

    r = run("evaluate", "--device", "synth", "--folds", "3", "--time-budget", "2", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["device"] == "synth"
    assert set(report["metrics"]) == {"latency_mean_us", "latency_p99_us", "bandwidth_mib_s", "iops"}
    assert all(isinstance(e["mre"], float) and e["n"] == 128 for e in report["metrics"].values())

    r = run("evaluate", "--device", "synth", "--folds", "2", "--time-budget", "1")
    assert r.exit_code == 0 and "MRE" in r.output

    r = run("predict", "--device", "synth", *WORKLOAD, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["predictions"]["iops"]["value"] > 0 and out["predictions"]["iops"]["lower"] is not None

    r = run("predict", "--device", "synth", *WORKLOAD, "--model", "global")
    assert r.exit_code == 0 and "iops" in r.output

    src = tmp_path / "in.csv"
    dst = tmp_path / "out.csv"
    synthetic_rows(seed=2).drop(columns=["fio_version"]).head(10).to_csv(src, index=False)
    r = run("predict", "--device", "synth", "--input", str(src), "-o", str(dst))
    assert r.exit_code == 0, r.output
    result = pd.read_csv(dst)
    assert len(result) == 10 and "write_ratio" in result and "pred_iops_upper" in result

    r = run("models", "list", "--device", "synth", "--json")
    versions = json.loads(r.stdout)["versions"]
    assert len(versions) == 1 and versions[0]["active"]
    first = versions[0]["version"]
    assert run("train", "--device", "synth", "--folds", "2", "--time-budget", "1").exit_code == 0
    r = run("models", "show", "--device", "synth", "--json")
    assert json.loads(r.stdout)["version"] != first
    r = run("models", "activate", "--device", "synth", first)
    assert r.exit_code == 0 and first in r.output
    r = run("models", "show", "--device", "synth", first)
    assert r.exit_code == 0 and "(active)" in r.output


def test_errors_are_one_line(device_with_data):
    r = run("predict", "--device", "ghost", *WORKLOAD)
    assert r.exit_code == 2 and "unknown device" in r.output

    r = run("predict", "--device", "synth", *WORKLOAD)
    assert r.exit_code == 2 and "ssdpredict train" in r.output

    r = run("models", "show", "--device", "synth")
    assert r.exit_code == 2 and "ssdpredict train" in r.output

    r = run("train", "--device", "ghost")
    assert r.exit_code == 2 and "unknown device" in r.output


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("--write-ratio", "1.5"), "write_ratio"),
        (("--queue-depth", "0"), "queue_depth"),
        (("--request-size", "1000"), "request_size"),
        (("--request-size", "lots"), "request_size"),
        (("--queue-depth", "eight"), "queue-depth"),
        (("--randomness", "x"), "randomness"),
    ],
)
def test_invalid_workload_names_the_field(device_with_data, args, field):
    base = dict(zip(WORKLOAD[::2], WORKLOAD[1::2], strict=True))
    base[args[0]] = args[1]
    flat = [x for kv in base.items() for x in kv]
    r = run("predict", "--device", "synth", *flat)
    assert r.exit_code == 2
    assert field in r.output


def test_batch_with_bad_column_names_the_field(datadir, trained, tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("write_ratio,queue_depth,request_size,randomness\n0.3,abc,4096,1\n")
    r = run("predict", "--device", "synth", "--input", str(src))
    assert r.exit_code == 2 and "queue_depth" in r.output

    r = run("predict", "--device", "synth", "--input", str(tmp_path / "missing.csv"))
    assert r.exit_code == 2 and "no such file" in r.output


def test_missing_fields_without_input(device_with_data):
    r = run("predict", "--device", "synth", "--write-ratio", "0.3")
    assert r.exit_code == 2 and "--queue-depth" in r.output


@pytest.mark.slow
def test_evaluate_holdout_csv(device_with_data, tmp_path):
    path = tmp_path / "holdout.csv"
    synthetic_rows(seed=4).drop(columns=["fio_version"]).head(40).to_csv(path, index=False)
    r = run("evaluate", "--device", "synth", "--holdout", str(path), "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["method"] == "holdout" and report["metrics"]["iops"]["n"] == 40
    r = run("evaluate", "--device", "synth", "--holdout", str(tmp_path / "nope.csv"))
    assert r.exit_code == 2


@pytest.mark.slow
def test_feature_set_choice_and_bad_choice(device_with_data, monkeypatch):
    from modeling.training.selection import default_candidates as real_defaults

    seen: list[tuple[str, ...]] = []

    def record(feature_sets=("extended",), *a, **k):
        seen.append(tuple(feature_sets))
        return [c for c in fast_candidates() if c.feature_set in feature_sets] or real_defaults(
            feature_sets, quick=True
        )

    monkeypatch.setattr(modeling.training.fit, "default_candidates", record)
    r = run("train", "--device", "synth", "--folds", "3", "--features", "basic", "--json")
    assert r.exit_code == 0, r.output
    manifest = json.loads(r.stdout)["manifest"]
    assert manifest["feature_sets"] == ["basic"] and seen[-1] == ("basic",)
    assert {m["global"]["feature_set"] for m in manifest["metrics"].values()} == {"basic"}

    r = run("train", "--device", "synth", "--features", "fancy")
    assert r.exit_code == 2
    assert "unknown feature choice 'fancy'" in r.output and "extended, basic, both" in r.output


def test_predict_serves_ordered_percentiles_and_names_the_extrapolation(datadir, tmp_path, monkeypatch):
    from modeling.training import tail_guard
    from tests.conftest import small_plain_grid
    from tests.modeling.test_physics import with_percentiles

    monkeypatch.setattr(tail_guard, "plain_grid", small_plain_grid)  # what is served, not the grid's size

    datadir.catalog.ensure_device("tails")
    datadir.catalog.add_measurements("tails", with_percentiles(synthetic_rows()).to_dict("records"))
    assert run("train", "--device", "tails", "--folds", "3", "--time-budget", "2").exit_code == 0
    args = ["predict", "--device", "tails", "--write-ratio", "0", "--queue-depth", "512"]
    args += ["--request-size", "1m", "--randomness", "0"]
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    p = json.loads(r.stdout)["predictions"]
    order = ["latency_p50_us", "latency_p90_us", "latency_p99_us", "latency_p99_9_us"]
    assert [p[m]["value"] for m in order] == sorted(p[m]["value"] for m in order)
    assert p["latency_p99_us"]["value"] >= p["latency_mean_us"]["value"]
    sizes = dict.fromkeys(("request_size", "read_size", "write_size"), 16.0)
    assert p["iops"]["extrapolation"] == {"queue_depth": 8.0, **sizes, "outstanding_io": 2.0}
    r = run(*args)
    assert r.exit_code == 0 and "extrapolated" in r.output and "latency_p99_9_us" in r.output


def test_train_with_a_reference(trained, datadir):
    few = synthetic_rows(seed=5).sample(10, random_state=1)
    few["iops"] *= 0.5
    few["bandwidth_mib_s"] *= 0.5
    few["latency_mean_us"] *= 2
    few["latency_p99_us"] *= 2
    datadir.catalog.ensure_device("half")
    datadir.catalog.add_measurements("half", few.to_dict("records"), info={"fio_version": "fio-3.33"})
    r = run("train", "--device", "half", "--reference", "synth", "--json")
    assert r.exit_code == 0, r.output
    transfer = json.loads(r.stdout)["manifest"]["transfer"]
    assert transfer["reference"]["device"] == "synth" and transfer["chosen"] == "transfer"
    r = run("train", "--device", "half", "--reference", "synth")
    assert r.exit_code == 0 and "reference synth" in r.output, r.output
    r = run("train", "--device", "half", "--reference", "nosuch")
    assert r.exit_code != 0 and "nosuch" in r.output and "Traceback" not in r.output


THREE_METRICS = ["latency_mean_us", "iops", "bandwidth_mib_s"]


@pytest.mark.slow
def test_evaluate_the_metrics_the_data_has(tmp_path):
    # issue 12: a CSV with three of the four metrics trains; evaluate must work on it too
    csv = tmp_path / "three-metrics.csv"
    synthetic_rows(repeats=2)[["write_ratio", "queue_depth", "request_size", "randomness", "numjobs",
                               *THREE_METRICS]].to_csv(csv, index=False)
    assert run("ingest", "--device", "three", str(csv)).exit_code == 0
    r = run("evaluate", "--device", "three", "--folds", "2", "--time-budget", "1", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert set(report["metrics"]) == set(THREE_METRICS)
    assert all(e["n"] == 256 and e["mre"] < 0.5 for e in report["metrics"].values())
    assert set(report["noise_floor"]) == {"n_workloads", "n_rows", *THREE_METRICS}
    assert all(set(by_metric) == set(THREE_METRICS) for by_metric in report["feature_sets"].values())
    r = run("evaluate", "--device", "three", "--folds", "2", "--time-budget", "1")
    assert r.exit_code == 0 and "MRE" in r.output and "noise floor (repeat CV): latency_mean_us" in r.output
    assert "latency_p99_us" not in r.output, r.output
    # training the same repeated runs gives their noise floor too, over the same metrics
    r = run("train", "--device", "three", "--folds", "2", "--time-budget", "1")
    assert r.exit_code == 0, r.output
    mv = json.loads(run("models", "show", "--device", "three", "--json").stdout)
    assert set(mv["manifest"]["evaluation"]["noise_floor"]) == {"n_workloads", "n_rows", *THREE_METRICS}
    # without IOPS: nothing derives from it, the rest is still evaluated
    synthetic_rows()[["write_ratio", "queue_depth", "request_size", "randomness", "numjobs",
                      "latency_mean_us", "latency_p99_us"]].to_csv(csv, index=False)
    assert run("ingest", "--device", "noiops", str(csv)).exit_code == 0
    r = run("evaluate", "--device", "noiops", "--folds", "2", "--time-budget", "1", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert set(report["metrics"]) == {"latency_mean_us", "latency_p99_us"}
    assert set(report["physics"]) == {"modes"}
