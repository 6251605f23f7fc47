"""blktrace binary: ``struct blk_io_trace`` records, either byte order, per-CPU files.

Each record is a 48-byte header (magic|version, sequence, time ns, sector, bytes, action,
pid, device, cpu, error, pdu_len) followed by ``pdu_len`` bytes of payload.  Records are
found without a per-record Python loop: every position holding the magic is a candidate,
and the candidates must form the chain ``next = pos + 48 + pdu_len``; only when that check
fails (the magic bytes inside a payload) does a block fall back to walking record by record.

Requests are the Queue (Q) events of reads and writes with a size; Complete (C) events give
their latency (``latency_source="pairs"``).  A trace without Q events uses Issue (D) events.
Per-CPU files ``NAME.blktrace.0``, ``.1`` ... are merged by time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np

from modeling.errors import TraceFormatError
from traces.formats.fields import int_field
from traces.chunks import SECTOR, Trace, TraceChunk, TraceInfo
from traces.formats.pairing import EventPairer, direction_key

MAGIC = 0x65617400
HEADER = 48
BLOCK_BYTES = 32 << 20

TA_QUEUE, TA_ISSUE, TA_COMPLETE = 1, 7, 8
TC_READ, TC_WRITE, TC_NOTIFY, TC_DISCARD = 1 << 16, 2 << 16, 1 << 26, 1 << 29


def header_dtype(byteorder: str) -> np.dtype:
    """The 48-byte record header as a numpy dtype in the given byte order ('<' or '>')."""
    e = byteorder
    return np.dtype(
        [
            ("magic", e + "u4"),
            ("sequence", e + "u4"),
            ("time", e + "u8"),
            ("sector", e + "u8"),
            ("bytes", e + "u4"),
            ("action", e + "u4"),
            ("pid", e + "u4"),
            ("device", e + "u4"),
            ("cpu", e + "u4"),
            ("error", e + "u2"),
            ("pdu_len", e + "u2"),
        ]
    )


def detect_byteorder(head: bytes) -> str | None:
    """'<' or '>' when ``head`` starts with a blktrace record, else None."""
    if len(head) < 4:
        return None
    if int.from_bytes(head[:4], "little") & 0xFFFFFF00 == MAGIC:
        return "<"
    if int.from_bytes(head[:4], "big") & 0xFFFFFF00 == MAGIC:
        return ">"
    return None


def _record_starts(buf: np.ndarray, byteorder: str, base: int, path: str) -> tuple[np.ndarray, int]:
    """Offsets of the whole records in ``buf`` and the offset where a partial one starts."""
    m = buf
    if len(m) < HEADER:
        return np.empty(0, np.int64), 0
    magic = MAGIC.to_bytes(4, "little" if byteorder == "<" else "big")
    # The three magic bytes that do not hold the version.
    # One pass for the rarest-looking byte, then the other two only at its hits.
    a, b, c = (1, 2, 3) if byteorder == "<" else (2, 1, 0)
    cand = np.flatnonzero(m[: len(m) - HEADER + c + 1][c:] == magic[c]).astype(np.int64)
    cand = cand[(m[cand + a] == magic[a]) & (m[cand + b] == magic[b])]
    if not len(cand) or cand[0] != 0:
        return _walk(m, byteorder, base, path)
    lo, hi = (46, 47) if byteorder == "<" else (47, 46)
    pdu = m[cand + lo].astype(np.int64) | (m[cand + hi].astype(np.int64) << 8)
    nxt = cand + HEADER + pdu
    # The magic bytes can occur by chance inside a record: follow the chain, skipping such
    # false candidates.  Consistent runs are taken whole; only breaks cost Python steps.
    breaks = np.flatnonzero(nxt[:-1] != cand[1:])
    keep: list[np.ndarray] = []
    cur = 0
    while True:
        b = int(np.searchsorted(breaks, cur))
        stop = int(breaks[b]) if b < len(breaks) else len(cand) - 1
        keep.append(np.arange(cur, stop + 1))
        p = int(nxt[stop])
        if p == len(m):
            return cand[np.concatenate(keep)], p
        j = int(np.searchsorted(cand, p))
        if j < len(cand) and cand[j] == p:
            cur = j
            continue
        if p + HEADER > len(m) or p > len(m):  # the next record is cut by the block end
            idx = np.concatenate(keep)
            if p > len(m):  # the last whole header's payload is cut: it waits for more data
                idx = idx[:-1]
                p = int(cand[stop])
            return cand[idx], p
        raise TraceFormatError(f"{path}: corrupt blktrace record (bad magic) at byte {base + p}")


def _walk(m: np.ndarray, byteorder: str, base: int, path: str) -> tuple[np.ndarray, int]:
    """Slow path: follow the chain record by record, checking each magic."""
    starts = []
    pos = 0
    order: Literal["little", "big"] = "little" if byteorder == "<" else "big"
    raw = m.tobytes()
    while pos + HEADER <= len(raw):
        if int.from_bytes(raw[pos : pos + 4], order) & 0xFFFFFF00 != MAGIC:
            raise TraceFormatError(f"{path}: corrupt blktrace record (bad magic) at byte {base + pos}")
        pdu = int.from_bytes(raw[pos + 46 : pos + 48], order)
        if pos + HEADER + pdu > len(raw):
            break
        starts.append(pos)
        pos += HEADER + pdu
    return np.asarray(starts, dtype=np.int64), pos


def read_events(path: Path, block_bytes: int = BLOCK_BYTES) -> Iterator[np.ndarray]:
    """Yield header arrays (native byte order) block by block from one per-CPU file."""
    with open(path, "rb") as fh:
        byteorder = detect_byteorder(fh.read(4))
        if byteorder is None:
            raise TraceFormatError(f"{path}: not a blktrace binary file (bad magic at byte 0)")
        dt = header_dtype(byteorder)
        fh.seek(0)
        # Room for a block plus the unfinished record carried over (at most 48 + 65535 bytes).
        buf = bytearray(block_bytes + (1 << 17))
        view = memoryview(buf)
        carry = 0  # bytes of an unfinished record kept at the start of buf
        first_time: int | None = None
        base = 0  # file offset of buf[0]
        while True:
            got = fh.readinto(view[carry : carry + block_bytes])
            size = carry + got
            if size == 0:
                return
            m = np.frombuffer(buf, dtype=np.uint8, count=size)
            starts, end = _record_starts(m, byteorder, base, str(path))
            if not got:  # end of file: whatever is left is a truncated record
                raise TraceFormatError(
                    f"{path}: truncated blktrace record at byte {base + end} "
                    f"({size - end} of at least {HEADER} bytes)"
                )
            if len(starts):
                # Rows of 48 bytes starting anywhere: gathering the record starts copies
                # just the headers, skipping payloads.
                rows = np.lib.stride_tricks.as_strided(m, shape=(size - HEADER + 1, HEADER), strides=(1, 1))
                hdr = rows[starts].view(dt).ravel()
                bad = (hdr["magic"] & 0xFFFFFF00) != MAGIC
                if bad.any():
                    pos = base + int(starts[np.argmax(bad)])
                    raise TraceFormatError(f"{path}: corrupt blktrace record (bad magic) at byte {pos}")
                hdr = hdr if dt.isnative else hdr.astype(dt.newbyteorder("="))
                first_time = _check_events(hdr, path, base + starts, first_time)
                yield hdr
            del m
            carry = size - end
            buf[:carry] = buf[end:size]
            base += end


def _check_events(hdr: np.ndarray, path: Path, offsets: np.ndarray, first_time: int | None) -> int:
    """The shared field checks on one block of records (positions are byte offsets).

    A per-CPU file is written in time order by the kernel; an event before the file's first
    would put requests before the trace start.  Returns the file's first event time.
    """

    def locate(i: int) -> str:
        return f"byte {int(offsets[i])}"

    int_field(hdr["sector"], "sector", path, locate, scale=SECTOR)
    times = int_field(hdr["time"], "time", path, locate)
    start = int(times[0]) if first_time is None else first_time
    early = times < start
    if early.any():
        i = int(np.argmax(early))
        raise TraceFormatError(
            f"{path}: {locate(i)}: event time {times[i]} ns is before the file's first event"
        )
    return start


def _merge_by_time(streams: list[Iterator[np.ndarray]]) -> Iterator[np.ndarray]:
    """Merge per-CPU event streams (each sorted by time) into one time-ordered stream."""
    empty = np.empty(0, dtype=header_dtype("="))
    bufs: list[np.ndarray] = [empty] * len(streams)
    live = list(range(len(streams)))
    while live:
        for i in list(live):
            if not len(bufs[i]):
                nxt = next(streams[i], None)
                if nxt is None:
                    live.remove(i)
                else:
                    bufs[i] = nxt
        if not any(len(b) for b in bufs):
            return
        # Everything up to the earliest "last time" of the live buffers is final.
        limit = min((int(bufs[i][-1]["time"]) for i in live if len(bufs[i])), default=2**64 - 1)
        out = []
        for i, b in enumerate(bufs):
            if not len(b):
                continue
            k = int(np.searchsorted(b["time"], limit, side="right"))
            out.append(b[:k])
            bufs[i] = b[k:]
        merged = np.concatenate(out)
        yield merged[np.argsort(merged["time"], kind="stable")]


def cpu_files(path: Path) -> list[Path]:
    """The per-CPU siblings of ``NAME.blktrace.N`` (just ``path`` otherwise)."""
    match = re.match(r"^(.*\.blktrace)\.\d+$", path.name)
    if not match:
        return [path]
    rx = re.compile(re.escape(match.group(1)) + r"\.(\d+)$")
    numbered = [(m, p) for p in path.parent.iterdir() if (m := rx.match(p.name))]
    found = [p for m, p in sorted(numbered, key=lambda mp: int(mp[0].group(1)))]
    return found or [path]


def events_to_requests(events: Iterator[np.ndarray]) -> Iterator[TraceChunk]:
    """Turn time-ordered blktrace events into requests with latency from Q/C pairs."""
    pairer = EventPairer()
    t0: int | None = None
    arrival_action: int | None = None
    for ev in events:
        if not len(ev):
            continue
        if t0 is None:
            t0 = int(ev["time"][0])
        act = ev["action"]
        code = act & 0xFFFF
        rw = ((act & (TC_READ | TC_WRITE)) != 0) & ((act & (TC_NOTIFY | TC_DISCARD)) == 0)
        if arrival_action is None:
            if (rw & (code == TA_QUEUE)).any():
                arrival_action = TA_QUEUE
            elif (rw & (code == TA_ISSUE)).any():
                arrival_action = TA_ISSUE
        time_ns = ev["time"].astype(np.int64) - t0
        sector = ev["sector"].astype(np.int64)
        nbytes = ev["bytes"]
        is_w = (act & TC_WRITE) != 0
        a = np.flatnonzero(rw & (code == (arrival_action or TA_QUEUE)) & (nbytes > 0))
        c = np.flatnonzero(rw & (code == TA_COMPLETE))
        arrivals = TraceChunk.build(time_ns[a] / 1e9, is_w[a], sector[a] * SECTOR, nbytes[a].astype(np.int64))
        t_c = time_ns[c] / 1e9
        key_c = direction_key(sector[c] * SECTOR, is_w[c])
        out = pairer.feed(arrivals, t_c, key_c, nbytes[c].astype(np.int64))
        if len(out):
            yield out
    rest = pairer.finish()
    if len(rest):
        yield rest


def read(path: Path, chunk_requests: int = 1 << 20) -> Trace:
    """Open a blktrace binary trace (and its per-CPU siblings)."""
    files = cpu_files(Path(path))
    streams = [read_events(p) for p in files]
    events = streams[0] if len(streams) == 1 else _merge_by_time(streams)
    info = TraceInfo("blktrace", [str(p) for p in files], latency_source="pairs")
    return Trace(info, events_to_requests(events))
