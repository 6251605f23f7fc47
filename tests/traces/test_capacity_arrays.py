"""The capacity path's arrays give exactly what the frame forms give, on a trained device with
open-loop points (a real CART model): the model's curves through ``predict_arrays`` and through
``predict_frame``, the open-loop correction through ``factors_of`` and through ``factors``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from tests.service.utils import quick_train
from tests.traces.conftest import synthetic_rows
from tests.traces.test_capacity_fleet import open_loop_points
from traces.capacity.device import curves_of, device_capacity, mix_table, parse_mix, with_ceilings
from traces.capacity.device import source_and_ceilings
from traces.capacity.search import search_capacity
from traces.capacity.slo import parse_slo
from traces.predict.openloop import closed_loop_curves

MIXES = mix_table([parse_mix(m) for m in (
    "write_ratio=0.5,request_size=4k,randomness=1",  # where the open-loop points were measured
    "write_ratio=0.3,request_size=16k,randomness=1",  # between swept ratios and sizes: two blends
    "write_ratio=1,request_size=64k,randomness=0",
)])
SLOS = ("p99<=1ms,mean<=500us", "p99<=300us", "mean<=80us", "p99<=10s")
DEVICE = "slow"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Device ``slow`` (2x the synthetic device) with Poisson open-loop points at one mix, trained."""
    d = DataDir(tmp_path_factory.mktemp("arrays-home"))
    d.catalog.ensure_device(DEVICE)
    d.catalog.add_measurements(DEVICE, synthetic_rows(2.0) + open_loop_points(2.0))
    quick_train(d, DEVICE)
    return d.root


class FrameOnly:
    """The device model seen through ``predict_frame`` alone (the form a test's fake device has)."""

    def __init__(self, model: object) -> None:
        self._model = model

    def predict_frame(
        self, df: pd.DataFrame, metrics: Sequence[str] | None = None, model: str = "auto"
    ) -> pd.DataFrame:
        return self._model.predict_frame(df, metrics, model)  # type: ignore[attr-defined, no-any-return]


def test_the_curves_from_arrays_equal_the_frame_path(home: Path) -> None:
    d = DataDir(home)
    model = ModelRegistry(d).load(DEVICE)
    source, _ = source_and_ceilings(d, DEVICE, model)
    args = (source.loads, source.write_ratios, source.sizes)
    arrays = closed_loop_curves(model, MIXES, *args)
    frames = closed_loop_curves(FrameOnly(model), MIXES, *args)
    for got, want in ((arrays.iops, frames.iops), (arrays.p99_s, frames.p99_s)):
        assert got.keys() == want.keys() == {"value", "lower", "upper"}
        for b in got:
            np.testing.assert_array_equal(got[b], want[b])
    np.testing.assert_array_equal(arrays.extrapolated, frames.extrapolated)
    np.testing.assert_array_equal(arrays.outstanding, frames.outstanding)


def test_latency_through_factors_of_equals_the_frame_correction(home: Path) -> None:
    d = DataDir(home)
    mc, _ = curves_of(d, DEVICE, MIXES)
    correction = mc.source.correction
    assert correction is not None
    for i in range(len(MIXES)):
        for bound in ("value", "lower", "upper"):
            rates = np.concatenate([np.geomspace(1e-3, 0.999, 9), [1.2]]) * mc.capacity(i, bound)
            at = mc.latency(i, rates, bound)
            # the frame form, as trace predict calls it: windows and predictions as tables
            own, value = mc._raw(i, rates, bound), mc._raw(i, rates, "value")
            live = np.isfinite(value["mean"])
            windows = pd.DataFrame({k: MIXES.at[i, k] for k in ("write_ratio", "request_size", "randomness")},
                                   index=range(int(live.sum()))).assign(iops=rates[live])
            pred = pd.DataFrame({"pred_latency_mean_us": value["mean"][live] * 1e6,
                                 "pred_latency_p99_us": value["p99"][live] * 1e6,
                                 "pred_service_us": value["service"][live] * 1e6,
                                 "pred_service_p99_us": value["service_p99"][live] * 1e6,
                                 "saturated": False})
            mean_f, p99_f = correction.factors(windows, pred)
            assert not np.all(mean_f == 1.0)  # the correction does something here
            mean, p99 = own["mean"] * 1e6, own["p99"] * 1e6
            mean[live] *= mean_f
            p99[live] *= p99_f
            np.testing.assert_array_equal(at.mean_us, mean)
            np.testing.assert_array_equal(at.p99_us, p99)
            assert np.isinf(at.mean_us[-1])  # beyond capacity


def test_capacity_answers_from_arrays_equal_the_frame_path(home: Path) -> None:
    d = DataDir(home)
    model = ModelRegistry(d).load(DEVICE)
    source, measured = source_and_ceilings(d, DEVICE, model)
    frames = with_ceilings(FrameOnly(model), MIXES, source, measured)
    for text in SLOS:
        slo = parse_slo(text)
        answers = device_capacity(d, DEVICE, MIXES, slo, suggest=False).answers
        want = [search_capacity(frames, i, slo).to_dict() for i in range(len(MIXES))]
        assert [a.to_dict() for a in answers] == want
