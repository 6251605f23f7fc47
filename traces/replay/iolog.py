"""The iologs a replay's lanes read: the trace's requests fitted into the target.

The trace's requests are remapped into the target (``offset mod usable size``, aligned
down to the target's logical block size -- 4 KiB on zram -- and to 4096 bytes when all
the trace's sizes allow it; sizes the target cannot take rounded up to its logical block
size, or refused, and always counted: :func:`remap`, :class:`Fit`) and dealt
round-robin to *lanes*, one fio job each, replaying its own iolog version 3 (timestamps in
microseconds, divided by ``speed``) with ``direct=1`` and the synchronous ``psync``
engine, logging every I/O (``write_lat_log`` + ``log_offset``).
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from collectors.targets import claim_target
from modeling.errors import InvalidInput, NoData
from modeling.store.catalog import Catalog
from modeling.workload import MIB
from traces.chunks import Trace, TraceChunk
from traces.replay.clock import shorten_gaps

SHIFT_US = 1000
DEFAULT_SIZE = 256 * MIB
_SAFE_PATH = re.compile(r"^[A-Za-z0-9_./+\-]+$")


def prepare_target(target: str, destroy_data: bool, size: int,
                    catalog: Catalog | None) -> tuple[int, list[str]]:
    """Check the target; create or extend a file target with real data.  Returns (size, warnings).

    The same claim as a sweep's (:func:`collectors.targets.claim_target`): the product's
    own scratch files pass, a user's file needs ``destroy_data``, a new or grown file must
    fit in the free space, and a failed creation leaves nothing behind.
    """
    if not _SAFE_PATH.match(target):
        raise InvalidInput(
            f"target path {target!r} has characters fio cannot take safely "
            "(use letters, digits, '.', '_', '-', '/', '+')"
        )
    # Reads of a file's holes (or of fallocated, unwritten extents) return zeros without
    # touching the device, so a new or short file is written for real, not made sparse.
    info = claim_target(target, size, destroy_data=destroy_data, catalog=catalog)
    if info.kind != "file":
        return int(info.size), []
    st = os.stat(info.path)
    if st.st_blocks * 512 < st.st_size * 0.9:
        return int(info.size), [f"target file {target} is sparse: reads of its holes do not reach the device"]
    return int(info.size), []


def load_requests(trace: Trace, max_requests: int | None = None) -> TraceChunk:
    """All requests of a trace (at most ``max_requests``), sorted by arrival."""
    chunks = []
    n = 0
    for chunk in trace.chunks:
        if max_requests is not None and n + len(chunk) > max_requests:
            chunk = chunk.take(slice(0, max_requests - n))
        chunks.append(chunk)
        n += len(chunk)
        if max_requests is not None and n >= max_requests:
            break
    c = TraceChunk.concat(chunks)
    if not len(c):
        raise NoData("the trace has no read or write requests to replay")
    if np.any(np.diff(c.time_s) < 0):
        c = c.take(np.argsort(c.time_s, kind="stable"))
    return c


def max_outstanding(c: TraceChunk) -> int | None:
    """Most requests ever in flight at once, when the trace has latencies."""
    ok = ~np.isnan(c.latency_s)
    if not ok.any() or not np.any(c.latency_s[ok] > 0):
        return None  # all-zero response times carry no latency: they cannot size the replay
    t = np.concatenate([c.time_s[ok], c.time_s[ok] + c.latency_s[ok]])
    step = np.concatenate([np.ones(ok.sum(), np.int64), -np.ones(ok.sum(), np.int64)])
    order = np.lexsort((step, t))  # a completion at the same instant goes first
    return int(np.cumsum(step[order]).max())


RESIZE_RULES = ("round-up", "refuse")


@dataclass(frozen=True)
class Fit:
    """What fitting a trace into a target changed, counted so that a replay is never silently another trace.

    ``resized``: requests whose size is not a multiple of the target's logical block size,
    rounded up (``bytes_added`` in all); ``dropped``: requests larger than the target, left
    out; ``realigned``: offsets moved down to the alignment; ``wrapped``: offsets at or
    beyond the target's usable size, taken modulo it (the bytes are the same, the place is not).
    """

    block: int
    align: int
    requests: int
    trace_bytes: int
    replayed_bytes: int
    resized: int = 0
    bytes_added: int = 0
    dropped: int = 0
    dropped_bytes: int = 0
    realigned: int = 0
    wrapped: int = 0
    # the trace's own size of each replayed request (bytes; not in the JSON form)
    trace_size: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False, compare=False)

    def warnings(self) -> list[str]:
        """One line per change, with counts and bytes (none when the trace replays as it is)."""
        out = []
        if self.resized:
            out.append(
                f"{self.resized} of {self.requests} requests are not a multiple of the target's "
                f"{self.block}-byte blocks and were rounded up: {self.bytes_added} bytes added "
                f"({self.bytes_added / max(self.trace_bytes, 1) * 100:.1f} % of the trace's "
                f"{self.trace_bytes} bytes); `--resize refuse` refuses instead"
            )
        if self.dropped:
            out.append(
                f"{self.dropped} request(s) larger than the target ({self.dropped_bytes} bytes) left out"
            )
        if self.realigned:
            out.append(f"{self.realigned} request offset(s) aligned down to {self.align} bytes")
        if self.wrapped:
            out.append(
                f"{self.wrapped} request offset(s) beyond the target's size taken modulo it "
                "(same bytes, other places)"
            )
        return out

    def to_dict(self) -> dict[str, int]:
        """JSON-ready form."""
        return {k: v for k, v in asdict(self).items() if k != "trace_size"}


def remap(
    c: TraceChunk, target_size: int, block: int = 512, resize: str = "round-up"
) -> tuple[TraceChunk, Fit]:
    """Fit the requests into the target: the remapped requests and what that changed (:class:`Fit`).

    Offsets are taken modulo the usable size and aligned down to at least ``block`` (4096
    when every size is a multiple of it).  Sizes the target cannot take (not a multiple of
    its logical block size ``block``: direct I/O on a device with 4 KiB logical sectors,
    such as zram, refuses them with "Invalid argument") are rounded up under
    ``resize="round-up"`` and refused (:class:`~modeling.errors.InvalidInput`) under
    ``"refuse"``, as are requests larger than the target.
    """
    if resize not in RESIZE_RULES:
        raise InvalidInput(f"unknown resize rule {resize!r}; use one of {', '.join(RESIZE_RULES)}")
    block = max(int(block), 512)
    n, trace_bytes = len(c), int(c.size.sum())
    size = (c.size + block - 1) // block * block
    align = max(block, 4096 if not np.any(size % 4096) else 512)
    grown = size != c.size
    keep = size <= target_size
    dropped, dropped_bytes = int((~keep).sum()), int(c.size[~keep].sum())
    if resize == "refuse" and (grown.any() or dropped):
        raise InvalidInput(
            f"{int(grown.sum())} of {n} requests are not a multiple of the target's {block}-byte blocks "
            f"({int((size - c.size)[grown].sum())} bytes short) and {dropped} are larger than the target: "
            "refused (`--resize round-up` rounds them up, with a warning)"
        )
    c, size, grown = c.take(keep), size[keep], grown[keep]
    usable = max(target_size - int(size.max()), align) if len(size) else align
    wrapped = c.offset >= usable
    off = (c.offset % usable) // align * align
    fit = Fit(
        block=block, align=align, requests=n, trace_bytes=trace_bytes, replayed_bytes=int(size.sum()),
        resized=int(grown.sum()), bytes_added=int((size - c.size)[grown].sum()), dropped=dropped,
        dropped_bytes=dropped_bytes, realigned=int(((c.offset % usable) % align != 0).sum()),
        wrapped=int(wrapped.sum()), trace_size=c.size.astype(np.float64),
    )
    return TraceChunk(c.time_s, c.is_write, off, size, c.latency_s), fit


def write_iolog(
    c: TraceChunk,
    target: str,
    out: Path,
    *,
    speed: float = 1.0,
    t0: float | None = None,
    lead_in: int | None = None,
    slip_us: float = 0.0,
    lead_out_us: int | None = None,
) -> None:
    """Write requests as a fio v3 iolog (timestamps in us from ``t0``, divided by ``speed``).

    ``lead_in`` (bytes) starts the log with a read of that size at offset 0 and time 1 us:
    fio issues a log's first entry at once, whatever its timestamp, so without it a lane
    whose first request comes late in the trace would run early by that much.  With
    ``lead_in``, ``lead_out_us`` ends the log with a read of the same size at that time
    (or at the last entry's, if later), and ``slip_us`` shortens every positive gap by
    that much (:mod:`traces.replay.clock`).
    """
    start = c.time_s[0] if t0 is None else t0
    t_us = np.round((c.time_s - start) * 1e6 / speed).astype(np.int64) + SHIFT_US
    if lead_in:
        t_us = shorten_gaps(t_us, slip_us, start_us=1)
    op = np.where(c.is_write, "write", "read")
    with open(out, "w") as fh:
        fh.write(f"fio version 3 iolog\n0 {target} add\n0 {target} open\n")
        if lead_in:
            # at 1 us, not 0: fio takes a timestamp of 0 as "no previous entry" and would not
            # delay the next one either
            fh.write(f"1 {target} read 0 {lead_in}\n")
        fh.writelines(
            f"{t} {target} {o} {a} {s}\n"
            for t, o, a, s in zip(t_us.tolist(), op.tolist(), c.offset.tolist(), c.size.tolist(), strict=True)
        )
        end = int(t_us[-1]) if len(t_us) else 0
        if lead_in and lead_out_us is not None:
            end = max(end, int(lead_out_us))
            fh.write(f"{end} {target} read 0 {lead_in}\n")
        fh.write(f"{end} {target} close\n")
