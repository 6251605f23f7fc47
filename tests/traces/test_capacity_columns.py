"""A cold capacity answer reads a few of a device's measurement columns (``SOURCE_COLUMNS``): the
same answers, notes and all, as from every column, on a device whose measurements feed every
reader of them (open-loop points and their correction, a replay ceiling, two engines)."""

from __future__ import annotations

from pathlib import Path

import pytest

import traces.capacity.device as capacity_device
from modeling.serving.registry import ModelRegistry
from modeling.store import DataDir
from modeling.store.catalog import read_measurement_files
from tests.service.utils import quick_train
from tests.traces.conftest import synthetic_rows
from tests.traces.test_capacity_fleet import open_loop_points
from traces.capacity.device import SOURCE_COLUMNS, device_capacity, mix_table, parse_mix
from traces.capacity.slo import parse_slo

DEVICE = "slow"
MIXES = mix_table([parse_mix(m) for m in (
    "write_ratio=0.5,request_size=4k,randomness=1",  # where the open-loop points were measured
    "write_ratio=0.3,request_size=16k,randomness=1",
    "write_ratio=1,request_size=64k,randomness=0",
)])
SLOS = ("p99<=1ms,mean<=500us", "p99<=300us", "mean<=80us")
UNREAD = {"fio_version": "fio-3.33", "runtime_s": 30.0, "read_latency_p50_us": 7.0, "bandwidth_mib_s": 1.0}
"""Columns a device's measurements carry that no capacity answer reads."""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``slow``: libaio closed-loop points, psync open-loop points at one mix and a replay-path
    capacity point there, each row with columns no answer reads; trained."""
    d = DataDir(tmp_path_factory.mktemp("columns-home"))
    d.catalog.ensure_device(DEVICE)
    closed = [{**r, **UNREAD, "engine": "libaio"} for r in synthetic_rows(2.0)]
    qd1_psync = [{**r, **UNREAD, "engine": "psync"} for r in synthetic_rows(2.0)
                 if r["queue_depth"] == 1 and r["request_size"] == 4096]
    points = open_loop_points(2.0)
    opened = [{**r, **UNREAD, "engine": "psync"} for r in points]
    top = points[-1]["offered_iops"]
    replayed = {**points[-1], **UNREAD, "engine": "psync", "open_loop_method": "replay",
                "offered_iops": 1.2 * top, "iops": 0.9 * top}
    d.catalog.add_measurements(DEVICE, closed + qd1_psync)
    d.catalog.add_measurements(DEVICE, [*opened, replayed])
    quick_train(d, DEVICE)
    return d.root


def answers(d: DataDir) -> list[dict[str, object]]:
    capacity_device._SOURCES.clear()  # read the measurements again
    registry = ModelRegistry(d)
    return [device_capacity(d, DEVICE, MIXES, parse_slo(s), registry=registry).to_dict() for s in SLOS]


def test_the_columns_read_give_the_answers_of_every_column(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = DataDir(home)
    files = d.catalog.measurement_files([DEVICE])[DEVICE]
    read = read_measurement_files(d.catalog.measurements_dir, files, SOURCE_COLUMNS)
    assert not set(UNREAD) & set(read.columns)
    assert {"engine", "offered_iops", "open_loop_method", "sweep_id"} <= set(read.columns)

    pruned = answers(d)
    notes = " ".join(pruned[0]["notes"])  # type: ignore[arg-type]
    # every reader had something to read: the correction, the replay ceiling, the engines
    assert "open-loop" in notes and "replay path" in notes and "libaio" in notes, notes
    monkeypatch.setattr(capacity_device, "SOURCE_COLUMNS", None)
    assert answers(d) == pruned
