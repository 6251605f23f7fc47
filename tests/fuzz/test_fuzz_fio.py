"""Fuzzing the fio JSON parser: real results with random values put at random places, and
random text.  Every input gives a valid result or a FioOutputError; nothing else."""

from __future__ import annotations

import pytest

import copy
import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from collectors.fio.results import parse_fio_output
from collectors.metric_values import MAX_METRIC
from modeling.errors import FioOutputError
from modeling.workload import METRICS
from tests.conftest import TEST_DATA
from tests.fuzz.conftest import FUZZ

pytestmark = pytest.mark.slow  # run by `make test-slow` (and CI), not by `make test`

DOCS = [
    json.loads(p.read_text())
    for p in (
        TEST_DATA / "fio" / "INTEL_D3_S4610" / "randread-16-8.json",
        TEST_DATA / "fio" / "P420i_SAMSUNG860_RW" / "randrw-4-2.json",
    )
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(
        [0, -1, 1e308, -1e308, 1e15, "abc", "", "4k", "randrw", "1,2", "99999999999999999999999"]
    ),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            out += _paths(child, (*prefix, i))
    return out


def _put(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


def _check(text: str) -> None:
    try:
        results = parse_fio_output(text, source="fuzz.json")
    except FioOutputError as exc:
        assert str(exc).startswith("fuzz.json: ")
        return
    for result in results:
        for metric in METRICS:
            value = result.row[metric]
            assert math.isnan(value) or 0 < value < MAX_METRIC, (metric, value)
        assert 0 < result.row["iops"] and 0 < result.row["bandwidth_mib_s"]


@FUZZ
@given(st.sampled_from(range(len(DOCS))), st.data(), st.lists(values, min_size=1, max_size=3))
def test_real_results_with_random_values_anywhere(which: int, data: st.DataObject, new: list[Any]) -> None:
    doc = copy.deepcopy(DOCS[which])
    for value in new:
        path = data.draw(st.sampled_from(_paths(doc)))
        doc = _put(doc, path, value)
    _check(json.dumps(doc))


@FUZZ
@given(st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")))
def test_random_text(text: str) -> None:
    _check(text)


@FUZZ
@given(st.integers(min_value=1, max_value=200_000), st.sampled_from(["[", '{"a":', '[{"jobs":']))
def test_deep_nesting(depth: int, opener: str) -> None:
    _check('{"jobs": ' + opener * depth)
