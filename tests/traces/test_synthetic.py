"""Synthetic open-loop traces: the characterisation finds the truth they were made with."""

from __future__ import annotations

from pathlib import Path

import pytest

from modeling.errors import InvalidInput
from traces.characterize import characterize
from traces.synthetic import SyntheticSpec, load_levels, write_synthetic


@pytest.mark.parametrize("process,cv2", [("poisson", 1.0), ("h2", 4.0)])
def test_synthetic_trace_has_its_rate_mix_and_burstiness(tmp_path: Path, process: str, cv2: float) -> None:
    spec = SyntheticSpec(20_000, 2.0, process, write_ratio=0.3, size=16384, randomness=1.0, seed=4)
    path, truth = write_synthetic(spec, tmp_path)
    assert truth["cv2"] == cv2 and path.suffix == ".iolog"
    char = characterize(str(path), window_s=2.0)
    assert char.summary["format"].startswith("fio")
    s = char.summary
    assert s["measured"]["iops"] == pytest.approx(20_000, rel=0.05)
    assert s["workload"]["write_ratio"] == pytest.approx(0.3, abs=0.02)
    assert s["workload"]["request_size"] == 16384 and s["workload"]["randomness"] > 0.99
    assert char.windows["arrival_cv2"].iloc[0] == pytest.approx(cv2, rel=0.15)


def test_sequential_synthetic_trace() -> None:
    from traces.synthetic import generate

    c = generate(SyntheticSpec(1000, 1.0, randomness=0.0, size=4096))
    assert ((c.offset[1:] - c.offset[:-1]) == 4096).mean() > 0.95


def test_load_levels() -> None:
    specs = load_levels(10_000, duration_s=1.0, process="h2")
    assert [s.rate for s in specs] == pytest.approx([2000, 5000, 8000, 9500, 12000])
    assert [s.load for s in specs] == [0.2, 0.5, 0.8, 0.95, 1.2] and specs[0].name.startswith("h2-w0-4k-u20")
    with pytest.raises(InvalidInput):
        load_levels(0)
    with pytest.raises(InvalidInput):
        write_synthetic(SyntheticSpec(100, 1.0, "pareto"), Path("/tmp"))
