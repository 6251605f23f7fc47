"""The device report: summary table, out-of-fold predictions and the HTML page, on real fio-plot data."""

from __future__ import annotations

import copy

import base64
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from collectors.ingest import ingest_paths
from modeling.errors import InvalidInput, NoData, UnknownDevice
from modeling.serving.registry import ModelRegistry
from modeling.reporting import build_report, summary_table
from modeling.reporting.out_of_fold import out_of_fold, refit
from modeling.store import DataDir
from modeling.training.fit import training_rows
from modeling.workload import METRICS, WORKLOAD_FIELDS
from tests.conftest import FIO_PLOT, data_path
from tests.service.utils import ingest_fio, quick_train

INTEL = FIO_PLOT / "HPDL380G8" / "HBA" / "INTEL_D3_S4610"
PM883 = FIO_PLOT / "SERVER" / "IBM_M1015" / "SAMSUNG_PM883"
IMG = re.compile(r'<img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">')


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> DataDir:
    """Two fio-plot SSDs ingested through the real importer and trained with CART, shared read-only."""
    datadir = DataDir(tmp_path_factory.mktemp("fleet"))
    for name, folder in (("intel", INTEL), ("pm883", PM883)):
        ingest_paths(datadir, name, [data_path(folder)])
        quick_train(datadir, name)
    return datadir


@pytest.fixture(scope="module")
def intel_html(fleet: DataDir) -> str:
    """The report of the Intel SSD."""
    return build_report(fleet, "intel")


def _fio_iops(rw: str, qd: int, nj: int) -> float:
    """IOPS of one fio-plot result read straight from its JSON (files are <rw>-<iodepth>-<numjobs>.json)."""
    result = json.loads((INTEL / f"{rw}-{qd}-{nj}.json").read_text())
    side = "read" if rw == "randread" else "write"
    return float(sum(job[side]["iops"] for job in result["jobs"]))


def test_summary_is_measured_where_swept_and_flags_extrapolation(fleet: DataDir) -> None:
    measurements = fleet.catalog.measurements("intel")
    model = ModelRegistry(fleet).load("intel")
    cells = {(c.test, c.direction): c for c in summary_table(measurements, model)}
    assert len(cells) == 8
    # the fio-plot sweep is 4k random, QD 1-64 x numjobs 1-64: both RND4K tests were run
    for test, qd, nj in (("RND4K Q32T16", 32, 16), ("RND4K Q1T1", 1, 1)):
        for direction, rw in (("read", "randread"), ("write", "randwrite")):
            cell = cells[(test, direction)]
            assert cell.source == "measured" and not cell.extrapolated and cell.runs == 1
            assert cell.values["iops"] == pytest.approx(_fio_iops(rw, qd, nj), rel=1e-9)
            assert cell.mb_s == pytest.approx(cell.values["bandwidth_mib_s"] * 1.048576)
    # 1 MiB sequential was never swept: predicted, and outside the swept sizes and randomness
    for direction in ("read", "write"):
        cell = cells[("SEQ1M Q8T1", direction)]
        assert cell.source == "predicted" and cell.extrapolated
        assert cell.outside == ("request_size 1m (swept 4k)", "randomness 0 (swept 1)")
        assert set(METRICS) <= set(cell.values) and all(v > 0 for v in cell.values.values())
        assert cell.intervals is not None and cell.intervals["iops"][0] < cell.values["iops"]


def test_summary_without_a_model_leaves_unswept_tests_unavailable(datadir: DataDir) -> None:
    ingest_paths(datadir, "intel", [data_path(INTEL)])
    cells = summary_table(datadir.catalog.measurements("intel"), None)
    sources = {(c.test, c.source) for c in cells}
    assert sources == {
        ("SEQ1M Q8T1", "unavailable"),
        ("SEQ1M Q1T1", "unavailable"),
        ("RND4K Q32T16", "measured"),
        ("RND4K Q1T1", "measured"),
    }


def test_refit_on_the_training_data_reproduces_the_model(fleet: DataDir) -> None:
    model = ModelRegistry(fleet).load("intel")
    w, ys, _ = training_rows(fleet.catalog.measurements("intel"))
    again = refit(model, w, ys)
    got, want = again.predict_matrix(w), model.predict_matrix(w)
    for m in METRICS:
        np.testing.assert_allclose(got[m][0], want[m][0], rtol=1e-9)
        np.testing.assert_allclose(got[m][2], want[m][2], rtol=1e-9)


def test_out_of_fold_predictions_never_saw_their_workload(fleet: DataDir) -> None:
    measurements = fleet.catalog.measurements("intel")
    model = ModelRegistry(fleet).load("intel")
    oof = out_of_fold(measurements, model)
    assert oof.folds == 5 and len(oof.points) == len(measurements)
    # a CART tree with one sample per leaf repeats its training targets exactly, before the
    # load laws (served IOPS per I/O in flight never rises with depth) lower the few
    # measured points that break them
    raw = copy.copy(model)
    raw.limits = None
    in_sample = raw.predict_frame(oof.points[list(WORKLOAD_FIELDS)])
    np.testing.assert_allclose(in_sample["pred_iops"], oof.points["iops"], rtol=1e-6)
    served = model.predict_frame(oof.points[list(WORKLOAD_FIELDS)])["pred_iops"].to_numpy()
    lowered = ~np.isclose(served, oof.points["iops"], rtol=1e-6)
    assert lowered.mean() < 0.05 and (served[lowered] < oof.points["iops"].to_numpy()[lowered]).all()
    exact = np.isclose(oof.points["pred_iops"], oof.points["iops"], rtol=1e-6)
    assert exact.mean() < 0.2
    summary = oof.summary()
    assert 0 < summary["iops"]["mre"] < 0.5
    assert 0 <= summary["iops"]["coverage"] <= 1
    regions = oof.by_region()
    assert set(r for r, e in regions.items() if e is not None) == {"read-random-small", "write-random-small"}
    assert regions["read-random-small"]["n"] + regions["write-random-small"]["n"] == len(measurements)


def _images(html: str) -> list[Image.Image]:
    return [Image.open(io.BytesIO(base64.b64decode(data))) for data in IMG.findall(html)]


def test_report_is_one_self_contained_page(fleet: DataDir, intel_html: str) -> None:
    html = intel_html
    assert not re.search(r"(?i)(https?:|//[a-z0-9.-]+\.[a-z]{2,}/|<script|<link|@import|url\()", html)
    images = _images(html)
    # three measured surfaces, measured vs predicted, interval coverage
    assert len(images) == 5 == html.count("<img")
    for image in images:
        assert image.format == "PNG" and image.width >= 1000
        pixels = np.asarray(image.convert("L"))
        assert (pixels < 250).mean() > 0.03, "a plot is blank"
    for text in (
        "SEQ1M Q8T1",
        "SEQ1M Q1T1",
        "RND4K Q32T16",
        "RND4K Q1T1",
        "MB/s",
        "IOPS",
        "mean latency (us)",
    ):
        assert text in html
    assert "no repeats: noise floor unknown" in html
    assert ModelRegistry(fleet).load("intel").version in html
    assert html.count('class="measured"') == 12 and html.count('class="extrapolated"') == 12
    assert "SEQ1M Q8T1 read, SEQ1M Q8T1 write, SEQ1M Q1T1 read, SEQ1M Q1T1 write: extrapolated" in html
    # every region appears; the two the sweep never left are the only measured ones
    assert html.count("not measured</td>") == 6


@pytest.mark.slow
def test_report_compares_devices_side_by_side(fleet: DataDir) -> None:
    html = build_report(fleet, "intel", ["pm883"])
    assert "ssdpredict report: intel vs pm883" in html
    # one column group per device in the summary table; overlaid surfaces plus per-device plots
    assert re.findall(r'<th class="group" colspan="6">([^<]+)</th>', html) == ["intel", "pm883"]
    assert len(_images(html)) == 3 + 2 * 2
    assert html.count('class="measured"') == 2 * 12


def test_report_of_repeats_without_a_model(datadir: DataDir) -> None:
    files = sorted(data_path(INTEL).glob("*.json"))[:30]
    ingest_fio(datadir, "rep", files)
    ingest_fio(datadir, "rep", files)  # a second sweep of the same workloads: every point repeated
    html = build_report(datadir, "rep")
    assert "noise floor unknown" not in html
    assert "30 repeated workloads, 60 runs" in html
    # identical repeats: zero spread
    assert re.search(r"mean CV between repeats</td>(<td>0\.0 %</td>){4}", html)
    assert "no trained model" in html and "ssdpredict train --device rep" in html
    assert len(_images(html)) == 3  # the measured surfaces only
    # the 30 files are random reads only: the reads of the RND4K tests are measured, all else unknown
    assert html.count("not measured, no model") == 6


def test_report_refuses_unknown_duplicate_and_empty_devices(datadir: DataDir) -> None:
    ingest_fio(datadir, "intel", sorted(data_path(INTEL).glob("*.json"))[:10])
    with pytest.raises(UnknownDevice):
        build_report(datadir, "nope")
    with pytest.raises(InvalidInput, match="more than once"):
        build_report(datadir, "intel", ["intel"])
    datadir.catalog.ensure_device("empty")
    with pytest.raises(NoData, match="no measurements"):
        build_report(datadir, "empty")


CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,4000",
)
# matplotlib's first two line colours (tab10 C0 blue, C1 orange): only the plots draw them
PLOT_COLOURS = {"C0": (31, 119, 180), "C1": (255, 127, 14)}


def screenshot(chromium: str, page: Path, out: Path, profile: Path) -> np.ndarray:
    """Render ``page`` in headless Chromium and return the screenshot as an RGB array."""
    subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={out}", page.as_uri()],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return np.asarray(Image.open(out).convert("RGB")).astype(int)


def colour_share(shot: np.ndarray, rgb: tuple[int, int, int], tolerance: int = 12) -> float:
    """Share of the screenshot's pixels within ``tolerance`` of a colour."""
    return float((np.abs(shot - np.array(rgb)).max(axis=2) <= tolerance).mean())


@pytest.fixture
def chromium() -> str:
    """Debian's headless-capable Chromium, or a skip saying how to install it."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("chromium is not installed: `make test-browser` installs it (apt-get install chromium)")
    return path


@pytest.mark.slow
@pytest.mark.browser
def test_report_renders_with_its_plots_in_headless_chromium(
    chromium: str, intel_html: str, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    page.write_text(intel_html)
    shot = screenshot(chromium, page, tmp_path / "shot.png", tmp_path / "profile")
    assert shot.shape == (4000, 1280, 3)
    # the plots are drawn: their line colours cover a visible share of the page
    for name, rgb in PLOT_COLOURS.items():
        assert colour_share(shot, rgb) > 0.001, f"no {name} pixels: the plots did not render"
    # below the summary and model tables (top 900 px) most bands of the page hold plot pixels
    bands = [shot[y : y + 200] for y in range(900, 4000, 200)]
    inked = [float((band.min(axis=2) < 200).mean()) for band in bands]
    assert sum(share > 0.01 for share in inked) >= 0.8 * len(bands), inked

    # the negative control: the same page with its images removed has none of those colours
    bare = tmp_path / "bare.html"
    bare.write_text(IMG.sub("", intel_html))
    shot = screenshot(chromium, bare, tmp_path / "bare.png", tmp_path / "profile2")
    assert all(colour_share(shot, rgb) < 0.0001 for rgb in PLOT_COLOURS.values())
