"""Synthetic open-loop traces with known truth: Poisson or bursty (H2) arrivals at a set rate.

The truth of such a trace is what generated it: the offered rate, the inter-arrival
burstiness (squared coefficient of variation ``ca^2``: 1 for Poisson, more for the
two-phase hyper-exponential H2 that fits real storage traces best, per Wajahat et al.
2020), the read/write mix, the request size and the randomness.  Written as fio iolog v3,
one of the supported formats, so they go through the same parse, predict and replay path
as any user trace.  ``load_levels`` sets rates as fractions of the device's capacity at
the trace's mix (20, 50, 80, 95 and 120 % by default), so the open-loop method is tested
from light load to beyond saturation.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from modeling.errors import InvalidInput
from traces.chunks import TraceChunk
from traces.replay.iolog import write_iolog

LOAD_LEVELS = (0.2, 0.5, 0.8, 0.95, 1.2)
PROCESSES = ("poisson", "h2")
H2_CV2 = 4.0


def interarrivals(
    n: int, rate: float, process: str, rng: np.random.Generator, cv2: float = H2_CV2
) -> np.ndarray:
    """``n`` inter-arrival times of mean ``1 / rate``: exponential, or H2 with balanced means."""
    if rate <= 0 or n < 1:
        raise InvalidInput("a synthetic trace needs a positive rate and at least one request")
    if process == "poisson":
        return rng.exponential(1 / rate, n)
    if process == "h2":
        if cv2 <= 1:
            raise InvalidInput("an H2 process needs a squared coefficient of variation above 1")
        # balanced means (p1/mu1 = p2/mu2): the standard two-moment H2 fit
        p1 = 0.5 * (1 + math.sqrt((cv2 - 1) / (cv2 + 1)))
        mu = np.where(rng.random(n) < p1, 2 * p1 * rate, 2 * (1 - p1) * rate)
        return rng.exponential(1 / mu)
    raise InvalidInput(f"unknown arrival process {process!r}; use one of {', '.join(PROCESSES)}")


@dataclass(frozen=True)
class SyntheticSpec:
    """What a synthetic trace is made of (its known truth)."""

    rate: float
    duration_s: float
    process: str = "poisson"
    write_ratio: float = 0.0
    size: int = 4096
    randomness: float = 1.0
    span: int = 64 * 1024 * 1024
    seed: int = 0
    load: float | None = None  # the fraction of capacity the rate was set at, when it was

    @property
    def cv2(self) -> float:
        """The arrival process's squared coefficient of variation."""
        return 1.0 if self.process == "poisson" else H2_CV2

    @property
    def name(self) -> str:
        """A file name stem that says what the trace is."""
        mix = f"w{round(self.write_ratio * 100)}"
        load = f"-u{round(self.load * 100)}" if self.load is not None else f"-{self.rate:.0f}iops"
        return f"{self.process}-{mix}-{self.size // 1024}k{load}-s{self.seed}"


def generate(spec: SyntheticSpec) -> TraceChunk:
    """The requests of a synthetic trace."""
    rng = np.random.default_rng(spec.seed)
    n = max(int(round(spec.rate * spec.duration_s)), 2)
    t = np.cumsum(interarrivals(n, spec.rate, spec.process, rng))
    t -= t[0]
    is_write = rng.random(n) < spec.write_ratio
    blocks = spec.span // spec.size
    off = rng.integers(0, blocks, n)
    seq = rng.random(n) >= spec.randomness
    for write in (False, True):  # sequential requests follow the previous one of their direction
        idx = np.flatnonzero(is_write == write)
        for j in range(1, len(idx)):
            if seq[idx[j]]:
                off[idx[j]] = (off[idx[j - 1]] + 1) % blocks
    return TraceChunk.build(t, is_write, off * spec.size, np.full(n, spec.size))


def write_synthetic(spec: SyntheticSpec, folder: Path) -> tuple[Path, dict[str, Any]]:
    """Write a synthetic trace as fio iolog v3 (and its truth beside it); return both."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{spec.name}.iolog"
    write_iolog(generate(spec), "/dev/synthetic", path)
    truth = {**asdict(spec), "cv2": spec.cv2, "name": spec.name}
    return path, truth


def load_levels(
    capacity: float,
    *,
    levels: tuple[float, ...] = LOAD_LEVELS,
    duration_s: float = 2.0,
    process: str = "poisson",
    write_ratio: float = 0.0,
    size: int = 4096,
    seed: int = 0,
) -> list[SyntheticSpec]:
    """One spec per load level: the rate is ``level x capacity`` at that mix and size."""
    if not capacity > 0:
        raise InvalidInput("capacity must be positive")
    return [
        SyntheticSpec(
            level * capacity, duration_s, process, write_ratio, size, 1.0, seed=seed + i, load=level
        )
        for i, level in enumerate(levels)
    ]
