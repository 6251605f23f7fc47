"""Run the fio binary: locally, or against a ``fio --server`` through ``fio --client``."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from functools import lru_cache, partial
from pathlib import Path
from collections.abc import Mapping, Sequence

from collectors.devices.throttle import cgroup_for_job, join
from collectors.fio import guard
from modeling.errors import FioError, FioMissing, InvalidInput

_REMOTE_RE = re.compile(r"^(?P<host>[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:]+\]),?(?P<port>\d{1,5})?$")


def fio_binary(configured: str | None = None) -> str:
    """Path of the fio binary (``configured``, else fio on PATH); raises ``FioMissing`` when absent."""
    path = configured or shutil.which("fio")
    if not path or not Path(path).exists():
        raise FioMissing()
    return path


@lru_cache(maxsize=4)
def _version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    return out.stdout.strip()


def fio_version(binary: str | None = None) -> str:
    """The installed fio's version string, e.g. ``fio-3.33``."""
    return _version(fio_binary(binary))


def parse_remote(remote: str) -> tuple[str, int]:
    """Validate ``host:port`` (or ``host``) of a fio server; the default port is 8765."""
    text = remote.strip()
    host, _, port_text = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
    if not host:
        host, port_text = text, ""
    match = _REMOTE_RE.match(host)
    if not match or (port_text and not port_text.isdigit()):
        raise InvalidInput(f"invalid remote {remote!r}: use HOST:PORT, e.g. 127.0.0.1:8765")
    port = int(port_text) if port_text else 8765
    if not 1 <= port <= 65535:
        raise InvalidInput(f"invalid remote port {port}")
    return host, port


def check_reachable(remote: str, timeout: float = 10.0) -> None:
    """Raise ``FioError`` unless a TCP connection to the fio server ``remote`` opens.

    Checked before a remote sweep touches the catalog: the engine probe would otherwise
    read an unreachable server as "no io_uring, no libaio" and go on with psync.
    """
    host, port = parse_remote(remote)
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=timeout):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise FioError(f"cannot connect to fio server {host}:{port}: {reason}") from None


def run_fio(
    job_text: str,
    *,
    remote: str | None = None,
    timeout: float = 600.0,
    extra_args: Sequence[str] = (),
    binary: str | None = None,
    env: Mapping[str, str] | None = None,
    prefix: Sequence[str] = (),
) -> str:
    """Run one fio job file and return its JSON output.

    ``job_text`` must come from :mod:`collectors.fio.jobs`, which builds it from
    whitelisted options only.  ``remote`` sends the job to a ``fio --server``; ``binary``
    is the configured fio (default: fio on PATH); ``env`` adds environment variables (the
    pmem stand-in's ``PMEM_IS_PMEM_FORCE``: :mod:`collectors.devices.pmem`); ``prefix`` runs
    fio under another command (``chrt --fifo 20``: open-loop points at the replay's priority).
    """
    fio = fio_binary(binary)
    # The job file lives in an anonymous memory file, not in /tmp: a killed sweep leaves
    # no folder behind.  fio opens it by its /proc path, inherited through the guard.
    job_fd = os.memfd_create("ssdpredict-fio-job", 0)
    try:
        os.write(job_fd, job_text.encode())
        job_path = f"/proc/self/fd/{job_fd}"
        cmd = [*prefix, fio, "--output-format=json", *extra_args]
        if remote is not None:
            host, port = parse_remote(remote)
            cmd += [f"--client={host},{port}", job_path]
        else:
            cmd.append(job_path)
        # a throttled reference caps only the I/O of its cgroup (collectors/devices/throttle.py)
        cgroup = None if remote is not None else cgroup_for_job(job_text)
        returncode, stdout, stderr = run_guarded(cmd, timeout=timeout, pass_fds=(job_fd,), cgroup=cgroup,
                                                 env=env)
    finally:
        os.close(job_fd)
    if returncode != 0:
        message = (stderr.strip() or stdout.strip()).splitlines()
        tail = "; ".join(message[-3:]) if message else f"exit status {returncode}"
        raise FioError(f"fio failed: {tail}")
    return stdout


def run_guarded(
    cmd: Sequence[str], *, timeout: float, pass_fds: Sequence[int] = (), cgroup: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[int, str, str]:
    """Run ``cmd`` under :mod:`collectors.fio.guard`; return (exit status, stdout, stderr).

    ``cgroup``: the guard joins it before exec, so the command and all it forks run in it
    (a throttled reference's cgroup: :mod:`collectors.devices.throttle`).

    The command and everything it forks die with this process, even on ``kill -9``
    (see the guard).  On a timeout or an exception here (Ctrl-C), the guard is asked to
    kill them with SIGTERM; a bare SIGKILL of the guard would leave fio's job processes.
    """
    argv = [sys.executable, "-I", "-S", guard.__file__, str(os.getpid()), *cmd]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=tuple(pass_fds),
        preexec_fn=partial(_preexec, cgroup), process_group=0,
        env=None if env is None else {**os.environ, **env},
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _stop(proc)
        raise FioError(f"fio did not finish within {timeout:.0f} s") from exc
    except BaseException:
        _stop(proc)
        raise
    return proc.returncode, stdout, stderr


def _preexec(cgroup: Path | None) -> None:
    guard.die_with_parent()
    join(cgroup)


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
