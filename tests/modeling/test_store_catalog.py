"""The data directory: catalog transactions, resumable points, atomic Parquet, names."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from modeling.errors import InvalidInput, NotFound, UnknownDevice
from modeling.store import DataDir, validate_name
from modeling.store.files.atomic import atomic_write_bytes


def test_points_are_stored_once_and_resumable(datadir: DataDir) -> None:
    catalog = datadir.catalog
    catalog.ensure_device("disk", "ssd", {"model": "x"})
    sweep = catalog.create_sweep("disk", source="sweep", plan_key="k1", n_planned=3)
    assert catalog.add_point(sweep.id, 0, {"iops": 1.0}, raw='{"jobs": []}')
    assert not catalog.add_point(sweep.id, 0, {"iops": 99.0})  # a retried point is a no-op
    assert catalog.add_point(sweep.id, 1, {"iops": 2.0})
    assert catalog.completed_points(sweep.id) == {(0, 0), (1, 0)}
    assert catalog.find_resumable_sweep("disk", "k1") == catalog.get_sweep(sweep.id)
    assert catalog.raw_result(sweep.id, 0) == '{"jobs": []}'
    # unfinished sweeps are invisible to training
    assert catalog.measurements("disk").empty
    done = catalog.finish_sweep(sweep.id)
    assert done.status == "complete" and done.n_points == 2
    frame = catalog.measurements("disk")
    assert sorted(frame["iops"]) == [1.0, 2.0]
    assert catalog.find_resumable_sweep("disk", "k1") is None
    assert catalog.find_complete_sweep("disk", "k1") is not None


def test_add_measurements_is_all_or_nothing(datadir: DataDir) -> None:
    catalog = datadir.catalog
    catalog.ensure_device("disk")
    with pytest.raises(TypeError):
        catalog.add_measurements("disk", [{"iops": 1.0}, {"iops": object()}])
    assert catalog.list_sweeps("disk") == []
    sweep = catalog.add_measurements("disk", [{"iops": 1.0}, {"iops": 2.0}], info={"src": "t"})
    assert sweep.n_points == 2 and sweep.status == "complete"
    with pytest.raises(InvalidInput):
        catalog.add_measurements("disk", [])


def test_device_metadata_merges(datadir: DataDir) -> None:
    catalog = datadir.catalog
    catalog.ensure_device("r0", "raid", {"level": "raid0"})
    dev = catalog.ensure_device("r0", "raid", {"members": 3})
    assert dev.metadata == {"level": "raid0", "members": 3}
    assert [d.name for d in catalog.list_devices()] == ["r0"]


def test_unknown_things_raise_domain_errors(datadir: DataDir) -> None:
    catalog = datadir.catalog
    with pytest.raises(UnknownDevice, match="nope"):
        catalog.get_device("nope")
    with pytest.raises(UnknownDevice, match="nope"):
        catalog.active_model_version("nope")
    with pytest.raises(UnknownDevice, match="nope"):
        catalog.get_model_version("nope", "v1")
    with pytest.raises(NotFound):
        catalog.get_sweep(42)
    catalog.ensure_device("d")
    with pytest.raises(NotFound):
        catalog.activate_model("d", "v1")
    assert catalog.active_model_version("d") is None
    with pytest.raises(UnknownDevice, match="nope"):
        catalog.measurement_files(["d", "nope"])


def test_model_versions_activate_atomically(datadir: DataDir) -> None:
    catalog = datadir.catalog
    catalog.ensure_device("d")
    catalog.add_model_version("d", "v1", "d/v1", {"n": 1}, activate=True)
    catalog.add_model_version("d", "v2", "d/v2", {"n": 2}, activate=False)
    assert catalog.active_model_version("d").version == "v1"  # type: ignore[union-attr]
    catalog.activate_model("d", "v2")
    versions = catalog.list_model_versions("d")
    assert [(v.version, v.active) for v in versions] == [("v1", False), ("v2", True)]


@pytest.mark.parametrize("bad", ["", "..", ".hidden", "a/b", "a\\b", "x" * 129, "sp ace", "é"])
def test_names_that_could_escape_the_data_directory_are_refused(bad: str, datadir: DataDir) -> None:
    with pytest.raises(InvalidInput):
        validate_name(bad)
    with pytest.raises(InvalidInput):
        datadir.catalog.ensure_device(bad)


def test_atomic_write_leaves_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "f.bin"
    atomic_write_bytes(target, b"old")

    from modeling.store.files.atomic import atomic_write

    def failing(tmp: Path) -> None:
        tmp.write_bytes(b"partial")
        raise RuntimeError("crash while writing")

    with pytest.raises(RuntimeError):
        atomic_write(target, failing)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]  # no temporary left behind


def test_the_parquet_file_reader_gives_what_pandas_reads(datadir: DataDir) -> None:
    """``read_parquet`` (pyarrow's file reader) and ``pd.read_parquet``: the same frame, dtypes too,
    for a sweep's file and an import's (written before its sweep, without ``sweep_id``)."""
    from collectors.ingest.batch import ingest_paths
    from modeling.store.catalog import read_measurement_files, read_parquet
    from tests.service.utils import fio_files

    ingest_paths(datadir, "imported", fio_files(limit=4))
    datadir.catalog.ensure_device("rows")
    datadir.catalog.add_measurements("rows", [
        {"queue_depth": 1, "iops": 1.5, "engine": "psync", "note": None},
        {"queue_depth": 4, "iops": float("nan"), "engine": None, "note": "x"},
    ])
    files = datadir.catalog.measurement_files(["imported", "rows"])
    assert set(files) == {"imported", "rows"}  # the devices asked, not the catalog's every device
    for device, pairs in files.items():
        for _, name in pairs:
            path = datadir.catalog.measurements_dir / name
            pd.testing.assert_frame_equal(read_parquet(path), pd.read_parquet(path), check_exact=True)
            # a few columns: those of the file, in its order, and sweep_id where the file has it
            want = [c for c in pd.read_parquet(path).columns if c in ("iops", "engine", "sweep_id")]
            got = read_parquet(path, ["engine", "iops", "no_such_column"])
            pd.testing.assert_frame_equal(got, pd.read_parquet(path, columns=want), check_exact=True)
        full = datadir.catalog.measurements(device)
        few = read_measurement_files(datadir.catalog.measurements_dir, pairs, ["engine", "iops"])
        assert list(few.columns) == [c for c in full.columns if c in few.columns]
        assert {"sweep_id", "engine", "iops"} <= set(few.columns) < set(full.columns)
        pd.testing.assert_frame_equal(few, full[few.columns], check_exact=True)
