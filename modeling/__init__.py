"""Modeling: the shared workload type, the data directory, and per-device regression models.

* :mod:`modeling.workload` -- the one workload type, metric and region names.
* :mod:`modeling.features` -- ``basic`` and ``extended`` feature sets.
* :mod:`modeling.estimators` -- CART, extra-trees and XGBoost regressors (scikit-learn API).
* :mod:`modeling.selection` / :mod:`modeling.fit` -- model choice by grouped CV in a time
  budget, physics (bandwidth law, Little's law, tail/mean ratio), region models, intervals.
* :mod:`modeling.device_model` -- :class:`DeviceModel`, fast single and batch prediction.
* :mod:`modeling.compiled` -- lookup-table compilation of tree models.
* :mod:`modeling.registry` / :mod:`modeling.serialize` -- versioned, validated, pickle-free storage.
* :mod:`modeling.train`, :mod:`modeling.evaluate`, :mod:`modeling.predict`,
  :mod:`modeling.batch`, :mod:`modeling.adaptive` -- the operations the CLI and API call.
"""
