"""Importing CSV measurements: validation with line numbers, all-or-nothing, round trip."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from collectors.ingest import ingest_bytes, ingest_paths, parse_csv_measurements
from modeling.errors import InvalidInput, UnknownDevice
from modeling.store import DataDir
from modeling.workload import BASIC_FIELDS, METRICS, WORKLOAD_FIELDS
from tests.conftest import TEST_DATA

HEADER = "write_ratio,queue_depth,request_size,randomness,iops,latency_mean_us"
GOOD = [
    "0,1,4096,1,9000,110.5",
    "0.5,8,16384,0.25,20000,395",
    "1,32,131072,0,1500,21000",
]


def _csv(*lines: str, header: str = HEADER) -> str:
    return "\n".join([header, *lines]) + "\n"


def test_good_csv_rows_are_validated_workloads_with_metrics() -> None:
    rows = parse_csv_measurements(_csv(*GOOD))
    assert len(rows) == 3
    assert rows[1]["queue_depth"] == 8 and rows[1]["request_size"] == 16384
    assert rows[1]["read_size"] == 16384 and rows[1]["write_randomness"] == 0.25  # defaults filled
    assert rows[1]["numjobs"] == 1
    assert rows[2]["iops"] == 1500.0 and "bandwidth_mib_s" not in rows[2]


def test_optional_workload_columns_and_empty_metric_cells() -> None:
    header = HEADER.rsplit(",", 2)[0] + ",numjobs,read_size,write_size,iops,latency_p99_us"
    rows = parse_csv_measurements(_csv("0.5,4,8192,1,16,4096,65536,5000,", "0,1,4096,1,,,,100,900",
                                       header=header))
    assert rows[0]["numjobs"] == 16 and rows[0]["write_size"] == 65536
    assert "latency_p99_us" not in rows[0]
    assert rows[1]["numjobs"] == 1 and rows[1]["latency_p99_us"] == 900.0


def test_bom_crlf_and_blank_lines_are_accepted() -> None:
    text = "\ufeff" + _csv(*GOOD).replace("\n", "\r\n") + "\r\n\r\n"
    assert len(parse_csv_measurements(text.encode())) == 3


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (_csv(GOOD[0], "0,x,4096,1,9000,1"), 3, "queue_depth: not a number: 'x'"),
        (_csv(GOOD[0], "0,1,4096,1.5,9000,1"), 3, "randomness: Input should be less than or equal to 1"),
        (_csv(GOOD[0], GOOD[1], "0,0,4096,1,9000,1"), 4,
         "queue_depth: Input should be greater than or equal to 1"),
        (_csv("0,1,1000,1,9000,1"), 2, "request_size: Input should be a multiple of 64"),
        (_csv("0,2.5,4096,1,9000,1"), 2, "queue_depth: not a whole number"),
        (_csv(GOOD[0], "0,1,4096,1,-5,1"), 3, "iops: must be > 0"),
        (_csv("0,1,4096,1,0,1"), 2, "iops: must be > 0"),
        (_csv("nan,1,4096,1,9000,1"), 2, "write_ratio: not a finite number"),
        (_csv("0,1,4096,1,inf,1"), 2, "iops: not a finite number"),
        (_csv(GOOD[0], ",1,4096,1,9000,1"), 3, "write_ratio: missing value (required)"),
        (_csv("0,1,4096,1,,"), 2, "no metric value"),
        (_csv(GOOD[0], "0,1,4096"), 3, "3 values for 6 columns"),
        (_csv("0,1,4096,1,9000,1", header=HEADER + ",iops"), 1, "duplicate column 'iops'"),
        (_csv("0,1,4096,1,9000,1,x", header=HEADER + ",comment"), 1, "unknown column(s) 'comment'"),
        (_csv("0,1,4096,9000", header="write_ratio,queue_depth,request_size,iops"), 1,
         "missing required column(s) randomness"),
        (_csv("0,1,4096,1", header=",".join(BASIC_FIELDS)), 1, "no metric column"),
        (_csv(header=HEADER), 1, "header only, no data rows"),
        ("\n\n", 0, "empty file"),
        (_csv('0,1,4096,1,"9000,1'), 2, "malformed CSV"),
    ],
    ids=[
        "non-numeric", "fraction>1", "qd0-line4", "size-not-512", "qd-not-integer", "negative-metric",
        "zero-metric", "nan-workload", "inf-metric", "empty-required", "no-metric-value", "short-row",
        "duplicate-header", "unknown-column", "missing-column", "no-metric-column", "header-only",
        "empty-file", "unclosed-quote",
    ],
)
def test_bad_csv_names_line_and_reason(text: str, line: int, reason: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_csv_measurements(text, source="m.csv")
    message = str(info.value)
    assert message.startswith(f"m.csv, line {line}: " if line else "m.csv: "), message
    assert reason in message


def test_non_utf8_csv_names_the_line() -> None:
    data = _csv(*GOOD).encode() + "0,1,4096,1,5,caf\xe9\n".encode("latin-1")
    with pytest.raises(InvalidInput, match=r"m.csv, line 5: not UTF-8 text \(byte 0xe9"):
        parse_csv_measurements(data, source="m.csv")


def test_file_with_one_bad_row_stores_nothing(datadir: DataDir, tmp_path: Path) -> None:
    good = tmp_path / "good.csv"
    good.write_text(_csv(*GOOD))
    bad = tmp_path / "bad.csv"
    bad.write_text(_csv(*GOOD, *GOOD, "0.5,8,4096,0.5,-1,1"))
    with pytest.raises(InvalidInput) as info:
        ingest_paths(datadir, "csvdev", [good, bad])
    assert "bad.csv, line 8: iops: must be > 0" in str(info.value)
    assert "nothing was stored" in str(info.value)
    with pytest.raises(UnknownDevice):
        datadir.catalog.list_sweeps("csvdev")
    # an existing device gains no sweep from a rejected file either
    ingest_paths(datadir, "csvdev", [good])
    with pytest.raises(InvalidInput):
        ingest_paths(datadir, "csvdev", [bad])
    assert [s.n_points for s in datadir.catalog.list_sweeps("csvdev")] == [3]


def test_csv_upload_detected_by_content(datadir: DataDir) -> None:
    sweep = ingest_bytes(datadir, "up", "data.txt", _csv(*GOOD).encode())
    assert sweep.n_points == 3 and sweep.info["files"][0]["format"] == "csv"
    with pytest.raises(InvalidInput, match="data.txt, line 1: not a measurements CSV or fio JSON"):
        ingest_bytes(datadir, "up2", "data.txt", b"hello world\n")


def test_csv_round_trip_of_ingested_fio_measurements(datadir: DataDir, tmp_path: Path) -> None:
    ingest_paths(datadir, "src", [TEST_DATA / "fio"])
    original = datadir.catalog.measurements("src")
    columns = [*WORKLOAD_FIELDS, *METRICS, "latency_p50_us", "read_iops", "write_latency_p99_us"]
    path = tmp_path / "export.csv"
    original[columns].to_csv(path, index=False)
    sweep = ingest_paths(datadir, "copy", [path])
    assert sweep.n_points == len(original) == 10
    copy = datadir.catalog.measurements("copy")
    key = list(WORKLOAD_FIELDS)
    left = original[columns].sort_values(key).reset_index(drop=True)
    right = copy[columns].sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(left, right, check_dtype=False)
