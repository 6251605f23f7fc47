"""The data both notebooks analyse: an existing device, or real fio-plot results imported.

With ``SSDPREDICT_DEVICE`` set, that device of ``SSDPREDICT_HOME`` (default
``~/.local/share/ssdpredict``) is used and nothing is imported. Otherwise the fio JSON
results in ``SSDPREDICT_NB_FIO_DIR`` (default: the Intel D3-S4610 folder of
``../shared/data/fio-plot``) are imported, with the function ``ssdpredict ingest`` uses,
into ``SSDPREDICT_HOME`` or a new temporary data directory.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import modeling
from collectors.ingest import ingest_paths
from modeling.store import DataDir

REPO = Path(modeling.__file__).resolve().parent.parent
DEFAULT_FIO_DIR = REPO / "tests" / "data" / "fio-plot" / "HPDL380G8" / "HBA" / "INTEL_D3_S4610"


def open_device() -> tuple[DataDir, str]:
    """The data directory and device name the notebook should analyse."""
    device = os.environ.get("SSDPREDICT_DEVICE")
    if device:
        datadir = DataDir(os.environ.get("SSDPREDICT_HOME") or "~/.local/share/ssdpredict")
        datadir.catalog.get_device(device)  # raises UnknownDevice if the name is wrong
        return datadir, device
    fio_dir = Path(os.environ.get("SSDPREDICT_NB_FIO_DIR") or DEFAULT_FIO_DIR)
    datadir = DataDir(os.environ.get("SSDPREDICT_HOME") or tempfile.mkdtemp(prefix="ssdpredict-nb-"))
    # Importing the same files again reuses the earlier sweep, so re-running is harmless.
    sweep = ingest_paths(datadir, fio_dir.name, [fio_dir])
    print(f"imported {sweep.n_points} fio results from {fio_dir} as sweep {sweep.id}")
    return datadir, fio_dir.name
