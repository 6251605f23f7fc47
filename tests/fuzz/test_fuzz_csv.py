"""Fuzzing the measurements CSV reader and the import: rows assembled from valid and hostile
cells.  Every input gives validated rows or an InvalidInput naming a line; the fast and the
exact readers agree; a rejected import leaves the catalog and the Parquet files unchanged."""

from __future__ import annotations

import pytest

import io
import math
import sqlite3
import tempfile
from pathlib import Path

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from collectors.ingest import ingest_bytes, parse_csv_measurements
from collectors.ingest.csv_stream import exact_frames, iter_csv_frames
from collectors.metric_values import MAX_METRIC
from modeling.errors import InvalidInput
from modeling.store import DataDir
from modeling.workload import METRICS
from tests.fuzz.conftest import FUZZ

pytestmark = pytest.mark.slow  # run by `make test-slow` (and CI), not by `make test`

COLUMNS = [
    "write_ratio",
    "queue_depth",
    "request_size",
    "randomness",
    "numjobs",
    "read_size",
    "iops",
    "latency_mean_us",
    "latency_p99_us",
    "read_iops",
    "bogus",
]
GOOD = {
    "write_ratio": ["0", "0.5", "1", "0.25"],
    "queue_depth": ["1", "8", "64", "4096"],
    "request_size": ["4096", "16k", "65536", "512"],
    "randomness": ["0", "1", "0.3"],
    "numjobs": ["1", "4", ""],
    "read_size": ["4096", "", "8k"],
}
HOSTILE = [
    "",
    " ",
    "nan",
    "inf",
    "-inf",
    "-1",
    "0",
    "1e400",
    "1e308",
    "1e15",
    "abc",
    '"1"',
    '"',
    "1,5",
    "4.5",
    "1_000",
    "\u0661",
    "0x10",
    "99999999999999999999999",
    "+3",
    " 7 ",
    "1e3",
    "caf\u00e9",
]
numbers = st.floats(min_value=1e-3, max_value=1e7, allow_nan=False).map(repr)


def cells(column: str) -> st.SearchStrategy[str]:
    good = st.sampled_from(GOOD[column]) if column in GOOD else numbers
    return st.one_of(good, good, good, st.sampled_from(HOSTILE), st.text(max_size=6))


@st.composite
def csv_texts(draw: st.DrawFn) -> str:
    header = draw(st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=9, unique=True))
    if draw(st.booleans()):
        header = [
            *dict.fromkeys(["write_ratio", "queue_depth", "request_size", "randomness", "iops", *header])
        ]
    n = draw(st.integers(min_value=0, max_value=8))
    lines = [",".join(header)]
    for _ in range(n):
        row = [draw(cells(c)) for c in header]
        if draw(st.integers(0, 9)) == 0:
            row = row[: draw(st.integers(0, len(row)))]
        if draw(st.integers(0, 9)) == 0:
            lines.append("")
        lines.append(",".join(row))
    end = draw(st.sampled_from(["\n", "\r\n"]))
    return end.join(lines) + draw(st.sampled_from(["", end]))


def _outcome(frames_of: object, data: bytes) -> pd.DataFrame | str:
    try:
        frames = list(frames_of(lambda: io.BytesIO(data), "f.csv"))  # type: ignore[operator]
    except InvalidInput as exc:
        return exc.message
    return pd.concat(frames, ignore_index=True)


@FUZZ
@given(csv_texts())
def test_rows_are_valid_or_refused_with_a_line(text: str) -> None:
    try:
        rows = parse_csv_measurements(text, source="f.csv")
    except InvalidInput as exc:
        assert exc.message.startswith("f.csv"), exc.message
        return
    assert rows
    for row in rows:
        assert any(m in row for m in METRICS)
        for key, value in row.items():
            assert isinstance(value, (int, float)) and math.isfinite(value), (key, value)
            if key in METRICS:
                assert 0 < value < MAX_METRIC


@FUZZ
@given(csv_texts())
def test_fast_and_exact_readers_agree(text: str) -> None:
    data = text.encode()
    fast, exact = _outcome(iter_csv_frames, data), _outcome(exact_frames, data)
    if isinstance(exact, str):
        assert fast == exact
    else:
        assert not isinstance(fast, str), fast
        pd.testing.assert_frame_equal(fast, exact)


_HOME = Path(tempfile.mkdtemp(prefix="ssdpredict-fuzz-ingest-"))
_DATADIR = DataDir(_HOME)


def _snapshot() -> tuple[list[str], list[tuple[object, ...]]]:
    files = sorted(str(p.relative_to(_HOME)) for p in (_HOME / "measurements").rglob("*"))
    with sqlite3.connect(_DATADIR.catalog_path) as conn:
        rows = [tuple(r) for t in ("devices", "sweeps", "points") for r in conn.execute(f"SELECT * FROM {t}")]
    return files, rows


@FUZZ
@given(
    csv_texts() | st.binary(max_size=200).map(lambda b: b.decode("latin-1")), st.sampled_from(["new", "old"])
)
def test_a_rejected_import_changes_nothing(text: str, device: str) -> None:
    if not _DATADIR.catalog.list_devices():
        ingest_bytes(
            _DATADIR,
            "old",
            "seed.csv",
            b"write_ratio,queue_depth,request_size,randomness,iops\n0,1,4096,1,5\n",
        )
    before = _snapshot()
    try:
        sweep = ingest_bytes(_DATADIR, device, "f.csv", text.encode())
    except InvalidInput:
        assert _snapshot() == before
        return
    assert sweep.n_points > 0 and len(_DATADIR.catalog.measurements(device)) >= sweep.n_points
