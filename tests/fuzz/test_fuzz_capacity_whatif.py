"""Fuzzing the inputs of this round's new entry points (issue 25, fuzz): capacity's SLO and
mix grammars and what-if device specs.  Any input is parsed or refused with a domain error;
never another exception (an OverflowError on a 400-digit number, a KeyError on a missing
field...)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modeling.derived.spec import law_of, parse_spec
from modeling.errors import SsdPredictError
from tests.fuzz.conftest import FUZZ
from traces.capacity.device import parse_mix
from traces.capacity.slo import parse_slo

pytestmark = pytest.mark.slow  # run by `make test-slow` (and CI), not by `make test`

NUMBERS = st.one_of(
    st.sampled_from(["0", "-1", "1e400", "nan", "inf", "-inf", "1" + "0" * 400, "0.5", "4k", "1MiB", "",
                     " "]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
)
STATS = st.sampled_from(["p99", "p50", "mean", "p99.9", "max", "P99", "", "p"])
OPS = st.sampled_from(["<=", "<", "=", ">=", ""])
UNITS = st.sampled_from(["ms", "us", "s", "ns", "", "min", "µs"])
TARGET = st.tuples(STATS, OPS, NUMBERS, UNITS).map("".join)
SLOS = st.one_of(st.lists(TARGET, min_size=0, max_size=3).map(",".join), st.text(max_size=40))
KEYS = st.sampled_from(["write_ratio", "request_size", "randomness", "numjobs", "queue_depth", "read_size",
                        "bogus", ""])
MIXES = st.one_of(
    st.lists(st.tuples(KEYS, NUMBERS).map(lambda kv: f"{kv[0]}={kv[1]}"), max_size=5).map(",".join),
    st.text(max_size=40),
)
VALUES: st.SearchStrategy[Any] = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.lists(st.integers(), max_size=3),
)
SPECS = st.one_of(
    st.dictionaries(st.sampled_from(["kind", "base", "level", "members", "chunk", "transport",
                                     "added_latency_us", "link_gbps", "target_iops", "ceiling_iops",
                                     "ceiling_mib_s", "x"]), VALUES, max_size=8),
    st.fixed_dictionaries({"kind": st.sampled_from(["raid", "fabric"]),
                           "base": st.sampled_from(["nvme0", "a b"])},
                          optional={"level": VALUES, "members": VALUES, "chunk": VALUES, "transport":
                                    st.sampled_from(["tcp", "rdma", "x"]), "added_latency_us": VALUES,
                                    "link_gbps": VALUES, "target_iops": VALUES}),
    VALUES,
)


@FUZZ
@given(text=SLOS)
def test_any_slo_is_parsed_or_refused(text: str) -> None:
    try:
        slo = parse_slo(text)
    except SsdPredictError:
        return
    assert all(math.isfinite(t.limit_us) and t.limit_us > 0 for t in slo.targets), slo


@FUZZ
@given(text=MIXES)
def test_any_mix_is_parsed_or_refused(text: str) -> None:
    try:
        mix = parse_mix(text)
    except SsdPredictError:
        return
    assert all(not isinstance(v, float) or math.isfinite(v) for v in mix.values()), mix


@FUZZ
@given(spec=SPECS)
def test_any_whatif_spec_is_checked_or_refused(spec: Any) -> None:
    try:
        checked = parse_spec(spec)
    except SsdPredictError:
        return
    law_of(checked)  # a checked spec always builds its law
