"""The pickle-free export of every estimator family round-trips on the installed scikit-learn.

``modeling/estimators/serialize.py`` rebuilds scikit-learn trees through the private
``Tree.__setstate__``, whose node layout scikit-learn may change in any release; so
``pyproject.toml`` bounds scikit-learn to the tested range, and this test fails first
when an installed version breaks the rebuild.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest
import sklearn
from packaging.requirements import Requirement

from modeling.estimators.families import ESTIMATORS, make_estimator
from modeling.estimators.serialize import export_estimator, import_estimator

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _sklearn_requirement() -> Requirement:
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (req,) = [Requirement(d) for d in deps if Requirement(d).name == "scikit-learn"]
    return req


def test_scikit_learn_is_bounded_and_the_installed_version_is_inside() -> None:
    req = _sklearn_requirement()
    assert any(s.operator in ("<", "<=") for s in req.specifier), "scikit-learn needs an upper bound"
    assert req.specifier.contains(sklearn.__version__), (sklearn.__version__, str(req.specifier))


@pytest.mark.parametrize("kind", sorted(ESTIMATORS))
def test_export_import_gives_identical_predictions(kind: str) -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 1.0, size=(60, 4))
    y = np.exp(2.0 * X[:, 0] + X[:, 1] * X[:, 2]) + 0.1 * rng.standard_normal(60)
    params = {"n_estimators": 8} if kind in ("extra_trees", "xgboost") else {}
    est = make_estimator(kind, params).fit(X, y)
    spec, blobs = export_estimator(est)
    back = import_estimator(spec, blobs)
    queries = rng.uniform(-0.2, 1.2, size=(200, 4))  # inside and outside the training box
    if kind in ("cart", "extra_trees", "xgboost"):
        assert np.array_equal(est.predict(queries), back.predict(queries))
    else:  # a Gaussian process's arrays go through JSON floats: equal to rounding
        np.testing.assert_allclose(back.predict(queries), est.predict(queries), rtol=1e-9)
