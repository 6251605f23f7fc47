"""One size and duration grammar (modeling.units): what it reads, what it refuses."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import BaseModel, ValidationError, field_validator

from modeling.errors import InvalidInput
from modeling.units import (
    format_duration_ms,
    format_size,
    parse_duration,
    parse_duration_ms,
    parse_duration_us,
    parse_size,
)


@pytest.mark.parametrize(("text", "size"), [
    ("512", 512), ("4k", 4096), ("4K", 4096), ("4KiB", 4096), ("4kb", 4096), (" 4 KiB ", 4096),
    ("1MiB", 1 << 20), ("1m", 1 << 20), ("1.5k", 1536), ("2g", 2 << 30), (4096, 4096), (8192.0, 8192),
])
def test_sizes(text: str | int | float, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("bad", ["", "4x", "k", "4 kk", "-4k", "0.3", "1.0001k", True, None, 1.5])
def test_bad_sizes_are_invalid_input_and_value_errors(bad: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_size(bad)
    assert isinstance(caught.value, ValueError)  # so pydantic validators report a field error
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("text", "seconds"), [
    ("1ms", 1e-3), ("200us", 200e-6), ("2s", 2.0), ("1.5m", 90.0), ("1min", 60.0), ("1h", 3600.0),
    ("10", 10.0), (" 500 MS ", 0.5), (2, 2.0), (0.25, 0.25), ("0s", 0.0),
])
def test_durations_in_seconds(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "us"), [("1ms", 1000.0), ("200us", 200.0), ("2s", 2e6), ("0.5ms", 500.0)])
def test_durations_in_microseconds(text: str, us: float) -> None:
    assert parse_duration_us(text) == pytest.approx(us)


@pytest.mark.parametrize(("text", "ms"), [
    ("500ms", 500), ("1s", 1000), ("1.5s", 1500), ("0.3s", 300), ("2m", 120_000), (2, 2000),
    ("1h", 3_600_000),
    ("3000us", 3),
])
def test_durations_in_whole_milliseconds(text: str | int, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("bad", ["", "fast", "-1s", "1d", "1.0001ms", "500us", float("nan"), -1, True])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(InvalidInput):
        parse_duration_ms(bad)


@pytest.mark.parametrize("parse", [parse_duration, parse_duration_us])
def test_a_duration_that_overflows_is_refused(parse: Callable[[str], float]) -> None:
    with pytest.raises(InvalidInput, match="too large"):
        parse("1" + "0" * 400 + "ms")


def test_formats_read_back() -> None:
    for size in (512, 1536, 4096, 1 << 20, 3 << 30):
        assert parse_size(format_size(size)) == size
    for ms in (1, 500, 1000, 1500, 60_000):
        assert parse_duration_ms(format_duration_ms(ms)) == ms


def test_a_pydantic_field_using_the_grammar_reports_the_field() -> None:
    class Slo(BaseModel):
        threshold_us: float

        @field_validator("threshold_us", mode="before")
        @classmethod
        def _duration(cls, value: str) -> float:
            return parse_duration_us(value)

    assert Slo(threshold_us="1ms").threshold_us == 1000.0
    with pytest.raises(ValidationError, match="threshold_us"):
        Slo(threshold_us="soon")
