"""The notebooks run top to bottom on real fio-plot data and draw their plots."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import nbformat
import pytest

from collectors.ingest import ingest_paths
from collectors.plans.presets import grid_plan
from collectors.sweep.run import run_sweep
from collectors.sweep.settings import SweepSettings
from modeling.store import DataDir
from tests.conftest import FIO_PLOT, REPO

pytestmark = pytest.mark.slow  # run by `make test-slow` (and CI), not by `make test`

NOTEBOOKS = REPO / "notebooks"
SMALL_DEVICE = FIO_PLOT / "HPDL380G8" / "RAID" / "NEW" / "P420i_SAMSUNG860_RW"


def _build_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("notebooks_build", NOTEBOOKS / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _kernel_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSDPREDICT_")}
    env.pop("MPLBACKEND", None)  # a non-interactive backend would swallow the images
    env.update({"SSDPREDICT_HOME": str(home), **extra})
    return env


def _execute(name: str, env: dict[str, str]) -> nbformat.NotebookNode:
    # raises CellExecutionError naming the failing cell
    return _build_module().execute(name, env, timeout_s=300)


def _outputs(nb: nbformat.NotebookNode) -> list[dict]:
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs]


def _images(nb: nbformat.NotebookNode) -> int:
    return sum("image/png" in out.get("data", {}) for out in _outputs(nb))


def _text(nb: nbformat.NotebookNode) -> str:
    return "".join(out.get("text", "") for out in _outputs(nb))


def test_committed_notebooks_match_their_sources_and_show_their_outputs() -> None:
    build = _build_module()
    for name in build.NOTEBOOKS:
        committed = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        assert build.cells_of(committed) == build.cells_of(build.build_notebook(name)), (
            f"{name}.ipynb is stale: run python notebooks/build.py --execute"
        )
        code = [c for c in committed.cells if c.cell_type == "code"]
        assert all(c.execution_count is not None for c in code), f"{name}.ipynb is committed unexecuted"
        assert _images(committed) >= 1, name
        assert str(REPO) not in _text(committed)  # no local path of whoever ran it
    assert build.main(["--check"]) == 0


def test_split_cells_reads_percent_format() -> None:
    source = "# header\n# %% [markdown]\n# # Title\n#\n# text\n# %%\nx = 1\n\n# %%\n"
    cells = _build_module().split_cells(source)
    assert cells == [("markdown", "# Title\n\ntext"), ("code", "x = 1")]


def test_sweep_analysis_plots_an_existing_device(datadir: DataDir, home: Path) -> None:
    ingest_paths(datadir, "intel-s4610", [FIO_PLOT / "HPDL380G8" / "HBA" / "INTEL_D3_S4610"])
    nb = _execute("sweep_analysis", _kernel_env(home, SSDPREDICT_DEVICE="intel-s4610"))
    # IOPS, Little's law, tail and write-ratio figures (the data has reads and writes, no repeats)
    assert _images(nb) >= 4
    text = _text(nb)
    assert "device intel-s4610:" in text
    assert "no repeated workloads" in text
    assert [d.name for d in datadir.catalog.list_devices()] == ["intel-s4610"]  # nothing imported


@pytest.mark.fio
def test_sweep_analysis_shows_repeat_noise_of_a_real_sweep(
    fio_available: str, datadir: DataDir, home: Path, tmp_path: Path
) -> None:
    plan = grid_plan({"write_ratios": [0, 1], "queue_depths": [1, 4], "sizes": [4096], "randomness": [1.0]})
    settings = SweepSettings(target=str(tmp_path / "scratch.img"), runtime="500ms", size="16MiB", repeats=2)
    run_sweep(datadir, "scratch", plan, settings)
    nb = _execute("sweep_analysis", _kernel_env(home, SSDPREDICT_DEVICE="scratch"))
    assert "repeated workloads; mean CV:" in _text(nb)
    assert _images(nb) >= 5  # the four analysis figures and the repeat-noise one


def test_model_accuracy_imports_fio_results_trains_and_plots(tmp_path: Path) -> None:
    # the smallest fio-plot device (49 points, one region) and 2 folds keep this test short
    home = tmp_path / "nb-home"
    env = _kernel_env(home, SSDPREDICT_NB_FIO_DIR=str(SMALL_DEVICE), SSDPREDICT_NB_FOLDS="2",
                      SSDPREDICT_NB_TIME_BUDGET_S="1")
    nb = _execute("model_accuracy", env)
    assert _images(nb) >= 1
    assert "out-of-fold MRE:" in _text(nb)
    catalog = DataDir(home).catalog  # the notebook used the data directory it was given
    assert catalog.measurements(SMALL_DEVICE.name).shape[0] > 0
    assert len(catalog.list_model_versions(SMALL_DEVICE.name)) == 1
    assert catalog.active_model_version(SMALL_DEVICE.name) is None  # the notebook does not activate
