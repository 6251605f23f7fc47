"""Export a device's measurements in the format ``ingest`` reads, so export -> ingest round-trips.

The columns are the ingest CSV contract (:data:`collectors.ingest.KNOWN_COLUMNS`): the
workload fields, then the metric columns the device has, in canonical order.  Sweep
bookkeeping (sweep id, fio version, engine, source file, raw fio JSON) is not part of
that contract -- ingest refuses unknown columns -- so it stays in the data directory.
An empty cell is a metric that was not measured, as ingest reads it.  Parquet holds the
same table for analysis tools; ingest reads CSV and fio JSON only.

Open-loop points (:mod:`collectors.sweep.openloop`: fio ``rate_iops`` runs, with their
``offered_iops``) are left out and counted (:attr:`Export.left_out`): the ingest format
has no column for the offered rate, and without it such a row (16 rate-limited jobs at
queue depth 1) would come back as a closed-loop measurement of 16 jobs and mislead
training.  They stay in the data directory.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import pandas as pd

from collectors.ingest import EXTRA_METRICS
from modeling.errors import InvalidInput, NoData
from modeling.store.open_loop_rows import closed_loop_rows
from modeling.store import DataDir
from modeling.workload import METRICS, WORKLOAD_FIELDS

EXPORT_FORMATS = ("csv", "parquet")
_INTEGER_FIELDS = ("queue_depth", "numjobs", "request_size", "read_size", "write_size")


def measurement_table(datadir: DataDir, device: str) -> pd.DataFrame:
    """The device's measured runs with exactly the ingest columns it has data for.

    Raises ``UnknownDevice``, or ``NoData`` when the device has no measurements.
    """
    return _table(datadir, device)[0]


def _table(datadir: DataDir, device: str) -> tuple[pd.DataFrame, int]:
    """(:func:`measurement_table`, how many open-loop points it leaves out), from one read."""
    datadir.catalog.get_device(device)
    measured = datadir.catalog.measurements(device)
    frame = closed_loop_rows(measured)
    if frame.empty:
        raise NoData(f"device {device!r} has no measurements to export")
    columns = [
        c for c in (*WORKLOAD_FIELDS, *METRICS, *EXTRA_METRICS) if c in frame and frame[c].notna().any()
    ]
    table = frame[columns].copy()
    for name in _INTEGER_FIELDS:
        if name in table:
            # nullable integers: "4096", not "4096.0", when an older sweep left a gap
            table[name] = table[name].astype("Int64")
    return table, len(measured) - len(frame)


@dataclass(frozen=True)
class Export:
    """An export's bytes, and the open-loop points it left out."""

    data: bytes
    left_out: int


def export_device(datadir: DataDir, device: str, fmt: str = "csv") -> Export:
    """The device's measurements as CSV (UTF-8, header line) or Parquet bytes, with what was left out."""
    if fmt not in EXPORT_FORMATS:
        raise InvalidInput(f"unknown export format {fmt!r}: use {' or '.join(EXPORT_FORMATS)}")
    table, left_out = _table(datadir, device)
    if fmt == "csv":
        # pandas writes floats in their shortest round-trip form: ingest reads back the same values
        return Export(table.to_csv(index=False, lineterminator="\n").encode(), left_out)
    buf = io.BytesIO()
    table.to_parquet(buf, index=False)
    return Export(buf.getvalue(), left_out)


def export_measurements(datadir: DataDir, device: str, fmt: str = "csv") -> bytes:
    """The device's measurements as CSV (UTF-8, header line) or Parquet bytes."""
    return export_device(datadir, device, fmt).data
