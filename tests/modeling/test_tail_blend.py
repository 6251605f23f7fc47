"""The tail guard's blend: a percentile served as a geometric blend of its rules and the plain
model, where the inner CV says the blend beats both (issue 27).

A rules' ratio to the mean latency blended with the plain model is the ``blend`` spec mode
(the mean latency to the power of the rules' weight); a direct rules' model blended stays
``direct``.  Both serving paths answer it alike, the store round-trips it, and the guard
serves a blend only where :func:`~modeling.training.tail_guard.choose_weight` picks one from
the inner-CV errors the training report records.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from modeling.errors import CorruptModel
from modeling.features import compute_features
from modeling.reporting.out_of_fold import refit
from modeling.serving.device_model import DeviceModel
from modeling.serving.registry import ModelRegistry, decode_model, save_model
from modeling.training import tail_guard
from modeling.training.fit import fit_device_model, median_by_workload
from modeling.training.tail_guard import BLEND_WEIGHTS, GUARDED, blend, choose_weight
from modeling.workload import METRICS, PERCENTILE_METRICS, SERVED_METRICS
from modeling.workload_matrix import workload_matrix
from tests.modeling.conftest import fast_candidates, synthetic_rows
from tests.modeling.test_fast_paths import _workloads, assert_row_path_equals_matrix_path
from tests.modeling.test_percentile_ladder import known_tail

P99 = "latency_p99_us"


pytestmark = pytest.mark.usefixtures("small_plain_model")


@pytest.fixture(scope="module")
def device():
    return known_tail(synthetic_rows(noise=0.05, seed=3))


def _fit(device, guard, blends=True, regions=False, one_se=False, guard_oof=None):
    """Trained with every percentile's blends on or off; the one-SE rule off unless asked
    (``test_tail_one_se.py``), so the weights here are :func:`choose_weight`'s."""
    with pytest.MonkeyPatch.context() as mp:
        for m in GUARDED:
            mp.setitem(tail_guard.TAIL_BLEND, m, blends)
            mp.setitem(tail_guard.TAIL_ONE_SE, m, one_se and tail_guard.TAIL_ONE_SE[m])
        return fit_device_model(
            device, folds=3, candidates=fast_candidates(), regions=regions, tail_guard=guard,
            guard_oof=guard_oof,
        )


LOW = -1e9
"""A threshold every weight passes: each percentile served at its lowest-CV weight (-inf keeps the rules)."""


@pytest.fixture(scope="module")
def blended(device):
    """With no threshold to pass, every percentile is served at its lowest-CV weight: blends here."""
    return _fit(device, LOW, regions=True)


def test_choose_weight_follows_the_inner_cv():
    scored = {0.25: (0.30, 2.5), 0.5: (0.20, 1.8), 0.75: (0.22, 1.2), 1.0: (0.25, 0.4)}
    # without blends: the rules at the threshold, else the plain model
    assert choose_weight(scored, 0.3, blends=False) == 1.0
    assert choose_weight(scored, 0.5, blends=False) == 0.0
    # with: the lowest CV error among the weights that beat the plain model by the threshold
    assert choose_weight(scored, 0.0, blends=True) == 0.5
    assert choose_weight(scored, 2.0, blends=True) == 0.25
    assert choose_weight(scored, 3.0, blends=True) == 0.0
    # a tie goes to the rules' side
    assert choose_weight({**scored, 1.0: (0.20, 1.9)}, 0.0, blends=True) == 1.0
    rules, plain = np.array([2.0, 8.0]), np.array([8.0, 2.0])
    np.testing.assert_allclose(blend(rules, plain, 0.5), [4.0, 4.0])
    assert blend(rules, plain, 1.0) is rules and blend(rules, plain, 0.0) is plain
    np.testing.assert_allclose(blend(rules, plain, np.array([1.0, 0.25])), [2.0, 8.0**0.25 * 2.0**0.75])


def test_the_guard_serves_the_weight_the_inner_cv_chose(device, blended):
    """Each percentile is served at ``choose_weight`` of the CV errors its report records, and its
    CV error is that blend's; without blends (the shipped default) only the rules or the plain model."""
    model, report = blended
    modes = set()
    for m in GUARDED:
        entry = report["metrics"][m]
        info = entry["tail_guard"]
        kind = "scaled" if tail_guard.FALLBACK_MULTIPLIER[m] else "raw"
        scored = {float(k): (mre, z) for k, (mre, z) in info["blends"][kind].items()}
        assert set(scored) == {*BLEND_WEIGHTS, 1.0}
        assert info["weight"] == choose_weight(scored, LOW, blends=True)
        weight = info["weight"]
        modes.add(entry["mode"])
        if 0.0 < weight < 1.0:
            assert entry["global"]["blend"]["weight"] == weight
            assert entry["global"]["cv_mre"] == pytest.approx(scored[weight][0], rel=1e-9)
            spec = model.specs[m]
            assert spec.mode in ("blend", "direct")
            assert spec.mean_power == (weight if spec.mode == "blend" else 1.0)
            members = spec.scopes["global"].members
            assert len(members) >= 2 and abs(sum(spec.scopes["global"].weights) - 1.0) < 1e-12
    assert "blend" in modes, "the fixture must blend a ratio"
    plain_only, report0 = _fit(device, 0.5, blends=False)
    for m in GUARDED:
        assert report0["metrics"][m]["tail_guard"]["weight"] in (0.0, 1.0)
        assert plain_only.specs[m].mode != "blend"


@pytest.mark.slow  # three trainings: in the slow set (CI runs it)
def test_a_clearly_better_side_is_served_alone():
    """Where the rules are near exact (the ratio to the mean on a clean known tail) a blend with
    the plain model only adds its error: the inner CV keeps the rules alone; at +inf nothing passes."""
    clean = known_tail(synthetic_rows(noise=0.0, seed=3))
    _, report = _fit(clean, LOW)
    info = report["metrics"][P99]["tail_guard"]
    assert report["metrics"][P99]["mode"] == "ratio" and info["weight"] == 1.0
    _, report = _fit(clean, math.inf)
    assert all(report["metrics"][m]["tail_guard"]["weight"] == 0.0 for m in GUARDED)


@pytest.mark.slow  # three trainings: in the slow set (CI runs it)
def test_a_blend_answers_the_geometric_mean_of_its_parts(device, blended):
    """The ``blend`` spec's answer, before the ladder, is (rules' ratio x mean)^w x plain^(1 - w),
    with the rules' and the plain model's own fits (the rules-only and plain-only trainings)."""
    model, report = blended
    rules_model, _ = _fit(device, -math.inf, regions=True)  # -inf: the rules alone, even with blends
    plain_model, _ = _fit(device, math.inf, blends=False, regions=True)
    w = workload_matrix(device)[:25]
    X = {fs: compute_features(w, fs) for fs in ("basic", "extended")}
    mean = model.predict_matrix(w, metrics=["latency_mean_us"])["latency_mean_us"][0]
    for m in GUARDED:
        spec, weight = model.specs[m], report["metrics"][m]["tail_guard"]["weight"]
        if spec.mode != "blend":
            continue
        got = spec.scopes["global"].predict(X) * mean**spec.mean_power
        rules = rules_model.specs[m].scopes["global"].predict(X) * mean
        plain = plain_model.specs[m].scopes["global"].predict(X)
        np.testing.assert_allclose(got, rules**weight * plain ** (1 - weight), rtol=1e-6)


@pytest.mark.slow  # three trainings: in the slow set (CI runs it)
def test_a_blend_leaves_iops_bandwidth_and_mean_latency_alone(device, blended):
    """The blends are fitted after the metrics they do not guard: those answer exactly as before."""
    model, _ = blended
    rules_model, _ = _fit(device, -math.inf, regions=True)
    w = _workloads(80, seed=17)
    metrics = ["iops", "bandwidth_mib_s", "latency_mean_us"]
    a, b = model.predict_matrix(w, metrics=metrics), rules_model.predict_matrix(w, metrics=metrics)
    for m in metrics:
        np.testing.assert_array_equal(a[m][0], b[m][0])


def test_both_serving_paths_answer_a_blend_alike(blended):
    model, _ = blended
    w = _workloads(120, seed=13)
    assert_row_path_equals_matrix_path(model, w, step=3)
    assert set(model.metrics) == set(SERVED_METRICS)


def test_the_store_round_trips_a_blend(datadir, device_with_data, device, blended):
    model, _ = blended
    model = DeviceModel("synth", "v1", model.specs, model.data_regions, limits=model.limits)
    save_model(datadir, model, {"note": "blend"}, activate=True)
    loaded = ModelRegistry(datadir).load("synth")
    folder = datadir.models_dir / "synth" / "v1"
    doc = json.loads((folder / "models.json").read_text())
    blobs = {f.name: f.read_bytes() for f in folder.iterdir() if f.suffix == ".ubj"}
    blends = {m: e["mean_power"] for m, e in doc["metrics"].items() if e["mode"] == "blend"}
    assert blends and all(loaded.specs[m].mean_power == p for m, p in blends.items())
    w = _workloads(60, seed=21)
    before, after = model.predict_matrix(w), loaded.predict_matrix(w)
    for metric in before:
        np.testing.assert_allclose(after[metric][0], before[metric][0], rtol=1e-12)
        np.testing.assert_allclose(after[metric][2], before[metric][2], rtol=1e-12)
    # the file decodes as saved; a blend's power outside (0, 1), or ratio members it does not have, is refused
    m = next(iter(blends))
    assert decode_model("synth", "v1", doc, blobs, {}).specs[m].ratio_members == loaded.specs[m].ratio_members
    for key, bad, what in [("mean_power", 1.0, "power"), ("mean_power", 0.0, "power"),
                           ("mean_power", float("nan"), "power"), ("ratio_members", 99, "ratio members")]:
        broken = json.loads(json.dumps(doc))
        broken["metrics"][m][key] = bad
        with pytest.raises(CorruptModel, match=what):
            decode_model("synth", "v1", broken, blobs, {})


def test_a_blend_refits_on_its_own_share_of_the_mean(device, blended):
    """The out-of-fold report refits a blend's members on the percentile over the mean to its power."""
    model, _ = blended
    names = [*METRICS, *PERCENTILE_METRICS]
    w, ys, _ = median_by_workload(workload_matrix(device), {m: device[m].to_numpy(float) for m in names})
    again = refit(model, w, ys)
    probe = w[:30]
    a, b = model.predict_matrix(probe), again.predict_matrix(probe)
    for m in GUARDED:
        assert again.specs[m].mode == model.specs[m].mode
        assert again.specs[m].mean_power == model.specs[m].mean_power
        # the same configuration on the same workloads: the same answers
        np.testing.assert_allclose(b[m][0], a[m][0], rtol=1e-6)
