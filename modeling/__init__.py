"""Modeling: the shared workload type, the data directory, and per-device regression models.

Core, importable by every package (imports nothing else of ``modeling``'s rooms):

* :mod:`modeling.workload` -- the one workload type, its limits table, metric and region names.
* :mod:`modeling.workload_matrix` -- workloads as a vectorised ``(n, 9)`` matrix.
* :mod:`modeling.features` -- ``basic`` and ``extended`` feature sets.
* :mod:`modeling.errors` -- domain errors; :mod:`modeling.store` -- the data directory.

Rooms (each imports the core; serving imports estimators; training imports both):

* :mod:`modeling.estimators` -- scikit-learn regressors (CART, extra-trees, XGBoost, Gaussian
  process, load-gated), their fast paths and their pickle-free serialisation.
* :mod:`modeling.serving` -- :class:`~modeling.serving.device_model.DeviceModel`, the model
  registry, and the predict operations the CLI and API call.
* :mod:`modeling.training` -- model selection, fitting, train, evaluate, adaptive sampling.
"""
