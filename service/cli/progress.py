"""The sweep's progress callbacks: rich bars, or plain lines when stderr is not a terminal.

rich's bar draws nothing until the end when it cannot redraw a line, so a sweep piped to a
file looked hung for its whole run.  There the sweep prints ``label n/N, elapsed, ETA``
after a point at most every few seconds, and always for the first and the last.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console

from modeling.workload import Workload, format_size
from service.cli.common import err_console

if TYPE_CHECKING:
    from rich.progress import Progress

EVERY_S = 5.0


def clock(seconds: float) -> str:
    """``1h02m``, ``3m05s`` or ``12s``."""
    s = int(round(max(seconds, 0.0)))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class PlainProgress:
    """Prints ``label done/total, elapsed T, ETA T`` lines on ``console``.

    The ETA counts only the points measured by this run (a resumed run starts part-way).
    """

    def __init__(self, label: str, console: Console, every_s: float = EVERY_S,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.label, self.console, self.every_s, self.now = label, console, every_s, now
        self.started = now()  # restarted at the first update: a phase may be set up before it runs
        self.base: int | None = None
        self.last_line = -float("inf")

    def line(self, done: int, total: int) -> str:
        """The progress line for ``done`` of ``total``."""
        elapsed = self.now() - self.started
        measured = done - (self.base or 0)
        eta = "?" if measured <= 0 else clock(elapsed / measured * (total - done))
        return f"{self.label} {done}/{total}, elapsed {clock(elapsed)}, ETA {eta}"

    def update(self, done: int, total: int) -> None:
        """Record progress; print a line when due (first call, every ``every_s``, the last point)."""
        first = self.base is None
        now = self.now()
        if first:
            self.base, self.started = done, now
        if first or done >= total or now - self.last_line >= self.every_s:
            self.console.print(self.line(done, total), highlight=False, soft_wrap=True)
            self.last_line = now


def _points_progress(bar: Progress, name: str, total: int | None, plain_label: str, resuming: str,
                     reusing: str | None) -> Callable[[int, int, str | None], None]:
    """A phase's progress callback ``(done, total, label)``: a bar (``label``, when given, as its
    description), or plain lines when stderr is no terminal.

    Its first call says what was already stored (on stderr, even with ``--json``): ``resuming``
    part-way, ``reusing`` (when given) a finished phase; both are formatted with ``done`` and
    ``total``.
    """
    task = bar.add_task(name, total=total)
    started: list[bool] = []
    plain = _plain(bar, plain_label)

    def advance(done: int, total: int, label: str | None) -> None:
        if not started:
            if 0 < done < total:
                err_console.print(resuming.format(done=done, total=total), highlight=False)
            elif reusing is not None and done and done >= total:
                err_console.print(reusing.format(done=done, total=total), highlight=False)
            # a resumed phase starts part-way: do not count the jump in the ETA's speed
            bar.reset(task, total=total, completed=done, description=label)
            started.append(True)
        bar.update(task, completed=done, total=total, description=label)
        if plain is not None:
            plain.update(done, total)

    return advance


def sweep_progress(bar: Progress, total: int, prefix: str = "") -> Callable[[int, int, Workload], None]:
    """The sweep's progress callback: the current point's workload (after ``prefix``) as the bar's label.

    A resumed sweep prints ``resuming: N of M points already stored`` first.
    """
    advance = _points_progress(bar, f"{prefix}sweep", total, f"{prefix}sweep points",
                               "resuming: {done} of {total} points already stored",
                               "reusing the finished sweep: {done} of {total} points stored")

    def with_label(done: int, total: int, workload: Workload) -> None:
        advance(done, total, f"{prefix}wr {workload.write_ratio:g} qd {workload.queue_depth} "
                             f"{format_size(workload.request_size)} rnd {workload.randomness:g} "
                             f"nj {workload.numjobs}")

    return with_label


def _plain(bar: Progress, label: str) -> PlainProgress | None:
    # a bar shown (no --json) where it cannot redraw: plain lines instead
    return None if bar.disable or err_console.is_terminal else PlainProgress(label, err_console)


def open_loop_progress(bar: Progress) -> Callable[[int, int], None]:
    """The open-loop phase's progress callback (:func:`_points_progress`, no label).

    A resumed phase prints ``resuming the open-loop points: N of M already stored`` first.
    """
    advance = _points_progress(bar, "open-loop points", None, "open-loop points",
                               "resuming the open-loop points: {done} of {total} already stored", None)
    return lambda done, total: advance(done, total, None)
