"""The reference devices (zram, loop over tmpfs, file) and replays that respect their sector size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from collectors.devices.reference import (
    create_reference,
    destroy_reference,
    list_references,
    logical_block_size,
)
from modeling.errors import InvalidInput, NotFound
from modeling.store import DataDir
from traces.chunks import TraceChunk
from traces.replay.iolog import remap
from traces.replay.run import replay

MIB = 1 << 20


def _msr_512(path: Path, n: int = 400) -> Path:
    """An MSR Cambridge trace with 512-byte aligned offsets and sizes, 2,000 IO/s."""
    rng = np.random.default_rng(5)
    t0 = 128166372000000000
    rows = []
    for i in range(n):
        op = "Write" if rng.random() < 0.3 else "Read"
        offset, size = int(rng.integers(0, 1 << 24)) * 512, 512 * int(rng.integers(1, 17))
        rows.append(f"{t0 + i * 5000},hm,1,{op},{offset},{size},0")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_remap_aligns_to_the_block_size() -> None:
    off, size = np.array([512, 1536, 4097]), np.array([512, 1024, 3000])
    c = TraceChunk.build(np.arange(3.0), np.zeros(3, bool), off, size)
    out, fit = remap(c, 16 * MIB, 4096)
    assert (out.offset % 4096 == 0).all() and (out.size == 4096).all()
    assert (fit.resized, fit.bytes_added) == (3, 4096 * 3 - 4536)
    assert (remap(c, 16 * MIB)[0].offset % 512 == 0).all()


@pytest.mark.parametrize("kind", ["zram", "loop"])
def test_reference_device_replays_a_512_byte_msr_trace(tmp_path: Path, kind: str, fio_available: str) -> None:
    d = DataDir(tmp_path / "home")
    try:
        ref = create_reference(d, kind, 32 * MIB)
    except InvalidInput as exc:
        pytest.skip(f"no {kind} here: {exc}")
    try:
        assert ref.kind == kind and Path(ref.path).is_block_device()
        assert logical_block_size(ref.path) == ref.logical_block_size == (4096 if kind == "zram" else 512)
        assert list_references(d) == [ref]
        result = replay(_msr_512(tmp_path / "t.csv"), ref.path, destroy_data=True, window_s=0.1, lanes=4)
        assert result.requests == 400 and result.windows["replay_requests"].sum() == 400
        assert (result.windows["latency_mean_us"] > 0).all()
    finally:
        destroy_reference(d, ref.path)
    assert list_references(d) == []
    name = Path(ref.path).name
    if kind == "zram":
        assert not Path(ref.path).exists()  # hot_remove takes the node away
    else:  # a detached loop device keeps its node but loses its backing file
        assert not Path(f"/sys/block/{name}/loop/backing_file").exists()
        assert not Path(str(ref.backing)).exists()


def test_file_reference_and_refusals(tmp_path: Path) -> None:
    d = DataDir(tmp_path / "home")
    ref = create_reference(d, "file", 16 * MIB)
    assert ref.kind == "file" and Path(ref.path).stat().st_size == 16 * MIB and "noisy" in ref.note
    destroy_reference(d, ref.path)
    assert not Path(ref.path).exists()
    with pytest.raises(NotFound):
        destroy_reference(d, "/dev/zram0")  # not made here: never touched
    with pytest.raises(InvalidInput):
        create_reference(d, "tape")
    with pytest.raises(InvalidInput):
        create_reference(d, "file", 1000)
