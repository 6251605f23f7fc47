"""The report's per-mix panels for a sweep that measured each mix at a depth or two (issue 25 item 10).

A sampled plan (``quick``: 48 mixes) drew one legend entry per mix, clipped and unreadable.
Such a sweep now draws the model's curves of the canonical mixes with the measured points
beside them; a grid sweep (fio-plot) keeps its measured lines.  The figures are checked by
content (lines, points, legend), not pixels, on real fio-plot results.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from modeling.reporting import build_report
from modeling.reporting.canonical import (
    CANONICAL_MIXES,
    canonical_figure,
    depth_grid,
    mix_label,
    needs_canonical,
    nearest_mix,
)
from modeling.reporting.figures import sweep_series
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from modeling.workload import KIB
from tests.conftest import FIO_PLOT, data_path
from tests.service.utils import ingest_fio, quick_train

INTEL = FIO_PLOT / "HPDL380G8" / "HBA" / "INTEL_D3_S4610"
# one queue depth per (mix, numjobs): a sampled plan's shape, from a real SSD's fio results
SAMPLED = {1: 1, 2: 4, 4: 16, 8: 64, 16: 2, 32: 8, 64: 32}


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> DataDir:
    datadir = DataDir(tmp_path_factory.mktemp("sampled"))
    files = [data_path(INTEL) / f"{rw}-{qd}-{nj}.json" for rw in ("randread", "randwrite")
             for nj, qd in SAMPLED.items()]
    ingest_fio(datadir, "sampled", files)
    quick_train(datadir, "sampled")
    return datadir


def test_a_sampled_sweep_draws_canonical_curves_and_a_grid_sweep_its_lines(sampled: DataDir) -> None:
    series = sweep_series(sampled.catalog.measurements("sampled"))
    assert needs_canonical({"sampled": series})
    assert not needs_canonical({"grid": _grid_frame()})
    # a grid of too many mixes is no more readable: 17 mixes at seven depths each
    many = pd.concat([_grid_frame().assign(series=f"mix {i}") for i in range(17)])
    assert needs_canonical({"many": many})


def _grid_frame() -> pd.DataFrame:
    """Two mixes at seven depths each: what fio-plot sweeps."""
    rows = [{"request_size": 4 * KIB, "read_size": 4 * KIB, "write_size": 4 * KIB, "write_ratio": wr,
             "randomness": 1.0, "numjobs": 1, "queue_depth": qd, "iops": 1.0, "latency_mean_us": 1.0,
             "latency_p99_us": 1.0, "bandwidth_mib_s": 1.0, "series": f"mix {wr}"}
            for wr in (0.0, 1.0) for qd in (1, 2, 4, 8, 16, 32, 64)]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("metric", ["iops", "latency_p99_us"])
def test_the_curves_are_the_models_predictions_and_the_points_the_measurements(
    sampled: DataDir, metric: str
) -> None:
    series = sweep_series(sampled.catalog.measurements("sampled"))
    model = ModelRegistry(sampled).load("sampled")
    fig = canonical_figure({"sampled": series}, {"sampled": model}, metric)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == [f"numjobs {nj}" for nj in sorted(SAMPLED)]
    depths = depth_grid(series)
    assert depths.tolist() == [1, 2, 4, 8, 16, 32, 64]
    # the sweep measured 4 KiB only: the 128 KiB and 1 MiB curves would be extrapolations, left out
    drawn = [0, 1]
    for ax, nj in zip(axes, sorted(SAMPLED), strict=True):
        lines = [line for line in ax.get_lines() if (line.get_gid() or "").startswith("predicted")]
        assert [line.get_gid() for line in lines] == [f"predicted {i}" for i in drawn]
        for i, line in zip(drawn, lines, strict=True):
            grid = pd.DataFrame({**{k: np.full(len(depths), v) for k, v in CANONICAL_MIXES[i].items()},
                                 "queue_depth": depths, "numjobs": np.full(len(depths), float(nj))})
            expected = model.predict_frame(grid, [metric])[f"pred_{metric}"].to_numpy()
            np.testing.assert_allclose(line.get_ydata(), expected)
        # every measured point of the panel is drawn once, near its mix (both are 4k random)
        near = next(c for c in ax.collections if c.get_gid() == "measured near")
        other = next(c for c in ax.collections if c.get_gid() == "measured other")
        measured = series[series["numjobs"] == nj]
        assert len(other.get_offsets()) == 0
        np.testing.assert_allclose(sorted(map(tuple, near.get_offsets())),
                                   sorted(zip(measured["queue_depth"], measured[metric], strict=True)))


def test_the_legend_is_short_and_inside_the_figure(sampled: DataDir) -> None:
    series = sweep_series(sampled.catalog.measurements("sampled"))
    model = ModelRegistry(sampled).load("sampled")
    fig = canonical_figure({"sampled": series}, {"sampled": model}, "iops")
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["4k randread (model)", "4k randwrite (model)", "measured, near a mix",
                      "measured, other mixes"]
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    box = legend.get_window_extent(canvas.get_renderer())
    width, height = fig.bbox.width, fig.bbox.height
    assert box.x0 >= 0 and box.x1 <= width and box.y0 >= 0 and box.y1 <= height, (box, width, height)
    # above every panel, not over one
    assert all(box.y0 >= ax.get_window_extent().y1 for ax in fig.axes if ax.get_visible())


def test_nearness_picks_the_closest_canonical_mix_within_the_tolerances() -> None:
    points = pd.DataFrame({
        "write_ratio": [0.0, 0.9, 0.0, 0.5, 0.0],
        "randomness": [1.0, 0.8, 0.1, 0.5, 0.0],
        "request_size": [8 * KIB, 4 * KIB, 256 * KIB, 4 * KIB, 512 * KIB],
    })
    assert nearest_mix(points).tolist() == [0, 1, 2, -1, 3]
    assert [mix_label(m) for m in CANONICAL_MIXES] == ["4k randread", "4k randwrite", "128k read", "1m read"]


def test_the_report_of_a_sampled_sweep_says_what_it_draws(sampled: DataDir) -> None:
    html = build_report(sampled, "sampled")
    assert "IOPS and latency vs queue depth: canonical mixes" in html
    assert "measured 2 mixes, at a median of 1 queue depth per mix and numjobs" in html
    assert html.count('alt="IOPS vs queue depth, canonical mixes"') == 1
