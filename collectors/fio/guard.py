"""A guard process between ssdpredict and fio, so that fio never outlives its caller.

``kill -9`` of a sweep cannot run any cleanup in the sweep itself.  The kernel can still
signal its children: the guard is started with ``PR_SET_PDEATHSIG`` (set in the forked
child before exec, see :func:`die_with_parent`), so it gets ``SIGTERM`` the moment its
parent dies.  That alone is not enough, because fio forks one process per job and each of
those calls ``setsid()``: killing fio's main process, or its process group, leaves the
job processes running (re-parented to PID 1, still writing to the target).  The guard is
therefore a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): fio's orphaned job processes
are re-parented to it, not to PID 1, and on ``SIGTERM`` it kills every descendant it has.

This file runs as a script (``python -I -S guard.py PARENT_PID fio ARGS...``) and imports
nothing from ssdpredict, so that it starts in a few milliseconds.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def die_with_parent() -> None:
    """``preexec_fn``: the kernel sends this process SIGTERM when its parent dies."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root`` (read from /proc), deepest first."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: the fields follow the last ')'
        fields = stat[stat.rfind(b")") + 2:].split()
        parents[int(entry)] = int(fields[1])
    found: list[int] = []
    frontier = [root]
    while frontier:
        children = [pid for pid, ppid in parents.items() if ppid in frontier]
        found.extend(children)
        frontier = children
    return found[::-1]


def kill_descendants() -> None:
    """SIGKILL every descendant, repeatedly, until none is left (they may fork meanwhile)."""
    me = os.getpid()
    for _ in range(50):
        pids = descendants(me)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _reap(timeout=0.2)


def _reap(timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.01)


def main(argv: list[str]) -> int:
    """Run ``argv[1:]`` as a child; kill it and its descendants if our parent dies."""
    parent = int(argv[0])
    _prctl(PR_SET_CHILD_SUBREAPER, 1)

    def stop(signum: int, frame: object) -> None:
        kill_descendants()
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    if os.getppid() != parent:  # the parent died before PDEATHSIG was armed
        return 128 + signal.SIGTERM
    child = os.fork()
    if child == 0:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        try:
            os.execvp(argv[1], argv[1:])
        finally:
            os._exit(127)
    while True:
        try:
            pid, status = os.waitpid(child, 0)
        except InterruptedError:
            continue
        if pid == child:
            break
    kill_descendants()  # a job process that fio left behind must not keep writing
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code  # killed by a signal: the shell's convention


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
