"""Importing fio JSON results: real fio-plot files, all-or-nothing rejection of corrupt input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from collectors.ingest import ingest_bytes, ingest_paths, parse_fio_files
from modeling.errors import FioOutputError, InvalidInput, TooLarge, UnknownDevice
from modeling.store import DataDir
from modeling.workload import METRICS
from tests.conftest import FIO_PLOT, TEST_DATA, data_path

FIO_SUBSET = TEST_DATA / "fio"
INTEL = FIO_SUBSET / "INTEL_D3_S4610"
MIXED = FIO_SUBSET / "P420i_SAMSUNG860_RW"


def _nothing_stored(datadir: DataDir, device: str) -> bool:
    try:
        return datadir.catalog.list_sweeps(device) == []
    except UnknownDevice:
        return True


def test_all_of_fio_plot_ingests_one_device_per_leaf_folder(datadir: DataDir) -> None:
    root = data_path(FIO_PLOT)
    leaves = sorted({p.parent for p in root.rglob("*.json")})
    total_files = total_points = 0
    for leaf in leaves:
        n_files = len(list(leaf.glob("*.json")))
        sweep = ingest_paths(datadir, leaf.name, [leaf])
        assert sweep.status == "complete" and sweep.source == "ingest"
        assert sweep.n_points == n_files == sweep.info["n_files"]
        frame = datadir.catalog.measurements(leaf.name)
        assert len(frame) == n_files
        assert frame[list(METRICS)].notna().all().all()
        assert (frame[list(METRICS)] > 0).all().all()
        total_files += n_files
        total_points += sweep.n_points
    assert len(leaves) == 7
    assert total_points == total_files == 637


def test_rows_carry_workload_from_job_options_and_raw_json(datadir: DataDir) -> None:
    sweep = ingest_paths(datadir, "intel", [INTEL])
    frame = datadir.catalog.sweep_points(sweep.id).set_index("source_file")
    row = frame.loc["INTEL_D3_S4610/randread-16-8.json"]
    assert (row["queue_depth"], row["numjobs"], row["write_ratio"]) == (16, 8, 0.0)
    assert row["request_size"] == 4096 and row["randomness"] == 1.0
    seq = int(row["seq"])
    raw = datadir.catalog.raw_result(sweep.id, seq)
    assert raw == (INTEL / "randread-16-8.json").read_text()
    assert json.loads(raw)["jobs"][0]["job options"]["iodepth"] == "16"


def test_folder_and_files_together_make_one_sweep(datadir: DataDir) -> None:
    sweep = ingest_paths(datadir, "mix", [MIXED, INTEL / "randwrite-4-2.json"])
    assert sweep.n_points == 6
    names = [f["name"] for f in sweep.info["files"]]
    assert "randwrite-4-2.json" in names and "P420i_SAMSUNG860_RW/randrw-1-1.json" in names
    assert set(datadir.catalog.measurements("mix")["write_ratio"]) == {0.5, 1.0}


def test_reingesting_identical_content_stores_nothing_twice(datadir: DataDir) -> None:
    first = ingest_paths(datadir, "intel", [INTEL])
    again = ingest_paths(datadir, "intel", [INTEL])
    assert again.id == first.id and again.info.get("already_ingested") is True
    assert len(datadir.catalog.list_sweeps("intel")) == 1
    assert len(datadir.catalog.measurements("intel")) == 5


def _folder_with(tmp_path: Path, bad_name: str, bad_text: str | bytes) -> Path:
    folder = tmp_path / "results"
    shutil.copytree(INTEL, folder)
    target = folder / bad_name
    if isinstance(bad_text, bytes):
        target.write_bytes(bad_text)
    else:
        target.write_text(bad_text)
    return folder


def _truncated() -> str:
    text = (INTEL / "randread-1-1.json").read_text()
    return text[: len(text) // 2]


def _job_error() -> str:
    doc = json.loads((INTEL / "randread-1-1.json").read_text())
    doc["jobs"][0]["error"] = 5
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (_truncated(), "corrupt fio JSON"),
        ("", "empty file"),
        ('{"hello": "world"}', "not fio JSON output"),
        ("just some text\n", "no JSON object"),
        (_job_error(), "failed with error 5"),
        (b'{"jobs": [\xff\xfe]}', "not UTF-8"),
        ('{"fio version": "fio-3.33", "jobs": []}', "no job results"),
    ],
    ids=["truncated", "empty", "not-fio", "not-json", "job-error", "non-utf8", "no-jobs"],
)
def test_corrupt_fio_json_rejects_the_whole_import(
    datadir: DataDir, tmp_path: Path, content: str | bytes, reason: str
) -> None:
    folder = _folder_with(tmp_path, "zz-broken.json", content)
    with pytest.raises(FioOutputError) as info:
        ingest_paths(datadir, "intel", [folder])
    message = str(info.value)
    assert "results/zz-broken.json" in message and reason in message
    assert "nothing was stored" in message
    assert _nothing_stored(datadir, "intel")


def test_every_bad_file_is_listed_in_details(datadir: DataDir, tmp_path: Path) -> None:
    folder = _folder_with(tmp_path, "a-broken.json", _truncated())
    (folder / "b-broken.json").write_text("{}")
    with pytest.raises(FioOutputError) as info:
        ingest_paths(datadir, "intel", [folder])
    assert "and 1 more bad files" in str(info.value)
    assert len(info.value.details) == 2


def test_missing_path_and_empty_folder_are_rejected(datadir: DataDir, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no such file"):
        ingest_paths(datadir, "x", [tmp_path / "nope.json"])
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("hi")
    with pytest.raises(InvalidInput, match="no \\*.json or \\*.csv files"):
        ingest_paths(datadir, "x", [tmp_path / "empty"])
    assert _nothing_stored(datadir, "x")


def test_parse_fio_files_returns_rows_and_raw(tmp_path: Path) -> None:
    pairs = parse_fio_files([MIXED])
    assert len(pairs) == 5
    for row, raw in pairs:
        assert 0 < row["measured_write_ratio"] < 1
        assert json.loads(raw)["jobs"][0]["job options"]["rw"] == "randrw"


def test_ingest_bytes_detects_fio_json_by_content(datadir: DataDir) -> None:
    data = (INTEL / "randwrite-32-1.json").read_bytes()
    sweep = ingest_bytes(datadir, "up", "results.bin", data)
    assert sweep.n_points == 1 and sweep.info["files"][0]["format"] == "fio"
    assert datadir.catalog.measurements("up")["write_ratio"].tolist() == [1.0]
    assert datadir.catalog.raw_result(sweep.id, 0) == data.decode()


def test_ingest_bytes_with_fio_warnings_before_the_json(datadir: DataDir) -> None:
    data = b"fio: note: both iodepth >= 1 and synchronous I/O engine are selected\n"
    data += (INTEL / "randread-1-1.json").read_bytes()
    assert ingest_bytes(datadir, "up", "out.txt", data).n_points == 1


def test_ingest_bytes_enforces_the_size_limit(datadir: DataDir) -> None:
    data = (INTEL / "randread-1-1.json").read_bytes()
    with pytest.raises(TooLarge):
        ingest_bytes(datadir, "up", "big.json", data, max_bytes=len(data) - 1)
    assert _nothing_stored(datadir, "up")
    assert ingest_bytes(datadir, "up", "big.json", data, max_bytes=len(data)).n_points == 1


def test_ingest_bytes_file_name_is_only_a_label(datadir: DataDir) -> None:
    data = (INTEL / "randread-1-1.json").read_bytes()
    sweep = ingest_bytes(datadir, "up", "../../etc/passwd\x00.json", data)
    assert sweep.info["upload"] == "passwd.json"
    assert not (datadir.root.parent / "etc").exists()


def test_device_class_is_kept_and_checked(datadir: DataDir) -> None:
    ingest_paths(datadir, "arr", [MIXED], device_class="raid", metadata={"raid_level": "raid5"})
    dev = datadir.catalog.get_device("arr")
    assert dev.device_class == "raid" and dev.metadata == {"raid_level": "raid5"}
    # no class given: the existing device keeps its class
    ingest_paths(datadir, "arr", [INTEL])
    assert datadir.catalog.get_device("arr").device_class == "raid"
    with pytest.raises(InvalidInput, match="class 'raid', not 'ssd'"):
        ingest_paths(datadir, "arr", [INTEL / "randread-1-1.json"], device_class="ssd")
    with pytest.raises(InvalidInput, match="unknown device class"):
        ingest_paths(datadir, "new", [INTEL], device_class="floppy")
    assert _nothing_stored(datadir, "new")


def test_bad_device_name_is_rejected_before_storing(datadir: DataDir) -> None:
    with pytest.raises(InvalidInput, match="invalid device name"):
        ingest_paths(datadir, "../evil", [INTEL])
    assert datadir.catalog.list_devices() == []


def test_one_file_with_two_job_groups_gives_two_points(datadir: DataDir) -> None:
    doc = json.loads((INTEL / "randread-1-1.json").read_text())
    second = json.loads(json.dumps(doc["jobs"][0]))
    second["groupid"] = 1
    second["jobname"] = "qd4"
    second["job options"]["iodepth"] = "4"
    doc["jobs"].append(second)
    sweep = ingest_bytes(datadir, "two", "two-groups.json", json.dumps(doc).encode())
    assert sweep.n_points == 2 and sweep.info["files"] == [
        {"name": "two-groups.json", "format": "fio", "points": 2}
    ]
    frame = datadir.catalog.measurements("two")
    assert sorted(frame["queue_depth"]) == [1, 4]
    assert "qd4" in set(frame["job_name"])
