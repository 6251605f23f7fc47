"""Training: too little data, failure safety, physics and region choices."""

from __future__ import annotations

import pytest

from modeling.errors import NoData, UnknownDevice
from modeling.training.fit import fit_device_model
from modeling.serving.registry import ModelRegistry
from modeling.training.train import train_device
from tests.modeling.conftest import fast_candidates, synthetic_rows


def test_too_few_rows_is_nodata(datadir, synthetic):
    datadir.catalog.ensure_device("tiny")
    datadir.catalog.add_measurements("tiny", synthetic.head(5).to_dict("records"))
    with pytest.raises(NoData, match="at least"):
        train_device(datadir, "tiny")


def test_device_without_measurements_is_nodata(datadir):
    datadir.catalog.ensure_device("empty")
    with pytest.raises(NoData):
        train_device(datadir, "empty")


def test_unknown_device(datadir):
    with pytest.raises(UnknownDevice):
        train_device(datadir, "ghost")


def test_rows_with_missing_metrics_are_dropped(synthetic):
    broken = synthetic.copy()
    broken.loc[:9, "latency_p99_us"] = float("nan")
    _, summary = fit_device_model(broken, folds=3, candidates=fast_candidates())
    assert summary["n_rows"] == len(synthetic) - 10


def test_failed_training_keeps_active_model(datadir, trained, monkeypatch):
    import modeling.serving.registry as registry_module

    def fail(*args, **kwargs):
        raise OSError("disk full")

    before = {p.name for p in (datadir.models_dir / "synth").iterdir()}
    monkeypatch.setattr(registry_module.os, "rename", fail)
    with pytest.raises(OSError, match="disk full"):
        train_device(datadir, "synth", folds=3, candidates=fast_candidates())
    monkeypatch.undo()
    assert datadir.catalog.active_model_version("synth").version == trained
    assert [v.version for v in datadir.catalog.list_model_versions("synth")] == [trained]
    assert {p.name for p in (datadir.models_dir / "synth").iterdir()} == before  # no temp folder left
    assert ModelRegistry(datadir).load("synth").version == trained


def test_failure_inside_fitting_keeps_active_model(datadir, trained, monkeypatch):
    import modeling.training.train as train_module

    def fail(*args, **kwargs):
        raise RuntimeError("estimator blew up")

    monkeypatch.setattr(train_module, "fit_device_model", fail)
    with pytest.raises(RuntimeError):
        train_device(datadir, "synth")
    assert datadir.catalog.active_model_version("synth").version == trained


def test_no_activate_registers_without_switching(datadir, trained):
    mv = train_device(datadir, "synth", folds=3, candidates=fast_candidates(), activate=False)
    assert not mv.active
    assert datadir.catalog.active_model_version("synth").version == trained


def test_progress_is_reported(synthetic):
    seen: list[tuple[str, float]] = []
    fit_device_model(
        synthetic, folds=3, candidates=fast_candidates(), progress=lambda m, f: seen.append((m, f))
    )
    assert seen and seen[-1][1] == 1.0
    assert all(0 <= f <= 1 for _, f in seen)


def test_a_law_that_holds_on_the_data_is_used_without_a_free_model():
    """Bandwidth is IOPS x size in every fio result: the law is used, no tree is fitted for it."""
    rows = synthetic_rows(noise=0.05, seed=3)
    model, summary = fit_device_model(rows, folds=3, candidates=fast_candidates(), regions=False)
    entry = summary["metrics"]["bandwidth_mib_s"]
    assert entry["mode"] == "derived" and entry["physics"]["law_gap"] < 1e-9
    assert "direct_cv_mre" not in entry["physics"]  # no direct model was trained
    assert "IOPS x mean request size" in entry["global"]["estimator"]
    out = model.predict_frame(rows)
    expected = (
        out["pred_iops"]
        * rows["request_size"]
        / 2**20
        * model.specs["bandwidth_mib_s"].scopes["global"].scale
    )
    assert (abs(out["pred_bandwidth_mib_s"] / expected - 1) < 1e-9).all()


def test_a_law_the_data_breaks_must_earn_its_place():
    """psync ignores the queue depth, so Little's law with N = depth x jobs fails: compare, don't assume."""
    rows = synthetic_rows(noise=0.05, seed=3)
    # what a synchronous engine measures: one I/O in flight per job, whatever iodepth says
    rows["latency_mean_us"] = rows["numjobs"] / rows["iops"] * 1e6
    _, summary = fit_device_model(rows, folds=3, candidates=fast_candidates(), regions=False)
    phys = summary["metrics"]["latency_mean_us"]["physics"]
    assert phys["law_gap"] > 0.5
    assert {"derived_cv_mre", "direct_cv_mre"} <= set(phys)
    assert summary["metrics"]["latency_mean_us"]["mode"] == "direct"


def test_repeats_are_reduced_to_their_median_so_a_stall_moves_nothing():
    """One run in three delivers a twentieth of the rate: the model follows the other two."""
    from modeling.training.selection import make_candidate

    rows = synthetic_rows(noise=0.0, repeats=3, seed=1)
    stalled = rows.index[::3][::4]  # every fourth workload's first run
    rows.loc[stalled, ["iops", "bandwidth_mib_s"]] /= 20
    cart = [make_candidate("extended", "cart", min_samples_leaf=1)]
    model, summary = fit_device_model(rows, folds=3, candidates=cart, regions=False, physics=False)
    assert summary["n_rows"] == 3 * summary["n_workloads"]
    clean = synthetic_rows(noise=0.0, seed=1)
    pred = model.predict_frame(clean)["pred_iops"].to_numpy()
    assert abs(pred / clean["iops"].to_numpy() - 1).max() < 1e-6
    # the interval is calibrated on every run, stalls included, so it is wider than zero
    assert model.specs["iops"].scopes["global"].q > 0


@pytest.mark.slow
def test_feature_sets_choice(synthetic):
    _, basic = fit_device_model(synthetic, folds=3, feature_sets=("basic",), regions=False, time_budget_s=0)
    assert basic["feature_sets"] == ["basic"]
    assert {m["global"]["feature_set"] for m in basic["metrics"].values()} == {"basic"}


def test_region_models_where_enough_data(synthetic):
    model, summary = fit_device_model(synthetic, folds=3, candidates=fast_candidates())
    regions = summary["metrics"]["iops"]["regions"]
    assert regions, "every region of the synthetic grid has 16 points"
    for name, entry in regions.items():
        assert entry["n"] == 16
        # auto only where the region model clearly won (never where it lost on average)
        assert not entry["auto"] or entry["cv_mre"] < entry["global_cv_mre"]
        assert (name in model.specs["iops"].auto_regions) == entry["auto"]


def test_tail_latency_ratio_mode_when_it_wins(datadir):
    """p99 = (3 + 2 x write ratio) x mean latency here: the ratio model beats a direct one."""
    from modeling.serving.registry import save_model
    from modeling.workload import Workload

    rows = synthetic_rows(noise=0.05, seed=7)
    model, summary = fit_device_model(rows, folds=3, candidates=fast_candidates())
    p99 = summary["metrics"]["latency_p99_us"]
    assert p99["physics"]["ratio_cv_mre"] < p99["physics"]["direct_cv_mre"]
    assert p99["mode"] == "ratio" and model.specs["latency_p99_us"].mode == "ratio"
    wl = Workload(write_ratio=0.0, queue_depth=4, request_size=4096, randomness=1.0)
    pred = model.predict_one(wl, model=wl.region).predictions
    assert pred["latency_p99_us"].model == "global"  # ratio models are global only, and say so
    ratio = pred["latency_p99_us"].value / model.predict_one(wl).predictions["latency_mean_us"].value
    assert 2.0 < ratio < 4.5
    datadir.catalog.ensure_device("synth")
    synth = model.__class__("synth", "v1", model.specs, model.data_regions, limits=model.limits)
    save_model(datadir, synth, {}, activate=True)
    loaded = ModelRegistry(datadir).load("synth")
    assert loaded.predict_frame(rows).equals(model.predict_frame(rows))


def test_the_stored_evaluation_is_the_served_models_out_of_fold_error():
    rows = synthetic_rows(noise=0.05, seed=7)  # a device whose tail is best learned as a ratio
    _, summary = fit_device_model(rows, folds=3, candidates=fast_candidates(), regions=False)
    evaluation = summary["evaluation"]
    assert "out-of-fold" in evaluation["method"] and evaluation["folds"] == 3
    assert summary["metrics"]["latency_p99_us"]["mode"] == "ratio"
    assert {e["mode"] for e in summary["metrics"].values()} >= {"derived", "ratio"}
    for metric, entry in summary["metrics"].items():
        # without region models the served model is the global one: the very error selection saw
        assert evaluation["metrics"][metric]["mre"] == pytest.approx(entry["global"]["cv_mre"]), metric
        assert evaluation["metrics"][metric]["n"] == len(rows)


def test_the_stored_evaluation_counts_the_region_models_that_serve(synthetic):
    _, summary = fit_device_model(synthetic, folds=3, candidates=fast_candidates())
    iops = summary["metrics"]["iops"]
    n = summary["n_workloads"]
    # auto serves a region's own model where it won: its errors replace the global model's there
    gain = sum(e["n"] * (e["global_cv_mre"] - e["cv_mre"]) for e in iops["regions"].values() if e["auto"])
    served = summary["evaluation"]["metrics"]["iops"]["mre"]
    assert served == pytest.approx(iops["global"]["cv_mre"] - gain / n)


def test_a_version_stores_its_evaluation_and_lists_the_same_numbers(datadir, trained):
    mv = datadir.catalog.get_model_version("synth", trained)
    evaluation = mv.manifest["evaluation"]
    assert mv.manifest["cv_mre"] == {m: e["mre"] for m, e in evaluation["metrics"].items()}
    assert set(evaluation["metrics"]) == {"latency_mean_us", "latency_p99_us", "bandwidth_mib_s", "iops"}
