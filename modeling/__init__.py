"""Modeling: the shared workload type, the data directory, and per-device regression models.

* :mod:`modeling.workload` -- the one workload type, metric and region names.
* :mod:`modeling.features` -- ``basic`` and ``extended`` feature sets.
* :mod:`modeling.estimators.families` -- CART, extra-trees and XGBoost regressors (scikit-learn API).
* :mod:`modeling.training.selection` / :mod:`modeling.training.fit` -- model choice by grouped CV in a time
  budget, physics (bandwidth law, Little's law, tail/mean ratio), region models, intervals.
* :mod:`modeling.serving.device_model` -- :class:`DeviceModel`, fast single and batch prediction.
* :mod:`modeling.estimators.compiled` -- lookup-table compilation of tree models.
* :mod:`modeling.serving.registry` / :mod:`modeling.estimators.serialize` -- versioned, validated, pickle-free storage.
* :mod:`modeling.training.train`, :mod:`modeling.training.evaluate`, :mod:`modeling.serving.predict`,
  :mod:`modeling.serving.batch`, :mod:`modeling.training.adaptive` -- the operations the CLI and API call.
"""
