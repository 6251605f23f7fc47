"""Fuzzing every trace parser: lines built from valid and hostile fields per format, byte
flips of a real blktrace capture, and random bytes.  Every input gives requests that pass
the shared field checks, or a domain error (TraceFormatError, NoData); never a traceback.
The characterisation behind ``POST /v1/devices/{d}/validate`` runs on each as well."""

from __future__ import annotations

import pytest

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from modeling.errors import SsdPredictError
from tests.fuzz.conftest import FUZZ
from tests.traces.helpers import DATA
from traces.characterize import characterize
from traces.formats.blktrace import HEADER, header_dtype
from traces.formats.fields import MAX_SPAN_S
from traces.formats.reader import open_trace

pytestmark = [
    pytest.mark.slow,  # run by `make test-slow` (and CI), not by `make test`
    # a float cast to int64 out of range is silent garbage (a window at -9.2e18 s): a failure here
    pytest.mark.filterwarnings("error:invalid value encountered in cast:RuntimeWarning"),
]

_DIR = Path(tempfile.mkdtemp(prefix="ssdpredict-fuzz-traces-"))
HOSTILE = [
    "",
    "-1",
    "-2.0",
    "0",
    "inf",
    "nan",
    "abc",
    "1e400",
    "9" * 30,
    "99999999999999999999999",
    str(2**63),
    str(2**63 - 1),
    "1.5",
    "+4",
    "\u0661",
    " ",
]
ints = st.integers(min_value=0, max_value=10**6).map(str)
floats = st.floats(min_value=0, max_value=1e4, allow_nan=False).map(lambda f: f"{f:.6f}")


def field(good: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(good, good, good, st.sampled_from(HOSTILE))


def _lines(draw: st.DrawFn, make: st.SearchStrategy[str], header: str = "") -> str:
    lines = draw(st.lists(make, min_size=0, max_size=12))
    return header + "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@st.composite
def blkparse(draw: st.DrawFn) -> str:
    line = st.builds(
        lambda t, a, rw, s, n: f"259,0    1        2     {t} 21279  {a}  {rw} {s} + {n} [fio]",
        field(floats),
        st.sampled_from(["Q", "C", "D", "G", "A"]),
        st.sampled_from(["R", "W", "RA", "WS", "FWS", "D"]),
        field(ints),
        field(st.sampled_from(["8", "16", "0", "256"])),
    )
    return _lines(draw, line)


@st.composite
def fio_iolog(draw: st.DrawFn) -> str:
    version = draw(st.sampled_from([2, 3]))
    act = st.sampled_from(["read", "write", "trim", "wait", "sync"])
    if version == 3:
        line = st.builds(
            lambda t, a, o, n: f"{t} /dev/sdb {a} {o} {n}", field(ints), act, field(ints), field(ints)
        )
    else:
        line = st.builds(lambda a, o, n: f"/dev/sdb {a} {o} {n}", act, field(ints), field(ints))
    return _lines(draw, line | st.just("/dev/sdb add"), f"fio version {version} iolog\n")


@st.composite
def msr(draw: st.DrawFn) -> str:
    line = st.builds(
        lambda t, ty, o, n, r: f"{t},hm,1,{ty},{o},{n},{r}",
        field(st.integers(10**17, 10**17 + 10**9).map(str)),
        st.sampled_from(["Read", "Write", "Trim"]),
        field(ints),
        field(ints),
        field(ints),
    )
    return _lines(draw, line)


@st.composite
def spc(draw: st.DrawFn) -> str:
    line = st.builds(
        lambda lba, n, op, t: f"0,{lba},{n},{op},{t}",
        field(ints),
        field(ints),
        st.sampled_from(["r", "w", "x"]),
        field(floats),
    )
    return _lines(draw, line)


@st.composite
def five_field(draw: st.DrawFn) -> str:
    line = st.builds(
        lambda t, s, n, k: f"{t} 0 {s} {n} {k}",
        field(floats),
        field(ints),
        field(ints),
        st.sampled_from(["0", "1", "2"]),
    )
    return _lines(draw, line)


@st.composite
def generic(draw: st.DrawFn) -> str:
    extra = draw(st.sampled_from(["", ",latency_us", ",complete_s"]))
    line = st.builds(
        lambda t, op, o, n, lat: f"{t},{op},{o},{n}" + (f",{lat}" if extra else ""),
        field(floats),
        st.sampled_from(["read", "write", "W", "trim", "x"]),
        field(ints),
        field(ints),
        field(floats),
    )
    return _lines(draw, line, f"timestamp_s,op,offset,size{extra}\n")


BLK = (DATA / "sample.blktrace.0").read_bytes()
_first = np.frombuffer(BLK[:HEADER], dtype=header_dtype("<"))[0]
BLK_HEAD = BLK[: 40 * (HEADER + int(_first["pdu_len"]))]  # about 40 records


@st.composite
def blktrace(draw: st.DrawFn) -> bytes:
    data = bytearray(BLK_HEAD)
    for _ in range(draw(st.integers(1, 6))):
        pos = draw(st.integers(0, len(data) - 1))
        data[pos] = draw(st.integers(0, 255))
    return bytes(data[: draw(st.integers(HEADER, len(data)))])


def _check(content: str | bytes, fmt: str) -> None:
    path = _DIR / "t.trace"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    try:
        chunk = open_trace(path, fmt).read_all()
    except SsdPredictError:
        return
    assert np.isfinite(chunk.time_s).all() and (chunk.time_s >= 0).all() and (chunk.time_s < MAX_SPAN_S).all()
    assert (chunk.size > 0).all() and (chunk.offset >= 0).all()
    assert (np.isnan(chunk.latency_s) | (chunk.latency_s >= 0)).all()
    for window in ({"window_s": 0.5}, {"window_s": None, "window_requests": 3}):
        try:
            characterize(str(path), fmt, **window)  # type: ignore[arg-type]
        except SsdPredictError:
            pass


FORMATS = {
    "blkparse": blkparse(),
    "fio": fio_iolog(),
    "msr": msr(),
    "spc": spc(),
    "mqsim": five_field(),
    "disksim": five_field(),
    "csv": generic(),
    "blktrace": blktrace(),
}


@FUZZ
@given(st.data())
def test_blkparse(data: st.DataObject) -> None:
    _check(data.draw(FORMATS["blkparse"]), "blkparse")


@FUZZ
@given(st.data())
def test_fio_iolog(data: st.DataObject) -> None:
    _check(data.draw(FORMATS["fio"]), "fio")


@FUZZ
@given(st.data())
def test_msr(data: st.DataObject) -> None:
    _check(data.draw(FORMATS["msr"]), "msr")


@FUZZ
@given(st.data())
def test_spc(data: st.DataObject) -> None:
    _check(data.draw(FORMATS["spc"]), "spc")


@FUZZ
@given(st.data())
def test_mqsim(data: st.DataObject) -> None:
    _check(data.draw(FORMATS["mqsim"]), "mqsim")


@FUZZ
@given(st.data())
def test_disksim(data: st.DataObject) -> None:
    _check(data.draw(FORMATS["disksim"]), "disksim")


@FUZZ
@given(st.data())
def test_generic_csv(data: st.DataObject) -> None:
    _check(data.draw(FORMATS["csv"]), "csv")


@FUZZ
@given(st.data())
def test_blktrace_binary(data: st.DataObject) -> None:
    _check(data.draw(FORMATS["blktrace"]), "blktrace")


@FUZZ
@given(st.one_of(*FORMATS.values(), st.binary(max_size=400)))
def test_auto_detection_on_anything(content: str | bytes) -> None:
    _check(content, "auto")
