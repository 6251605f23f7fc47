"""A sweep's Parquet file carries the sweep's and its device's catalog records.

The rows alone are not enough to rebuild a lost catalog: the device's class and
metadata, and the sweep's source, plan, target and provenance (fio version, engine,
kernel...) live in the catalog.  Each Parquet file therefore holds them as key-value
metadata under :data:`KEY`, written with the rows in the same atomic write, so
``ssdpredict catalog rebuild`` can restore every complete sweep as it was.  A streamed
import writes its Parquet file before the sweep exists, and rewriting a file of hundreds of
megabytes to add a footer would double the import's I/O: its records go into a small
sidecar file beside it (:func:`sidecar_path`), read back the same way.  (The raw fio
JSON of each point stays in the catalog only: it is provenance, not needed to train.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from modeling.store.records import Device, Sweep

KEY = b"ssdpredict"
FORMAT = "ssdpredict-sweep"
FORMAT_VERSION = 1


def sweep_record(sweep: Sweep, device: Device, *, info: dict[str, Any], finished_at: str) -> dict[str, Any]:
    """The records written into a sweep's Parquet file."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "device": {"name": device.name, "class": device.device_class, "metadata": device.metadata,
                   "created_at": device.created_at},
        "sweep": {"id": sweep.id, "source": sweep.source, "plan_key": sweep.plan_key, "plan": sweep.plan,
                  "target": sweep.target, "n_planned": sweep.n_planned, "info": info,
                  "created_at": sweep.created_at, "finished_at": finished_at},
    }


def write_sweep_parquet(path: Path, frame: pd.DataFrame, record: dict[str, Any]) -> None:
    """Write ``frame`` to ``path`` as Parquet with ``record`` in its metadata."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[KEY] = json.dumps(record, sort_keys=True, default=str).encode()
    pq.write_table(table.replace_schema_metadata(meta), path)


def sidecar_path(path: Path) -> Path:
    """Where the records of an imported sweep's Parquet file ``path`` live."""
    return Path(path).with_suffix(".record.json")


def sidecar_bytes(record: dict[str, Any]) -> bytes:
    """The sidecar file's contents for ``record``."""
    return json.dumps(record, sort_keys=True, default=str).encode()


def read_sweep_record(path: Path) -> dict[str, Any] | None:
    """The records of a sweep's Parquet file, from its metadata or its sidecar file.

    None for a file written before sweeps carried their records.
    """
    meta = pq.read_schema(path).metadata or {}
    if KEY in meta:
        record = json.loads(meta[KEY])
    elif sidecar_path(path).is_file():
        record = json.loads(sidecar_path(path).read_bytes())
    else:
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ValueError("foreign ssdpredict metadata")
    return record
