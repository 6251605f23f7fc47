"""Export a device's measurements in the format ``ingest`` reads, so export -> ingest round-trips.

The columns are the ingest CSV contract (:data:`collectors.ingest.KNOWN_COLUMNS`): the
workload fields, then the metric columns the device has, in canonical order.  Sweep
bookkeeping (sweep id, fio version, engine, source file, raw fio JSON) is not part of
that contract -- ingest refuses unknown columns -- so it stays in the data directory.
An empty cell is a metric that was not measured, as ingest reads it.  Parquet holds the
same table for analysis tools; ingest reads CSV and fio JSON only.

Open-loop points (:mod:`collectors.openloop`: fio ``rate_iops`` runs, with their
``offered_iops``) are left out and counted (:func:`open_loop_points`): the ingest format
has no column for the offered rate, and without it such a row (16 rate-limited jobs at
queue depth 1) would come back as a closed-loop measurement of 16 jobs and mislead
training.  They stay in the data directory.
"""

from __future__ import annotations

import io

import pandas as pd

from collectors.ingest import EXTRA_METRICS
from collectors.openloop import OFFERED
from modeling.errors import InvalidInput, NoData
from modeling.store import DataDir
from modeling.workload import METRICS, WORKLOAD_FIELDS

EXPORT_FORMATS = ("csv", "parquet")
_INTEGER_FIELDS = ("queue_depth", "numjobs", "request_size", "read_size", "write_size")


def measurement_table(datadir: DataDir, device: str) -> pd.DataFrame:
    """The device's measured runs with exactly the ingest columns it has data for.

    Raises ``UnknownDevice``, or ``NoData`` when the device has no measurements.
    """
    datadir.catalog.get_device(device)
    frame = datadir.catalog.measurements(device)
    frame = frame.loc[~_open_loop(frame)]
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
    return table


def _open_loop(frame: pd.DataFrame) -> pd.Series:
    if OFFERED not in frame:
        return pd.Series(False, index=frame.index)
    return pd.to_numeric(frame[OFFERED], errors="coerce").notna()


def open_loop_points(datadir: DataDir, device: str) -> int:
    """How many of the device's points are open-loop ones, which the export leaves out."""
    return int(_open_loop(datadir.catalog.measurements(device)).sum())


def export_measurements(datadir: DataDir, device: str, fmt: str = "csv") -> bytes:
    """The device's measurements as CSV (UTF-8, header line) or Parquet bytes."""
    if fmt not in EXPORT_FORMATS:
        raise InvalidInput(f"unknown export format {fmt!r}: use {' or '.join(EXPORT_FORMATS)}")
    table = measurement_table(datadir, device)
    if fmt == "csv":
        # pandas writes floats in their shortest round-trip form: ingest reads back the same values
        return table.to_csv(index=False, lineterminator="\n").encode()
    buf = io.BytesIO()
    table.to_parquet(buf, index=False)
    return buf.getvalue()
