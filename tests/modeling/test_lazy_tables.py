"""A served model builds each scope's lookup tables on its first prediction, not when loaded:
the same tables, so exactly the answers of a model whose tables were all built at load (a
server's registry builds them so)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from modeling.serving.device_model import DeviceModel
from modeling.serving.metric_models import ScopeModel
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from modeling.workload import REGION_NAMES, WORKLOAD_FIELDS, Workload
from modeling.workload_matrix import workload_matrix
from tests.modeling.conftest import synthetic_rows


def scopes(model: DeviceModel) -> list[ScopeModel]:
    return [sm for spec in model.specs.values() for sm in spec.scopes.values() if sm.members]


def test_tables_are_built_on_first_use_and_answer_as_if_built_at_load(datadir: DataDir, trained: str) -> None:
    lazy = ModelRegistry(datadir).load("synth")
    assert lazy.version == trained
    assert not any(sm.runners for sm in scopes(lazy))  # loading built none

    # one mix's curve (what a capacity question asks): only the scopes it reads are built
    rows = synthetic_rows()
    lazy.predict(workload_matrix(rows[rows["write_ratio"] == 0.3]), ("iops", "latency_p99_us"))
    built = [sm for sm in scopes(lazy) if sm.runners]
    assert 0 < len(built) < len(scopes(lazy))

    full = ModelRegistry(datadir, build_tables=True).load("synth")  # a server's: every table at load
    assert all(sm.runners for sm in scopes(full))
    # the measured workloads and as many between them (write ratios, sizes and loads off the grid)
    rng = np.random.default_rng(7)
    n = len(rows)
    size = rng.integers(1, 80, n) * 1024
    between = rows.assign(write_ratio=rng.uniform(0, 1, n), queue_depth=rng.integers(1, 100, n),
                          request_size=size, read_size=size, write_size=size)
    w = workload_matrix(pd.concat([rows, between]))
    one = Workload(**dict(zip(WORKLOAD_FIELDS, w[3].tolist(), strict=True)))
    for model in ("auto", "global", *(r for r in REGION_NAMES if r in full.specs["iops"].scopes)):
        # the matrix path, then the single-row path
        for got, want in ((lazy.predict(w, model=model), full.predict(w, model=model)),
                          (lazy.predict(one, model=model), full.predict(one, model=model))):
            assert set(got.columns) == set(want.columns) == set(full.metrics)
            for metric, arrays in want.columns.items():
                for a, b in zip(got.columns[metric], arrays, strict=True):
                    np.testing.assert_array_equal(a, b)  # bit for bit, bounds and flags too
    assert all(sm.runners for sm in scopes(lazy))  # every scope model asked: every table built
