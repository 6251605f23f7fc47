"""Hostile fio JSON (issue 12, items 6 and 11): garbage values and malformed structure are
refused with the file and the field, never stored and never a traceback."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from typing import Any

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from collectors.fio.results import parse_fio_output
from collectors.ingest import ingest_bytes
from modeling.errors import FioOutputError, UnknownDevice
from modeling.store import DataDir
from service.api.main import create_app
from service.cli.main import app
from service.config import get_settings
from tests.conftest import TEST_DATA

READ_ONLY = TEST_DATA / "fio" / "INTEL_D3_S4610" / "randread-16-8.json"
MIXED = TEST_DATA / "fio" / "P420i_SAMSUNG860_RW" / "randrw-4-2.json"


def _doc(path: Any = READ_ONLY) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def _set(path: list[Any], value: Any, base: Any = READ_ONLY) -> str:
    doc = _doc(base)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    # allow_nan: Python's json writes NaN/Infinity, which fio files are not, but uploads can be.
    return json.dumps(doc)


READ = ["jobs", 0, "read"]
PCT = [*READ, "clat_ns", "percentile"]
BIG = 10**400  # past float's range: float(BIG) raised OverflowError (issue 25, item 5)


def _digits(path: list[Any], digits: int) -> str:
    """``path`` set to an integer of ``digits`` digits (json.dumps refuses past 4300)."""
    return _set(path, -424242).replace("-424242", "9" * digits)


VALUES = {
    "400-digit-iops": (_set([*READ, "iops"], BIG), "read.iops: a 401-digit integer"),
    "400-digit-bw-bytes": (_set([*READ, "bw_bytes"], BIG), "read.bw_bytes"),
    "400-digit-latency": (_set([*READ, "lat_ns", "mean"], BIG), "read.lat_ns.mean"),
    "400-digit-percentile": (_set([*PCT, "99.000000"], BIG), "clat_ns.percentile.99.000000"),
    "400-digit-runtime": (_set([*READ, "runtime"], BIG), "read.runtime"),
    "400-digit-iodepth": (_set(["jobs", 0, "job options", "iodepth"], BIG), "workload"),
    "400-digit-bs": (_set(["jobs", 0, "job options", "bs"], str(BIG)), "workload"),
    "5000-digit-iops": (_digits([*READ, "iops"], 5000), "corrupt fio JSON"),

    "nan-iops": (_set([*READ, "iops"], math.nan), "read.iops"),
    "inf-iops": (_set([*READ, "iops"], math.inf), "read.iops"),
    "huge-iops": (_set([*READ, "iops"], 1e308), "read.iops"),
    "negative-iops": (_set([*READ, "iops"], -5), "read.iops"),
    "zero-iops": (_set([*READ, "iops"], 0), "completed no I/O"),
    "negative-bw": (_set([*READ, "bw"], -1), "read.bw"),
    "zero-bw": (_set([*READ, "bw"], 0), "bandwidth_mib_s: must be > 0"),
    "nan-latency": (_set([*READ, "lat_ns", "mean"], math.nan), "read.lat_ns.mean"),
    "negative-latency": (_set([*READ, "lat_ns", "mean"], -3.0), "read.lat_ns.mean"),
    "zero-latency": (_set([*READ, "lat_ns", "mean"], 0), "latency_mean_us: must be > 0"),
    "nan-percentile": (_set([*PCT, "99.000000"], math.nan), "clat_ns.percentile.99.000000"),
    "inf-percentile": (_set([*PCT, "50.000000"], math.inf), "clat_ns.percentile.50.000000"),
    "string-runtime": (_set([*READ, "runtime"], "abc"), "read.runtime: expected a number"),
    "list-groupid": (_set(["jobs", 0, "groupid"], [1]), "jobs[0].groupid"),
    "global-options-list": (_set(["global options"], [1, 2]), "global options: expected an object"),
    "job-options-str": (_set(["jobs", 0, "job options"], "str"), "job options: expected an object"),
    "option-value-object": (_set(["jobs", 0, "job options", "iodepth"], {"a": 1}), "job options.iodepth"),
    "iodepth-infinite": (_set(["jobs", 0, "job options", "iodepth"], math.inf), "workload"),
    "read-section-str": (_set(["jobs", 0, "read"], "x"), "read: expected an object"),
    "percentiles-list": (_set([*READ, "clat_ns", "percentile"], [1, 2]), "percentile: expected an object"),
    "latency-str": (_set([*READ, "lat_ns"], "fast"), "lat_ns: expected an object"),
    "client-stats-str": (json.dumps({"client_stats": "x", "jobs": None}), "client_stats"),
    "deep-nesting": ('{"jobs": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
}


@pytest.mark.parametrize("text,field", VALUES.values(), ids=VALUES.keys())
def test_garbage_is_refused_naming_file_and_field(text: str, field: str) -> None:
    with pytest.raises(FioOutputError) as info:
        parse_fio_output(text, source="up.json")
    assert str(info.value).startswith("up.json: "), info.value
    assert field in str(info.value)


@pytest.mark.parametrize("text,field", VALUES.values(), ids=VALUES.keys())
def test_garbage_upload_stores_nothing(datadir: DataDir, text: str, field: str) -> None:
    with pytest.raises(FioOutputError, match="nothing was stored"):
        ingest_bytes(datadir, "dev", "up.json", text.encode())
    with pytest.raises(UnknownDevice):
        datadir.catalog.get_device("dev")


def test_a_direction_without_io_is_zero_not_an_error() -> None:
    (result,) = parse_fio_output(READ_ONLY.read_text())
    assert result.row["write_iops"] == 0 and result.row["write_bandwidth_mib_s"] == 0
    assert math.isnan(result.row["write_latency_p99_us"])  # not measured: no writes
    assert result.row["iops"] > 0


def _drop_write_percentiles(doc: dict[str, Any]) -> None:
    doc["jobs"][0]["write"]["clat_ns"].pop("percentile")


def _zero_write_side(doc: dict[str, Any]) -> None:
    write = doc["jobs"][0]["write"]
    write.update(iops=0, bw=0, bw_bytes=0)
    write["lat_ns"]["mean"] = 0
    for key in write["clat_ns"]["percentile"]:
        write["clat_ns"]["percentile"][key] = 0


@pytest.mark.parametrize("edit", [_drop_write_percentiles, _zero_write_side])
def test_mixed_job_with_a_quiet_or_unreported_side_still_parses(
    edit: Callable[[dict[str, Any]], None],
) -> None:
    doc = copy.deepcopy(_doc(MIXED))
    edit(doc)
    (result,) = parse_fio_output(json.dumps(doc))
    assert result.row["iops"] > 0 and result.row["latency_p99_us"] > 0


@pytest.mark.parametrize("case", ["400-digit-iops", "5000-digit-iops"])
def test_huge_integer_is_one_line_and_exit_2_in_the_cli(tmp_path: Path, case: str) -> None:
    path = tmp_path / "up.json"
    path.write_text(VALUES[case][0])
    result = CliRunner().invoke(app, ["ingest", "-d", "dev", str(path)])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and VALUES[case][1] in lines[0], result.output


@pytest.mark.parametrize("case", ["400-digit-iops", "5000-digit-iops", "400-digit-latency"])
def test_huge_integer_upload_is_a_json_422(datadir: DataDir, case: str) -> None:
    with TestClient(create_app(get_settings()), raise_server_exceptions=False) as client:
        res = client.post("/v1/devices/dev/sweeps", files={"file": ("up.json", VALUES[case][0].encode())})
    assert res.status_code == 422, res.text
    assert VALUES[case][1] in res.json()["error"]["message"]
    with pytest.raises(UnknownDevice):
        datadir.catalog.get_device("dev")
