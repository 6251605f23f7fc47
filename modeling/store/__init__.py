"""The data directory: a SQLite catalog plus Parquet measurement files and model files.

Layout under ``SSDPREDICT_HOME`` (default ``~/.local/share/ssdpredict``)::

    catalog.sqlite3              devices, sweeps, points, models (SQLite, WAL mode)
    measurements/<device>/sweep-<id>.parquet
                                 one file per finished sweep or ingest, all its rows
    models/<device>/<version>/   one folder per model version (safe formats only)
    scratch/                     scratch files that `make run` sweeps
    jobs/<id>.json               state of the service's background retrain jobs

Every write is atomic.  A sweep's points go into the catalog one SQLite transaction each
(``UNIQUE(sweep_id, seq, repeat)`` makes a retried point a no-op), so an interrupted sweep
resumes exactly where it stopped.  When a sweep finishes, its rows are written to Parquet
through a temporary file and a rename, and only then is the sweep marked complete; a
crash in between leaves a sweep that the next run completes again.  Training reads the
Parquet files of complete sweeps only.
"""

from modeling.store.catalog import Catalog, Device, ModelVersion, Sweep
from modeling.store.files.datadir import DataDir
from modeling.store.names import validate_name

__all__ = ["Catalog", "DataDir", "Device", "ModelVersion", "Sweep", "validate_name"]
