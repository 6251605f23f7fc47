"""Registry: safe round trips, refusal of tampered and foreign files, rollback, no pickle."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from modeling.errors import CorruptModel, NoModel, NotFound, UnknownDevice
from modeling.estimators.families import ESTIMATORS
from modeling.training.fit import fit_device_model
from modeling.serving.registry import ModelRegistry, save_model
from modeling.store import DataDir
from tests.modeling.conftest import fast_candidates, synthetic_rows
from tests.modeling.test_physics import SMALL_GRID

MODELING = Path(__file__).resolve().parents[2] / "modeling"


def _folder(datadir: DataDir, device: str, version: str) -> Path:
    return datadir.models_dir / device / version


def test_round_trip_gives_identical_predictions(datadir, device_with_data, synthetic):
    model, summary = fit_device_model(
        synthetic, device="synth", version="v1", folds=3, candidates=fast_candidates()
    )
    save_model(datadir, model, {"note": "test", **{"n_rows": summary["n_rows"]}}, activate=True)
    loaded = ModelRegistry(datadir).load("synth")
    assert loaded.version == "v1"
    queries = synthetic_rows(noise=0.0, seed=5).drop(columns=["iops"])
    before = model.predict_frame(queries)
    after = loaded.predict_frame(queries)
    assert before.equals(after)
    kinds = {s.estimator.kind for spec in loaded.specs.values() for s in spec.scopes.values() if s.estimator}
    assert kinds  # at least one real estimator came back


def test_cache_returns_same_object_and_activate_rolls_back(datadir, trained):
    from modeling.training.train import train_device

    registry = ModelRegistry(datadir, refresh_s=0.0)
    first = registry.load("synth")
    assert registry.load("synth") is first
    second = train_device(datadir, "synth", folds=3, candidates=fast_candidates())
    assert registry.load("synth").version == second.version
    registry.activate("synth", trained)
    assert registry.load("synth").version == trained
    assert [v.version for v in registry.versions("synth")] == [trained, second.version]
    with pytest.raises(NotFound):
        registry.activate("synth", "v-nope")


def test_errors_unknown_device_and_no_model(datadir, device_with_data):
    registry = ModelRegistry(datadir)
    with pytest.raises(UnknownDevice):
        registry.load("ghost")
    with pytest.raises(NoModel, match="ssdpredict train"):
        registry.load("synth")


def test_tampered_model_file_is_refused(datadir, trained):
    folder = _folder(datadir, "synth", trained)
    target = folder / "models.json"
    doc = json.loads(target.read_text())
    metric = next(iter(doc["metrics"]))
    doc["metrics"][metric]["scopes"]["global"]["q"] = 0.0001  # a subtle, valid-looking change
    target.write_text(json.dumps(doc))
    with pytest.raises(CorruptModel, match="checksum"):
        ModelRegistry(datadir).load("synth")


def test_tampered_xgboost_blob_is_refused(datadir, device_with_data):
    from modeling.training.selection import make_candidate
    from modeling.training.train import train_device

    only_xgb = [make_candidate("extended", "xgboost", n_estimators=20, max_depth=3)]
    version = train_device(datadir, "synth", folds=3, candidates=only_xgb).version
    blobs = list(_folder(datadir, "synth", version).glob("*.ubj"))
    assert blobs
    data = bytearray(blobs[0].read_bytes())
    data[len(data) // 2] ^= 0xFF
    blobs[0].write_bytes(bytes(data))
    with pytest.raises(CorruptModel):
        ModelRegistry(datadir).load("synth")


def test_rewritten_manifest_is_refused(datadir, trained):
    """Changing a file and its checksum in manifest.json still differs from the catalog's copy."""
    folder = _folder(datadir, "synth", trained)
    (folder / "models.json").write_text("{}")
    manifest = json.loads((folder / "manifest.json").read_text())
    import hashlib

    manifest["files"]["models.json"] = hashlib.sha256(b"{}").hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CorruptModel, match="catalog"):
        ModelRegistry(datadir).load("synth")


def _forge(datadir: DataDir, version: str, content: bytes, *, keep_other_files: bool = False) -> None:
    """Put a foreign models.json in place, re-signed in the manifest and the catalog entry."""
    import hashlib

    folder = _folder(datadir, "synth", version)
    (folder / "models.json").write_bytes(content)
    manifest = json.loads((folder / "manifest.json").read_text())
    digest = hashlib.sha256(content).hexdigest()
    others = manifest["files"] if keep_other_files else {}
    manifest["files"] = {**others, "models.json": digest}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with datadir.catalog.connect() as conn:
        conn.execute("UPDATE models SET manifest = ? WHERE version = ?", (json.dumps(manifest), version))


def test_foreign_json_is_refused(datadir, trained):
    _forge(
        datadir,
        trained,
        json.dumps(
            {
                "metrics": {
                    "iops": {"mode": "direct", "auto_regions": [], "scopes": {"global": {"weights": [1, 2]}}}
                },
                "data_regions": [],
            }
        ).encode(),
    )
    with pytest.raises(CorruptModel):
        ModelRegistry(datadir).load("synth")


def test_pickle_file_is_refused_without_unpickling(datadir, trained, monkeypatch):
    def boom(*a, **k):  # pragma: no cover - must never run
        raise AssertionError("pickle was called")

    monkeypatch.setattr(pickle, "loads", boom)
    monkeypatch.setattr(pickle, "load", boom)
    _forge(datadir, trained, pickle.dumps({"metrics": {}}))
    with pytest.raises(CorruptModel, match="not JSON"):
        ModelRegistry(datadir).load("synth")


def test_foreign_folder_without_format_tag_is_refused(datadir, trained):
    folder = _folder(datadir, "synth", trained)
    (folder / "manifest.json").write_text(json.dumps({"hello": "world"}))
    with pytest.raises(CorruptModel, match="format"):
        ModelRegistry(datadir).load("synth")


def test_no_pickle_in_code_or_files(datadir, trained):
    for path in MODELING.rglob("*.py"):
        text = path.read_text()
        assert "import pickle" not in text and "joblib" not in text and "cloudpickle" not in text, path
    for path in _folder(datadir, "synth", trained).iterdir():
        assert not path.read_bytes().startswith(b"\x80"), f"{path} looks like a pickle"
        assert path.suffix in (".json", ".ubj")


def test_manifest_records_provenance(datadir, trained):
    mv = datadir.catalog.get_model_version("synth", trained)
    man = mv.manifest
    assert man["device"] == "synth" and man["version"] == trained
    assert set(man["metrics"]) == {"latency_mean_us", "latency_p99_us", "bandwidth_mib_s", "iops"}
    g = man["metrics"]["iops"]["global"]
    assert g["estimator"] in ESTIMATORS and isinstance(g["params"], dict)
    assert len(man["data"]["sha256"]) == 64 and man["data"]["sweep_ids"] == [1]
    assert man["data"]["fio_versions"] == ["fio-3.33"]
    assert all(0 <= v < 1 for v in man["cv_mre"].values())
    assert man["created_at"] and man["files"]
    assert np.isfinite(man["train_seconds"])


def test_concurrent_loads_share_one_model(datadir, trained):
    from concurrent.futures import ThreadPoolExecutor

    from modeling.workload import Workload

    registry = ModelRegistry(datadir)
    wl = Workload(write_ratio=0.3, queue_depth=8, request_size="16k", randomness=1)
    with ThreadPoolExecutor(8) as pool:
        models = list(pool.map(lambda _: registry.load("synth"), range(32)))
        values = list(pool.map(lambda m: m.predict_one(wl).predictions["iops"].value, models))
    assert all(m is models[0] for m in models)
    assert len(set(values)) == 1


@pytest.mark.parametrize(
    "candidate",
    [
        ("extended", "gp", {"nu": 1.5, "n_restarts": 0}),
        ("extended", "load_gated", {"n_col": 5, "qd_col": 1, "nj_col": 4, "n_estimators": 30}),
        ("basic", "load_gated", {"n_col": 1, "qd_col": 1, "nj_col": -1, "n_estimators": 30}),
        ("extended", "extra_trees", {"n_estimators": 8, "min_samples_leaf": 3, "loss": "relative"}),
    ],
    ids=lambda c: f"{c[1]}[{c[0]}]",
)
def test_every_estimator_kind_round_trips(datadir, device_with_data, candidate):
    """Gaussian processes and composite models come back from JSON/UBJ predicting the same."""
    from modeling.training.selection import make_candidate

    fs, kind, params = candidate
    # a round trip needs a fitted model, not a tuned one: the 72-row grid and two folds
    # (128 rows and three folds took twice as long: 1.5 s for load_gated on a quiet machine)
    model, _ = fit_device_model(
        synthetic_rows(grid=SMALL_GRID),
        device="synth",
        version="v1",
        folds=2,
        candidates=[make_candidate(fs, kind, **params)],
        regions=False,
    )
    save_model(datadir, model, {"note": "test"}, activate=True)
    assert all(f.suffix in (".json", ".ubj") for f in _folder(datadir, "synth", "v1").iterdir())
    loaded = ModelRegistry(datadir).load("synth")
    assert loaded.specs["iops"].scopes["global"].estimator.kind == kind
    queries = synthetic_rows(noise=0.0, seed=9).drop(columns=["iops"])
    after, before = loaded.predict_frame(queries), model.predict_frame(queries)
    numeric = before.select_dtypes("number").columns
    # the same arrays, but BLAS may sum a reloaded (differently aligned) matrix in another order
    np.testing.assert_allclose(after[numeric], before[numeric], rtol=1e-9)
    assert after.drop(columns=numeric).equals(before.drop(columns=numeric))


@pytest.mark.slow
def test_composite_model_with_a_missing_part_is_refused(datadir, device_with_data):
    """A load-gated model whose gate was cut out (checksums re-forged) fails validation."""
    from modeling.training.selection import make_candidate
    from modeling.training.train import train_device

    gated = [make_candidate("extended", "load_gated", n_col=5, qd_col=1, nj_col=4, n_estimators=20)]
    version = train_device(datadir, "synth", folds=3, candidates=gated, regions=False).version
    doc = json.loads((_folder(datadir, "synth", version) / "models.json").read_text())
    member = doc["metrics"]["iops"]["scopes"]["global"]["members"][0]["estimator"]
    del member["parts"]["gate"]
    _forge(datadir, version, json.dumps(doc).encode(), keep_other_files=True)
    with pytest.raises(CorruptModel, match="parts"):
        ModelRegistry(datadir).load("synth")


def test_gp_with_inconsistent_arrays_is_refused(datadir, device_with_data):
    from modeling.training.selection import make_candidate
    from modeling.training.train import train_device

    only_gp = [make_candidate("extended", "gp", n_restarts=0)]
    version = train_device(datadir, "synth", folds=3, candidates=only_gp, regions=False).version
    doc = json.loads((_folder(datadir, "synth", version) / "models.json").read_text())
    gp = doc["metrics"]["iops"]["scopes"]["global"]["members"][0]["estimator"]["gp"]
    gp["alpha"] = gp["alpha"][:-1]  # one dual coefficient short of the training rows
    _forge(datadir, version, json.dumps(doc).encode(), keep_other_files=True)
    with pytest.raises(CorruptModel, match="Gaussian process"):
        ModelRegistry(datadir).load("synth")
