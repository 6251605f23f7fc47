"""Export of measurements in the ingest format: export -> ingest round-trips, on real fio-plot data."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from collectors.ingest.export import export_measurements, measurement_table
from collectors.ingest import KNOWN_COLUMNS, ingest_paths, parse_csv_measurements
from modeling.errors import InvalidInput, NoData, UnknownDevice
from modeling.store import DataDir
from modeling.workload import METRICS, WORKLOAD_FIELDS
from tests.conftest import FIO_PLOT, data_path

# read/write mixes (randrw), so both directions' metric columns are filled
P420 = FIO_PLOT / "HPDL380G8" / "RAID" / "NEW" / "P420i_SAMSUNG860_RW"
INTEL = FIO_PLOT / "HPDL380G8" / "HBA" / "INTEL_D3_S4610"


@pytest.mark.parametrize("folder", [P420, INTEL], ids=["randrw", "randread-randwrite"])
def test_export_then_ingest_stores_the_same_measurements(
    datadir: DataDir, tmp_path: Path, folder: Path
) -> None:
    ingest_paths(datadir, "original", [data_path(folder)])
    csv = tmp_path / "export.csv"
    csv.write_bytes(export_measurements(datadir, "original", "csv"))
    ingest_paths(datadir, "copy", [csv])

    original = datadir.catalog.measurements("original")
    copy = datadir.catalog.measurements("copy")
    columns = [c for c in original.columns if c in KNOWN_COLUMNS and original[c].notna().any()]
    assert set(WORKLOAD_FIELDS) | set(METRICS) <= set(columns)
    assert len(columns) > len(WORKLOAD_FIELDS) + len(METRICS)  # the per-direction metrics travel too
    pd.testing.assert_frame_equal(original[columns], copy[columns], check_exact=True)


def test_export_csv_has_exactly_the_ingest_columns(datadir: DataDir) -> None:
    ingest_paths(datadir, "d", [data_path(P420)])
    text = export_measurements(datadir, "d").decode()
    header = text.splitlines()[0].split(",")
    assert header[: len(WORKLOAD_FIELDS)] == list(WORKLOAD_FIELDS)
    assert header[len(WORKLOAD_FIELDS) : len(WORKLOAD_FIELDS) + len(METRICS)] == list(METRICS)
    assert set(header) <= KNOWN_COLUMNS  # no sweep bookkeeping that ingest would refuse
    # sizes and depths are written as integers, as a person would type them
    assert text.splitlines()[1].split(",")[1:3] == ["1", "4096"]
    rows = parse_csv_measurements(text)
    assert len(rows) == len(datadir.catalog.measurements("d"))


def test_export_parquet_holds_the_same_table(datadir: DataDir) -> None:
    ingest_paths(datadir, "d", [data_path(P420)])
    table = pd.read_parquet(io.BytesIO(export_measurements(datadir, "d", "parquet")))
    from_csv = pd.read_csv(io.BytesIO(export_measurements(datadir, "d", "csv")))
    assert list(table.columns) == list(from_csv.columns)
    pd.testing.assert_frame_equal(table, measurement_table(datadir, "d"))
    pd.testing.assert_frame_equal(
        table.astype(float), from_csv.astype(float), check_exact=True, check_dtype=False
    )


def test_export_refuses_unknown_devices_formats_and_empty_devices(datadir: DataDir) -> None:
    with pytest.raises(UnknownDevice):
        export_measurements(datadir, "nope")
    datadir.catalog.ensure_device("empty")
    with pytest.raises(NoData, match="no measurements"):
        export_measurements(datadir, "empty")
    with pytest.raises(InvalidInput, match="unknown export format 'xlsx'"):
        export_measurements(datadir, "empty", "xlsx")


def test_open_loop_points_are_left_out_and_counted(datadir: DataDir, tmp_path: Path) -> None:
    from collectors.ingest.export import export_device

    ingest_paths(datadir, "d", [data_path(INTEL)])
    closed = len(datadir.catalog.measurements("d"))
    # a rate-limited point as collectors.sweep.openloop stores it: 16 jobs at queue depth 1, 200 IO/s offered
    row = dict(write_ratio=0.0, queue_depth=1, numjobs=16, request_size=4096, randomness=1.0,
               iops=201.0, bandwidth_mib_s=201 * 4096 / 2**20, latency_mean_us=14.0, latency_p99_us=40.0,
               offered_iops=200.0)
    datadir.catalog.add_measurements("d", [row])
    assert export_device(datadir, "d").left_out == 1
    table = measurement_table(datadir, "d")
    assert len(table) == closed and "offered_iops" not in table
    # what comes back through ingest is the closed-loop data only, not a 16-job point at 201 IO/s
    csv = tmp_path / "export.csv"
    csv.write_bytes(export_measurements(datadir, "d", "csv"))
    ingest_paths(datadir, "copy", [csv])
    copy = datadir.catalog.measurements("copy")
    assert len(copy) == closed and not ((copy["numjobs"] == 16) & (copy["iops"] < 300)).any()
