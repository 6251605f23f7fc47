"""A latency target (SLO): ``"p99<=1ms"`` or several at once, ``"p99<=1ms,mean<=200us"``.

Each target names a latency statistic the open-loop method predicts (``mean`` or ``p99``),
a comparison (``<=`` or ``<``, read the same: a predicted latency is never exactly on the
line) and a duration in the one grammar of :mod:`modeling.units` (``200us``, ``1ms``,
``2s``).  The unit is required: a bare number means seconds to that grammar and
microseconds to every latency column, and a target must not depend on which one a reader
assumed.  A statistic named twice is refused:
which of the two limits was meant is not for the code to guess.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from modeling.errors import InvalidInput
from modeling.units import UnitError, parse_duration_us

STATISTICS = {"mean": "pred_latency_mean_us", "p99": "pred_latency_p99_us"}
"""The statistics a target may name, and the open-loop prediction column of each."""

_TARGET = re.compile(r"^\s*([a-z0-9]+)\s*(<=|<)\s*(\S.*?)\s*$")
_BARE_NUMBER = re.compile(r"^[0-9.]+$")


@dataclass(frozen=True)
class Target:
    """One latency limit: ``statistic`` (``mean`` or ``p99``) at most ``limit_us`` microseconds."""

    statistic: str
    limit_us: float

    @property
    def column(self) -> str:
        """The open-loop prediction column this target bounds."""
        return STATISTICS[self.statistic]

    def __str__(self) -> str:
        return f"{self.statistic}<={format_us(self.limit_us)}"


@dataclass(frozen=True)
class Slo:
    """One or more latency targets that must all hold."""

    targets: tuple[Target, ...]

    def __str__(self) -> str:
        return ",".join(str(t) for t in self.targets)


def format_us(value_us: float, digits: int = 6) -> str:
    """A latency in the largest unit that keeps it at least 1 (``1ms``, ``200us``, ``1.5s``), to
    ``digits`` significant digits (6, the default, reads back exactly as a target's limit)."""
    if not math.isfinite(value_us):
        return "unbounded"
    for unit, scale in (("s", 1e6), ("ms", 1e3)):
        if value_us >= scale:
            return f"{value_us / scale:.{digits}g}{unit}"
    return f"{value_us:.{digits}g}us"


def parse_target(text: str) -> Target:
    """One target, ``p99<=1ms``; ``InvalidInput`` naming what is wrong."""
    m = _TARGET.match(text.lower())
    if not m:
        raise InvalidInput(f"not a latency target: {text.strip()!r} (use e.g. p99<=1ms or mean<=200us)",
                           details={"field": "slo"})
    stat, _, duration = m.groups()
    if stat not in STATISTICS:
        known = " and ".join(STATISTICS)
        raise InvalidInput(f"cannot target {stat!r}: the open-loop method predicts {known}",
                           details={"field": "slo"})
    if _BARE_NUMBER.match(duration):
        raise InvalidInput(f"give the limit a unit in {text.strip()!r}: e.g. {duration}us or {duration}ms",
                           details={"field": "slo"})
    try:
        limit = parse_duration_us(duration)
    except UnitError as exc:
        raise InvalidInput(f"{exc} in the target {text.strip()!r}", details={"field": "slo"}) from None
    if not limit > 0:
        raise InvalidInput(f"a latency target must be positive: {text.strip()!r}", details={"field": "slo"})
    return Target(stat, limit)


def parse_slo(text: str) -> Slo:
    """Comma-separated targets that must all hold: ``"p99<=1ms,mean<=200us"``."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise InvalidInput("give at least one latency target, e.g. p99<=1ms", details={"field": "slo"})
    targets = tuple(parse_target(p) for p in parts)
    stats = [t.statistic for t in targets]
    twice = sorted({s for s in stats if stats.count(s) > 1})
    if twice:
        raise InvalidInput(f"{', '.join(twice)} is targeted twice in {text!r}: give each statistic once",
                           details={"field": "slo"})
    return Slo(targets)
