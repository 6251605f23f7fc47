"""Relative-fitness transfer: a known relation recovered from 8 points, registry round trip, errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from modeling.errors import InvalidInput, NoModel, UnknownDevice
from modeling.estimators.relative import RelativeFitnessModel
from modeling.features import compute_features
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from modeling.training.fit import fit_device_model
from modeling.training.transfer import fit_transfer_model
from modeling.training.train import train_device
from modeling.training.selection import relative_errors
from modeling.workload import WORKLOAD_FIELDS
from modeling.workload_matrix import workload_matrix
from tests.modeling.conftest import fast_candidates, synthetic_rows


def device_b(a: pd.DataFrame) -> pd.DataFrame:
    """The pair's second device: B = 0.5 x A x (1 + write_ratio), its latencies by Little's law."""
    b = a.copy()
    factor = 0.5 * (1 + b["write_ratio"])
    b["iops"] *= factor
    b["bandwidth_mib_s"] *= factor
    b["latency_mean_us"] /= factor
    b["latency_p99_us"] /= factor
    return b


def _holdout_mre(model, frame: pd.DataFrame, test: np.ndarray) -> float:
    pred = model.predict_matrix(workload_matrix(frame.iloc[test]), metrics=["iops"])["iops"][0]
    return float(relative_errors(pred, frame["iops"].to_numpy(float)[test]).mean())


def test_transfer_recovers_a_known_relation_far_better_than_from_scratch():
    a = synthetic_rows(noise=0.02, seed=1)
    b = device_b(synthetic_rows(noise=0.02, seed=2))
    ref, _ = fit_device_model(a, folds=3, candidates=fast_candidates())
    idx = np.random.default_rng(0).choice(len(b), 8, replace=False)
    test = np.setdiff1d(np.arange(len(b)), idx)
    transferred, summary = fit_transfer_model(b.iloc[idx], ref, device="b", version="v1")
    scratch, _ = fit_device_model(b.iloc[idx], folds=3, candidates=fast_candidates())
    err_t, err_s = _holdout_mre(transferred, b, test), _holdout_mre(scratch, b, test)
    assert err_t < 0.10, summary["metrics"]["iops"]
    assert err_t < 0.5 * err_s, (err_t, err_s)
    # the relation is linear in write_ratio on the log scale: not a constant ratio
    assert summary["metrics"]["iops"]["global"]["correction"] in ("linear", "tree")


def test_relative_model_is_a_clonable_estimator_with_the_reference_fixed():
    a = synthetic_rows(noise=0.02, seed=1)
    ref, _ = fit_device_model(a, folds=3, candidates=fast_candidates())
    b = device_b(a).iloc[:16]
    X, y = compute_features(workload_matrix(b), "extended"), b["iops"].to_numpy(float)
    transferred, _ = fit_transfer_model(b, ref, device="b", version="v1")
    est = transferred.specs["iops"].scopes["global"].members[0][1]
    assert isinstance(est, RelativeFitnessModel)
    twin = clone(est)
    assert not hasattr(twin, "coef_") and twin.reference is not None
    np.testing.assert_allclose(twin.fit(X, y).predict(X), est.predict(X), rtol=1e-6)
    with pytest.raises(ValueError, match="reference"):
        RelativeFitnessModel().fit(X, y)


@pytest.fixture
def new_device(datadir: DataDir, trained: str) -> str:
    """``synth`` trained, and ``fresh`` holding 10 points of the related device B."""
    b = device_b(synthetic_rows(noise=0.02, seed=3)).sample(10, random_state=0)
    datadir.catalog.ensure_device("fresh")
    datadir.catalog.add_measurements("fresh", b.to_dict("records"), info={"fio_version": "fio-3.33"})
    return "fresh"


def test_registry_round_trip_of_a_transferred_model(datadir: DataDir, trained: str, new_device: str):
    mv = train_device(datadir, new_device, folds=3, reference="synth", candidates=fast_candidates())
    transfer = mv.manifest["transfer"]
    assert transfer["reference"] == {"device": "synth", "version": trained}
    assert transfer["chosen"] == "transfer", transfer
    assert transfer["scratch_cv_mre"] is not None and transfer["transfer_cv_mre"] < transfer["scratch_cv_mre"]
    frame = synthetic_rows(seed=4)
    registry = ModelRegistry(datadir)
    # the same (deterministic) transfer in memory, against the one read back from disk
    in_memory, _ = fit_transfer_model(datadir.catalog.measurements(new_device), registry.load("synth"),
                                      device=new_device, version=mv.version)
    before = in_memory.predict_frame(frame)
    loaded = registry.load(new_device)
    assert loaded.manifest["transfer"]["reference"]["version"] == trained
    est = loaded.specs["iops"].scopes["global"].members[0][1]
    assert isinstance(est, RelativeFitnessModel) and est.reference_.device == "synth"
    pd.testing.assert_frame_equal(loaded.predict_frame(frame), before)


def test_bad_references_are_domain_errors(datadir: DataDir, trained: str, new_device: str):
    with pytest.raises(UnknownDevice):
        train_device(datadir, new_device, reference="nosuch")
    datadir.catalog.ensure_device("untrained")
    with pytest.raises(NoModel, match="untrained"):
        train_device(datadir, new_device, reference="untrained")
    with pytest.raises(InvalidInput, match="own reference"):
        train_device(datadir, new_device, reference=new_device)
    assert datadir.catalog.active_model_version(new_device) is None


def test_adaptive_plan_with_a_reference_spreads_over_its_predicted_range(datadir: DataDir, trained: str):
    from collectors.sweep.run import sweep_plan

    with pytest.raises(InvalidInput, match="adaptive"):
        sweep_plan(datadir, "fresh2", "ssd", kind="lhs", budget=8, reference="synth")
    with pytest.raises(UnknownDevice):
        sweep_plan(datadir, "fresh2", "ssd", kind="adaptive", budget=8, reference="nosuch")
    plan = sweep_plan(datadir, "fresh2", "ssd", kind="adaptive", budget=8, reference="synth")
    assert len(plan.points) == 8
    assert plan.settings["reference"] == {"device": "synth", "version": trained}
    # the reference's predicted range is covered: its extremes over the candidate pool are picked
    ref = ModelRegistry(datadir).load("synth")
    chosen = np.array([[float(getattr(p, f)) for f in WORKLOAD_FIELDS] for p in plan.points])
    pred = ref.predict_matrix(chosen, metrics=["iops"])["iops"][0]
    pool = workload_matrix(synthetic_rows(seed=6).sample(40, random_state=0))
    pool_pred = ref.predict_matrix(pool, metrics=["iops"])["iops"][0]
    assert np.log(pred.max() / pred.min()) > 0.8 * np.log(pool_pred.max() / pool_pred.min())
