"""Every parser on real or documented-format fixtures, including corrupt and truncated input."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from modeling.errors import TraceFormatError
from traces.formats.blktrace import HEADER, header_dtype
from traces.formats.reader import detect_format, open_trace
from tests.traces.helpers import DATA

BLK = DATA / "sample.blktrace.0"


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("sample.blktrace.0", "blktrace"),
        ("sample.blkparse.txt", "blkparse"),
        ("tpcc-small.trace", "mqsim"),
        ("wsrch-small.trace", "mqsim"),
        ("msr-sample.csv", "msr"),
        ("spc-sample.csv", "spc"),
        ("fio-v2.iolog", "fio"),
        ("fio-v3.iolog", "fio"),
        ("generic.csv", "csv"),
    ],
)
def test_auto_detects_each_format(name: str, fmt: str) -> None:
    assert detect_format(DATA / name) == fmt


def test_blktrace_binary_matches_blkparse_of_the_same_capture() -> None:
    binary = open_trace(BLK).read_all()
    text = open_trace(DATA / "sample.blkparse.txt").read_all()
    # The blkparse fixture holds the first 700 event lines (100 requests).
    n = len(text)
    assert len(binary) == 963 and n == 100
    assert not binary.is_write.any() and set(binary.size.tolist()) == {4096}
    np.testing.assert_array_equal(binary.offset[:n], text.offset)
    np.testing.assert_allclose(binary.time_s[:n], text.time_s, atol=1e-9)
    np.testing.assert_allclose(binary.latency_s[:n], text.latency_s, atol=1e-9)
    # First request of the capture, read off blkparse's output: Q at 0.000000184, C at 0.000056992.
    assert binary.offset[0] == 2348060440 * 512
    assert binary.latency_s[0] == pytest.approx(0.000056992 - 0.000000184, abs=1e-9)


def _records(data: bytes) -> list[tuple[int, int]]:
    recs, pos = [], 0
    while pos < len(data):
        pdu = int.from_bytes(data[pos + 46 : pos + 48], "little")
        recs.append((pos, HEADER + pdu))
        pos += HEADER + pdu
    return recs


def test_blktrace_big_endian_equals_little_endian(tmp_path: Path) -> None:
    data = BLK.read_bytes()
    le, be = header_dtype("<"), header_dtype(">")
    out = bytearray()
    for pos, length in _records(data):
        hdr = np.frombuffer(data, dtype=le, count=1, offset=pos).astype(be)
        out += hdr.tobytes() + data[pos + HEADER : pos + length]
    path = tmp_path / "be.bin"
    path.write_bytes(bytes(out))
    a, b = open_trace(BLK).read_all(), open_trace(path).read_all()
    np.testing.assert_array_equal(a.offset, b.offset)
    np.testing.assert_array_equal(a.latency_s, b.latency_s)


def test_blktrace_per_cpu_files_are_merged_by_time(tmp_path: Path) -> None:
    data = BLK.read_bytes()
    parts = [bytearray(), bytearray()]
    for i, (pos, length) in enumerate(_records(data)):
        parts[(i // 7) % 2] += data[pos : pos + length]  # whole requests alternate between CPUs
    for cpu, part in enumerate(parts):
        (tmp_path / f"dev.blktrace.{cpu}").write_bytes(bytes(part))
    trace = open_trace(tmp_path / "dev.blktrace.0")
    merged = trace.read_all()
    assert len(trace.info.paths) == 2
    whole = open_trace(BLK).read_all()
    np.testing.assert_array_equal(merged.offset, whole.offset)
    assert np.all(np.diff(merged.time_s) >= 0)


def test_blktrace_small_blocks_cross_record_boundaries(tmp_path: Path) -> None:
    from traces.formats import blktrace

    events = list(blktrace.read_events(BLK, block_bytes=1000))
    assert sum(len(e) for e in events) == len(_records(BLK.read_bytes()))


def test_truncated_blktrace_names_the_byte_offset(tmp_path: Path) -> None:
    data = BLK.read_bytes()
    path = tmp_path / "cut.bin"
    path.write_bytes(data[: HEADER * 10 + 20])
    with pytest.raises(TraceFormatError, match=r"truncated blktrace record at byte \d+"):
        open_trace(path, "blktrace").read_all()


def test_corrupt_blktrace_magic_names_the_byte_offset(tmp_path: Path) -> None:
    data = bytearray(BLK.read_bytes())
    pos = _records(bytes(data))[50][0]
    data[pos : pos + 4] = b"\0\0\0\0"
    path = tmp_path / "bad.bin"
    path.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match=f"bad magic\\) at byte {pos}"):
        open_trace(path, "blktrace").read_all()


def test_blkparse_corrupt_and_truncated_lines(tmp_path: Path) -> None:
    lines = (DATA / "sample.blkparse.txt").read_text().splitlines(keepends=True)
    bad = lines[:5] + ["259,0 1 6 garbage here\n"] + lines[5:20]
    (tmp_path / "bad.txt").write_text("".join(bad))
    with pytest.raises(TraceFormatError, match="line 6"):
        open_trace(tmp_path / "bad.txt", "blkparse").read_all()
    cut = "".join(lines[:9]) + lines[9][:45]
    (tmp_path / "cut.txt").write_text(cut)
    with pytest.raises(TraceFormatError, match="line 10"):
        open_trace(tmp_path / "cut.txt", "blkparse").read_all()


def test_mqsim_fields_and_units() -> None:
    c = open_trace(DATA / "tpcc-small.trace").read_all()
    first = (DATA / "tpcc-small.trace").read_text().split("\n", 2)[:2]
    f0, f1 = first[0].split(), first[1].split()
    assert len(c) == 6999
    assert c.offset[0] == int(f0[2]) * 512 and c.size[0] == int(f0[3]) * 512
    assert c.is_write[0] == (f0[4] == "0")
    assert c.time_s[1] == pytest.approx((int(f1[0]) - int(f0[0])) * 1e-9)
    assert np.isnan(c.latency_s).all()


def test_disksim_uses_milliseconds() -> None:
    c = open_trace(DATA / "disksim-sample.trace", "disksim").read_all()
    assert c.time_s.tolist() == [0.0, 0.0005, 0.001, 0.0015]
    assert c.is_write.tolist() == [False, False, True, False]
    assert c.size.tolist() == [4096, 4096, 65536, 4096]


@pytest.mark.parametrize(
    "cut", ["938513000 4 264719034 16\n", "938513000 4 2647x9034 16 0\n", "938513000 4 264719034 16 7\n"]
)
def test_mqsim_corrupt_line_is_named(tmp_path: Path, cut: str) -> None:
    lines = (DATA / "tpcc-small.trace").read_text().splitlines(keepends=True)[:30]
    (tmp_path / "t.trace").write_text("".join(lines[:12]) + cut + "".join(lines[12:]))
    with pytest.raises(TraceFormatError, match="line 13"):
        open_trace(tmp_path / "t.trace", "mqsim").read_all()


def test_msr_ticks_and_response_time() -> None:
    trace = open_trace(DATA / "msr-sample.csv")
    c = trace.read_all()
    assert trace.info.latency_source == "response_time"
    assert c.is_write.tolist() == [False, True, True, False, True, False]
    assert c.offset[0] == 7014609920 and c.size[0] == 24576
    assert c.latency_s[0] == pytest.approx(41286e-7)
    assert c.time_s[1] == pytest.approx((128166372016382155 - 128166372003061629) * 1e-7)


def test_spc_lba_in_sectors_and_seconds() -> None:
    c = open_trace(DATA / "spc-sample.csv").read_all()
    assert len(c) == 8 and c.offset[0] == 303567 * 512 and c.size[0] == 3584
    assert c.is_write.sum() == 7 and c.time_s[4] == pytest.approx(0.078643)


def test_fio_v2_waits_and_v3_microseconds() -> None:
    v2 = open_trace(DATA / "fio-v2.iolog").read_all()
    v3 = open_trace(DATA / "fio-v3.iolog").read_all()
    for c in (v2, v3):  # trims are skipped
        assert c.is_write.tolist() == [False, False, True, True]
        assert c.offset.tolist() == [0, 4096, 1048576, 1114112]
    assert v2.time_s.tolist() == pytest.approx([0, 0, 0.001, 0.003])
    assert v3.time_s.tolist() == pytest.approx([0, 0.0001, 0.0011, 0.0031])


def test_fio_iolog_bad_line_and_v3_wait(tmp_path: Path) -> None:
    text = (DATA / "fio-v3.iolog").read_text().splitlines(keepends=True)
    (tmp_path / "a.log").write_text("".join(text[:4]) + "300 /dev/sdb read 8192\n" + "".join(text[4:]))
    with pytest.raises(TraceFormatError, match="line 5"):
        open_trace(tmp_path / "a.log").read_all()
    (tmp_path / "b.log").write_text("".join(text[:4]) + "300 /dev/sdb wait 100 0\n")
    with pytest.raises(TraceFormatError, match="wait"):
        open_trace(tmp_path / "b.log").read_all()


def test_generic_csv_skips_trims_and_reads_latency(tmp_path: Path) -> None:
    trace = open_trace(DATA / "generic.csv")
    c = trace.read_all()
    assert trace.info.latency_source == "response_time"
    assert c.is_write.tolist() == [False, False, True, True]
    assert c.latency_s.tolist() == pytest.approx([100e-6, 120e-6, 250e-6, 240e-6])
    shutil.copy(DATA / "generic.csv", tmp_path / "g.csv")
    with open(tmp_path / "g.csv", "a") as fh:
        fh.write("0.003,read,12")
    with pytest.raises(TraceFormatError, match="line 7"):
        open_trace(tmp_path / "g.csv").read_all()
    (tmp_path / "h.csv").write_text("time,op,offset\n1,read,0\n")
    with pytest.raises(TraceFormatError, match="unknown trace format|lacks"):
        open_trace(tmp_path / "h.csv").read_all()


def test_unknown_and_empty_files(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("hello world\n")
    (tmp_path / "e.txt").write_text("")
    with pytest.raises(TraceFormatError, match="unknown trace format"):
        open_trace(tmp_path / "x.txt")
    with pytest.raises(TraceFormatError, match="empty"):
        open_trace(tmp_path / "e.txt")


def test_streaming_chunks_match_whole(tmp_path: Path) -> None:
    chunks = list(open_trace(DATA / "wsrch-small.trace", chunk_requests=1000))
    assert len(chunks) >= 20
    assert sum(len(c) for c in chunks) == 24783


def test_merged_bios_take_the_completion_of_their_request(tmp_path: Path) -> None:
    # Two 4 KiB writes back-merged into one 8 KiB request, then one read on its own.
    text = """\
  8,0    0        1     0.000000000   100  Q   W 1000 + 8 [fio]
  8,0    0        2     0.000001000   100  G   W 1000 + 8 [fio]
  8,0    0        3     0.000010000   100  Q   W 1008 + 8 [fio]
  8,0    0        4     0.000011000   100  M   W 1008 + 8 [fio]
  8,0    0        5     0.000020000   100  D   W 1000 + 16 [fio]
  8,0    0        6     0.000050000   100  Q   R 5000 + 8 [fio]
  8,0    0        7     0.000060000   100  D   R 5000 + 8 [fio]
  8,0    0        8     0.000100000     0  C   W 1000 + 16 [0]
  8,0    0        9     0.000130000     0  C   R 5000 + 8 [0]
"""
    (tmp_path / "m.txt").write_text(text)
    c = open_trace(tmp_path / "m.txt").read_all()
    assert c.offset.tolist() == [1000 * 512, 1008 * 512, 5000 * 512]
    assert c.latency_s.tolist() == pytest.approx([100e-6, 90e-6, 80e-6])
