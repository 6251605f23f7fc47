"""The data both notebooks analyse: an existing device, or real fio-plot results imported.

With ``SSDPREDICT_DEVICE`` set, that device of ``SSDPREDICT_HOME`` (default
``~/.local/share/ssdpredict``) is used and nothing is imported. Otherwise the fio JSON
results in ``SSDPREDICT_NB_FIO_DIR`` (default: the Intel D3-S4610 folder of
``tests/data/fio-plot`` in the repository) are imported, with the function ``ssdpredict ingest`` uses,
into ``SSDPREDICT_HOME`` or a new temporary data directory.  The variables are read
through the one settings class (:func:`service.config.get_settings`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import modeling
from collectors.ingest import ingest_paths
from modeling.store import DataDir
from service.config import Settings, get_settings

REPO = Path(modeling.__file__).resolve().parent.parent
DEFAULT_FIO_DIR = REPO / "tests" / "data" / "fio-plot" / "HPDL380G8" / "HBA" / "INTEL_D3_S4610"


def settings() -> Settings:
    """The ``SSDPREDICT_*`` settings (folds, time budget, device...) the notebooks run with."""
    return get_settings()


def open_device() -> tuple[DataDir, str]:
    """The data directory and device name the notebook should analyse."""
    conf = get_settings()
    if conf.device:
        datadir = DataDir(conf.home)
        datadir.catalog.get_device(conf.device)  # raises UnknownDevice if the name is wrong
        return datadir, conf.device
    fio_dir = conf.nb_fio_dir or DEFAULT_FIO_DIR
    # an unset SSDPREDICT_HOME means a fresh temporary directory here, not the default home
    home_given = "home" in conf.model_fields_set
    datadir = DataDir(conf.home if home_given else tempfile.mkdtemp(prefix="ssdpredict-nb-"))
    # Importing the same files again reuses the earlier sweep, so re-running is harmless.
    sweep = ingest_paths(datadir, fio_dir.name, [fio_dir])
    print(f"imported {sweep.n_points} fio results from {fio_dir} as sweep {sweep.id}")
    return datadir, fio_dir.name
