"""A worse model does not replace the active one; train the metrics the data has (CLI, real store)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import modeling.training.fit
from modeling.store import DataDir
from modeling.store.records import ModelVersion
from modeling.training.selection import Candidate
from modeling.training.train import activation_decision
from service.cli.main import app
from tests.modeling.conftest import fast_candidates, synthetic_rows

runner = CliRunner()


@pytest.fixture(autouse=True)
def quick_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    def quick(feature_sets: tuple[str, ...] = ("extended",), *a: object, **k: object) -> list[Candidate]:
        return [c for c in fast_candidates() if c.feature_set in feature_sets]

    monkeypatch.setattr(modeling.training.fit, "default_candidates", quick)


def _train(*extra: str) -> tuple[int, str]:
    r = runner.invoke(app, ["train", "--device", "synth", "--folds", "3", "--time-budget", "2", *extra])
    return r.exit_code, r.output


@pytest.mark.slow
def test_a_worse_version_stays_inactive_unless_asked(datadir: DataDir, device_with_data: str) -> None:
    code, output = _train()
    assert code == 0 and "(active)" in output, output
    first = datadir.catalog.active_model_version("synth")
    assert first is not None
    # Measurements that make the device look erratic: the next model's CV error is far worse.
    noisy = synthetic_rows(seed=7)
    rng = np.random.default_rng(7)
    for metric in ("iops", "latency_mean_us", "latency_p99_us", "bandwidth_mib_s"):
        noisy[metric] *= rng.lognormal(0.0, 1.5, len(noisy))
    datadir.catalog.add_measurements("synth", noisy.to_dict("records"))
    code, output = _train()
    assert code == 0, output
    assert "not activated" in output and "--activate" in output and first.version in output
    assert datadir.catalog.active_model_version("synth") == first
    held = [mv for mv in datadir.catalog.list_model_versions("synth") if not mv.active][-1]
    decision = held.manifest["activation"]
    assert not decision["activated"] and decision["previous"] == first.version and decision["worse"]
    for metric, e in decision["worse"].items():
        assert e["new"] > e["active"] + e["margin"], metric
        assert f"{100 * e['active']:.2f}%" in output and f"{100 * e['new']:.2f}%" in output
    code, output = _train("--activate")
    assert code == 0 and "forced" in output, output
    assert datadir.catalog.active_model_version("synth") != first


@pytest.mark.slow
def test_basic_features_train_worse_and_stay_inactive(datadir: DataDir, device_with_data: str) -> None:
    # issue 12: `train --features basic` activated a model at 27.7 % IOPS error over one at 3.8 %.
    # basic features do not see numjobs, on which this device's IOPS depends: a real worse training.
    code, output = _train()
    assert code == 0 and "(active)" in output, output
    first = datadir.catalog.active_model_version("synth")
    assert first is not None
    code, output = _train("--features", "basic")
    assert code == 0, output
    assert "not activated" in output and "--activate" in output, output
    assert datadir.catalog.active_model_version("synth") == first
    held = [mv for mv in datadir.catalog.list_model_versions("synth") if not mv.active][-1]
    assert held.manifest["feature_sets"] == ["basic"]
    worse = held.manifest["activation"]["worse"]
    assert "iops" in worse and worse["iops"]["new"] > 2 * worse["iops"]["active"], worse
    # like with like: each version's cv_mre and cv_fold_std are its served errors' mean and spread
    for mv in (first, held):
        evaluation = mv.manifest["evaluation"]["metrics"]
        assert mv.manifest["cv_mre"] == {m: e["mre"] for m, e in evaluation.items()}
        assert mv.manifest["cv_fold_std"] == {m: e["fold_std"] for m, e in evaluation.items()}
    # the margin is noise of a difference of two 3-fold means, not a fold's own spread
    std_old, std_new = first.manifest["cv_fold_std"]["iops"], held.manifest["cv_fold_std"]["iops"]
    assert worse["iops"]["margin"] == pytest.approx(
        max(0.10 * worse["iops"]["active"], 2 * ((std_old**2 + std_new**2) / 3) ** 0.5))


def _version(cv: dict[str, float], std: dict[str, float], folds: int = 4) -> ModelVersion:
    return ModelVersion("v1", "d", True, "d/v1", {"cv_mre": cv, "cv_fold_std": std, "folds": folds})


def _new(cv: dict[str, float], std: dict[str, float], folds: int = 4) -> dict[str, object]:
    return {"cv_mre": cv, "cv_fold_std": std, "folds": folds}


def test_activation_margin_is_relative_or_the_noise_of_the_difference() -> None:
    active = _version({"iops": 0.10}, {"iops": 0.002})
    # 0.105 is within 10 % of 0.10: noise
    assert activation_decision(active, _new({"iops": 0.105}, {"iops": 0.001}), activate=True,
                               force=False)["activated"]
    # 0.13 is beyond 10 % and beyond 2 standard errors of the difference of two 4-fold means
    worse = activation_decision(active, _new({"iops": 0.13}, {"iops": 0.02}), activate=True, force=False)
    assert not worse["activated"]
    assert worse["worse"]["iops"]["margin"] == pytest.approx(2 * (0.002**2 / 4 + 0.02**2 / 4) ** 0.5)
    # ... unless the folds disagree so much that 3 points are within the noise
    assert activation_decision(active, _new({"iops": 0.13}, {"iops": 0.05}), activate=True,
                               force=False)["activated"]
    # a version whose folds are erratic does not excuse a far worse error by them (issue 12:
    # 27.7 % over 3.8 %): a fold spread of 25 % over 5 folds is a standard error of 11 %
    bad = activation_decision(_version({"iops": 0.038}, {"iops": 0.01}, folds=5),
                              _new({"iops": 0.277}, {"iops": 0.25}, folds=5), activate=True, force=False)
    assert not bad["activated"] and bad["worse"]["iops"]["margin"] == pytest.approx(
        2 * (0.01**2 / 5 + 0.25**2 / 5) ** 0.5)
    empty = {"cv_mre": {}, "cv_fold_std": {}}
    assert activation_decision(None, empty, activate=True, force=False)["activated"]
    assert not activation_decision(None, {"cv_mre": {}, "cv_fold_std": {}}, activate=False,
                                   force=False)["activated"]


def test_train_the_metrics_the_csv_has(datadir: DataDir, tmp_path: Path) -> None:
    rows = synthetic_rows()[["write_ratio", "queue_depth", "request_size", "randomness", "numjobs",
                             "latency_mean_us", "iops", "bandwidth_mib_s"]]
    csv = tmp_path / "three-metrics.csv"
    rows.to_csv(csv, index=False)
    r = runner.invoke(app, ["ingest", "--device", "synth", str(csv)])
    assert r.exit_code == 0, r.output
    code, output = _train()
    assert code == 0, output
    assert "not trained (no data): latency_p99_us" in output
    mv = datadir.catalog.active_model_version("synth")
    assert mv is not None and set(mv.manifest["cv_mre"]) == {"latency_mean_us", "iops", "bandwidth_mib_s"}
    r = runner.invoke(app, ["predict", "--device", "synth", "--write-ratio", "0.3", "--queue-depth", "4",
                            "--request-size", "4k", "--randomness", "1", "--json"])
    assert r.exit_code == 0, r.output
    assert set(json.loads(r.stdout)["predictions"]) == {"latency_mean_us", "iops", "bandwidth_mib_s"}
