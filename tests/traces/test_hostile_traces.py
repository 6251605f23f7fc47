"""Hostile trace fields (issue 12, item 12): overflowing offsets, infinite or negative times,
zero sizes and non-numeric latencies are refused with their position, by every parser and
through ``POST /v1/devices/{d}/validate`` (a 422, never a 500)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from modeling.errors import TraceFormatError
from modeling.store import DataDir
from service.api.main import create_app
from service.config import get_settings
from tests.traces.helpers import DATA
from traces.formats.blktrace import HEADER, header_dtype
from traces.formats.reader import open_trace

HUGE = "99999999999999999999999"
BLKPARSE_LINE = "259,0    1        2     {t} 21279  Q  RA {sector} + {n} [fio]"
MSR_ROW = "128166372003061629,hm,1,Read,7014609920,{size},{rt}"
GENERIC = "timestamp_s,op,offset,size,latency_us\n0.0,read,0,4096,100\n{row}\n"

CASES = {
    "iolog-v3-huge-offset": ("fio", f"fio version 3 iolog\n0 /dev/sdb add\n100 /dev/sdb read {HUGE} 4096\n",
                             "line 3: offset"),
    "iolog-v3-huge-length": ("fio", f"fio version 3 iolog\n100 /dev/sdb read 0 {HUGE}\n", "line 2: length"),
    "iolog-v3-infinite-time": ("fio", "fio version 3 iolog\n" + "9" * 400 + " /dev/sdb read 0 4096\n",
                               "line 2: timestamp"),
    "iolog-v3-time-before-start": ("fio", "fio version 3 iolog\n100 /dev/sdb read 0 4096\n"
                                   "50 /dev/sdb read 0 4096\n", "line 3: timestamp"),
    "iolog-v2-zero-length": ("fio", "fio version 2 iolog\n/dev/sdb add\n/dev/sdb read 0 0\n",
                             "line 3: request size 0"),
    "iolog-v2-infinite-wait": ("fio", "fio version 2 iolog\n/dev/sdb wait " + "9" * 400 + " 0\n"
                               "/dev/sdb read 0 4096\n", "line 2: wait"),
    "blkparse-huge-sector": ("blkparse", BLKPARSE_LINE.format(t="0.000000184", sector=10**23, n=8) + "\n",
                             "line 1: sector"),
    "blkparse-huge-size": ("blkparse", BLKPARSE_LINE.format(t="0.000000184", sector=8, n=10**23) + "\n",
                           "line 1: size"),
    "blkparse-infinite-time": ("blkparse", BLKPARSE_LINE.format(t="9" * 400 + ".0", sector=8, n=8) + "\n",
                               "line 1: time"),
    "msr-infinite-response": ("msr", MSR_ROW.format(size=4096, rt="inf") + "\n", "line 1: response time"),
    "msr-negative-response": ("msr", MSR_ROW.format(size=4096, rt="-5") + "\n", "line 1: response time"),
    "msr-zero-size": ("msr", MSR_ROW.format(size=0, rt=10) + "\n", "line 1: request size 0"),
    "msr-huge-size": ("msr", MSR_ROW.format(size=HUGE, rt=10) + "\n", "line 1: size"),
    "spc-huge-lba": ("spc", f"0,{HUGE},4096,r,0.0\n", "line 1: lba"),
    "spc-negative-time": ("spc", "0,8,4096,r,-2.0\n", "line 1: timestamp"),
    "disksim-negative-time": ("disksim", "0.0 0 8 8 1\n-2000 0 8 8 1\n", "line 2: timestamp"),
    "mqsim-huge-sector": ("mqsim", f"0 0 {HUGE} 8 1\n", "line 1: sector"),
    "mqsim-zero-sizes": ("mqsim", "0 0 8 0 1\n10 0 16 0 1\n", "line 1: request size 0"),
    "generic-negative-time": ("csv", GENERIC.format(row="-2.0,read,0,4096,100"), "line 3: timestamp"),
    "generic-infinite-time": ("csv", GENERIC.format(row="inf,read,0,4096,100"), "line 3: timestamp"),
    # finite but past int64 window numbers (found by the fuzz suite at 1000 examples)
    "generic-huge-time": ("csv", GENERIC.format(row="1e30,read,0,4096,100"), "line 3: timestamp"),
    "iolog-v3-huge-time": ("fio", "fio version 3 iolog\n0 /dev/sdb read 0 4096\n"
                           f"{HUGE} /dev/sdb read 0 4096\n", "line 3: timestamp"),
    "generic-latency-abc": ("csv", GENERIC.format(row="0.1,read,0,4096,abc"), "line 3"),
    # one rule for every non-finite value (issue 25, item 5): NaN is refused like inf
    "generic-nan-latency": ("csv", GENERIC.format(row="0.1,read,0,4096,nan"),
                            "line 3: latency_us nan is not"),
    "generic-NaN-latency": ("csv", GENERIC.format(row="0.1,read,0,4096,NaN"),
                            "line 3: latency_us NaN is not"),
    "generic-inf-latency": ("csv", GENERIC.format(row="0.1,read,0,4096,inf"), "line 3: latency"),
    "generic-nan-complete": ("csv", "timestamp_s,op,offset,size,complete_s\n0.0,read,0,4096,nan\n",
                             "line 2: complete_s nan is not"),
    "generic-NA-latency": ("csv", GENERIC.format(row="0.1,read,0,4096,NA"), "line 3"),
    "msr-nan-response": ("msr", MSR_ROW.format(size=4096, rt="nan") + "\n",
                         "line 1: response_time nan is not"),
    "spc-nan-time": ("spc", "0,8,4096,r,nan\n", "line 1: timestamp nan is not"),
    "generic-negative-latency": ("csv", GENERIC.format(row="0.1,read,0,4096,-7"), "line 3: latency"),
    "generic-fractional-offset": ("csv", GENERIC.format(row="0.1,read,0.5,4096,7"), "line 3: offset"),
    "generic-unknown-op-after-blank": (
        "csv", "timestamp_s,op,offset,size\n0.0,read,0,4096\n\n0.1,zap,0,4096\n", "line 4: unknown operation"
    ),
    "generic-end-past-2**63": ("csv", GENERIC.format(row=f"0.1,read,{2**63 - 4096},8192,7"), "line 3"),
}


@pytest.mark.parametrize("fmt,text,where", CASES.values(), ids=CASES.keys())
def test_bad_field_is_refused_with_its_position(tmp_path: Path, fmt: str, text: str, where: str) -> None:
    path = tmp_path / "t.trace"
    path.write_text(text)
    with pytest.raises(TraceFormatError) as info:
        open_trace(path, fmt).read_all()
    assert f"{path}: {where}" in str(info.value)


def _blktrace_with(tmp_path: Path, field: str, value: int) -> Path:
    data = bytearray((DATA / "sample.blktrace.0").read_bytes())
    hdr = np.frombuffer(bytes(data[:HEADER]), dtype=header_dtype("<"))[0]
    second = HEADER + int(hdr["pdu_len"])  # the second record
    record = np.frombuffer(bytes(data[second : second + HEADER]), dtype=header_dtype("<")).copy()
    record[field] = value
    data[second : second + HEADER] = record.tobytes()
    path = tmp_path / "t.trace"
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize(
    "field,value,why",
    [("sector", 2**63, "sector"), ("time", 2**64 - 1, "time"), ("time", 0, "before the file's first event")],
)
def test_blktrace_bad_record_is_refused_with_its_byte_offset(
    tmp_path: Path, field: str, value: int, why: str
) -> None:
    path = _blktrace_with(tmp_path, field, value)
    with pytest.raises(TraceFormatError, match=rf"byte \d+: .*{why}"):
        open_trace(path, "blktrace").read_all()


def test_generic_csv_empty_latency_still_means_unknown(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(GENERIC.format(row="0.1,read,0,4096,"))
    chunk = open_trace(path, "csv").read_all()
    assert len(chunk) == 2 and np.isnan(chunk.latency_s[1]) and chunk.latency_s[0] == 1e-4


@pytest.mark.parametrize("fmt,text,where", CASES.values(), ids=CASES.keys())
def test_validate_route_answers_422_not_500(trained: DataDir, fmt: str, text: str, where: str) -> None:
    client = TestClient(create_app(get_settings()), raise_server_exceptions=False)
    res = client.post(
        "/v1/devices/synth/validate",
        files={"file": ("t.trace", text.encode())},
        data={"format": fmt, "window_s": "0.1"},
    )
    assert res.status_code == 422, res.text
    error = res.json()["error"]
    assert error["code"] == "bad_trace" and where.split(":")[0] in error["message"]
