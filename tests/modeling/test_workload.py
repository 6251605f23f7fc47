"""The shared workload type: validation, defaults, sizes and regions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from modeling.errors import InvalidInput
from modeling.workload import (
    REGION_NAMES,
    REGIONS,
    SIZE_STEP,
    WORKLOAD_FIELDS,
    WORKLOAD_LIMITS,
    Workload,
    format_size,
    parse_size,
    region_code,
    region_for,
)
from modeling.workload_matrix import check_matrix, workload_matrix


def basic(**overrides: object) -> dict[str, object]:
    values: dict[str, object] = {
        "write_ratio": 0.3,
        "queue_depth": 8,
        "request_size": 16384,
        "randomness": 1.0,
    }
    values.update(overrides)
    return values


def test_extended_fields_default_from_basic_ones() -> None:
    w = Workload(**basic())
    assert w.numjobs == 1
    assert (w.read_size, w.write_size) == (16384, 16384)
    assert (w.read_randomness, w.write_randomness) == (1.0, 1.0)
    assert list(w.as_row()) == list(WORKLOAD_FIELDS)


def test_explicit_extended_fields_are_kept() -> None:
    w = Workload(**basic(read_size="4k", write_size="64k", write_randomness=0, numjobs=4))
    assert (w.read_size, w.write_size, w.write_randomness, w.read_randomness) == (4096, 65536, 0, 1.0)
    assert w.outstanding_io == 32


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("write_ratio", 1.5),
        ("write_ratio", -0.1),
        ("write_ratio", "lots"),
        ("write_ratio", float("nan")),
        ("queue_depth", 0),
        ("queue_depth", 4097),
        ("queue_depth", 2.5),
        ("queue_depth", "deep"),
        ("queue_depth", True),
        ("request_size", 100),
        ("request_size", 1000),
        ("request_size", "65m"),
        ("request_size", "sixteen"),
        ("randomness", 2),
        ("numjobs", 0),
        ("numjobs", 1025),
        ("read_size", 513),
    ],
)
def test_invalid_values_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        Workload(**basic(**{field: value}))
    assert field in str(info.value)


def test_unknown_field_is_rejected() -> None:
    with pytest.raises(ValidationError, match="iodepth"):
        Workload(**basic(iodepth=4))


def test_missing_field_is_rejected() -> None:
    values = basic()
    del values["randomness"]
    with pytest.raises(ValidationError, match="randomness"):
        Workload(**values)


def test_workload_is_immutable() -> None:
    w = Workload(**basic())
    with pytest.raises(ValidationError):
        w.queue_depth = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("4096", 4096),
        ("4k", 4096),
        ("4K", 4096),
        ("4KiB", 4096),
        ("16kb", 16384),
        ("1m", 1048576),
        ("1.5m", 1572864),
        (" 2g ", 2 * 1024**3),
        (8192, 8192),
        (512.0, 512),
    ],
)
def test_parse_size(text: object, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("bad", ["", "k", "4x", "-4k", "1.3k", 1.5, None, True])
def test_parse_size_rejects_garbage(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_size(bad)


def test_format_size_round_trips() -> None:
    for size in (512, 4096, 65536, 1048576, 1536):
        assert parse_size(format_size(size)) == size


def test_eight_distinct_regions_cover_the_space() -> None:
    assert len(REGIONS) == 8 == len(set(REGION_NAMES))
    assert region_for(0.0, 1.0, 4096) == "read-random-small"
    assert region_for(1.0, 0.0, 1 << 20) == "write-sequential-large"
    assert region_for(0.5, 0.5, 32768) == "read-random-small"
    assert Workload(**basic(write_ratio=0.9, randomness=0.1, request_size="128k")).region == (
        "write-sequential-large"
    )
    for region in REGIONS:
        assert region.description


def test_from_row_ignores_metrics_and_nan_gaps() -> None:
    row = {**basic(), "numjobs": 2.0, "read_size": float("nan"), "iops": 1234.0}
    w = Workload.from_row(row)
    assert w.numjobs == 2 and w.read_size == 16384


def _schema_limits(prop: dict) -> dict:
    """min/max/multipleOf of a JSON-schema property (through a nullable anyOf)."""
    options = prop.get("anyOf", [prop])
    (typed,) = [o for o in options if o.get("type") not in ("null", "string")]  # a size may be "16k"
    return {k: typed.get(k) for k in ("minimum", "maximum", "multipleOf")}


@pytest.mark.parametrize("limit", WORKLOAD_LIMITS, ids=lambda limit: limit.name)
def test_the_type_and_the_matrix_check_enforce_the_limits_table(limit) -> None:
    schema = Workload.model_json_schema()["properties"][limit.name]
    step = SIZE_STEP if limit.kind == "size" else None
    assert _schema_limits(schema) == {"minimum": limit.low, "maximum": limit.high, "multipleOf": step}
    assert (limit.name in Workload.model_json_schema()["required"]) == limit.required
    base = {"write_ratio": 0.3, "queue_depth": 8, "request_size": 16384, "randomness": 1.0}
    too_big = limit.high + (limit.step or 0.5)
    with pytest.raises(ValidationError) as info:
        Workload(**{**base, limit.name: limit.python_type(too_big)})
    assert info.value.errors()[0]["loc"][0] == limit.name
    w = workload_matrix(pd.DataFrame([base]))
    w[0, WORKLOAD_FIELDS.index(limit.name)] = too_big
    with pytest.raises(InvalidInput, match=f"{limit.name}=") as err:
        check_matrix(w)
    assert err.value.details == {"field": limit.name, "row": 0}


def test_one_default_rule_for_the_type_and_the_matrix() -> None:
    rows = [
        {"write_ratio": 0.3, "queue_depth": 8, "request_size": 16384, "randomness": 1.0},
        {"write_ratio": 1.0, "queue_depth": 2, "request_size": 4096, "randomness": 0.0, "read_size": 8192},
    ]
    matrix = workload_matrix(pd.DataFrame(rows))
    for row, filled in zip(rows, matrix, strict=True):
        assert Workload(**row).as_row() == dict(zip(WORKLOAD_FIELDS, filled.tolist(), strict=True))


def test_region_code_is_one_rule_for_scalars_and_arrays() -> None:
    wr, rnd = np.array([0.0, 1.0, 0.5, 0.9]), np.array([1.0, 0.0, 0.5, 0.2])
    size = np.array([4096, 1 << 20, 32768, 65536])
    codes = region_code(wr, rnd, size)
    assert [REGION_NAMES[c] for c in codes] == [
        region_for(a, b, c) for a, b, c in zip(wr.tolist(), rnd.tolist(), size.tolist(), strict=True)
    ]
