"""`ssdpredict serve` refuses a non-loopback address without a token unless told --insecure.

The real CLI runs in a subprocess: the refusal must happen before uvicorn binds anything,
and the allowed paths must really serve.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from typer.testing import CliRunner

from service.cli.main import app
from service.config import get_settings, is_loopback_host
from tests.conftest import REPO
from tests.device_fixtures import free_port


def _serve(
    home: Path, *args: str, token: str | None = None, env_host: str | None = None
) -> subprocess.Popen[str]:
    """The real `ssdpredict serve` with only the given SSDPREDICT_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSDPREDICT_")}
    env["SSDPREDICT_HOME"] = str(home)
    if token is not None:
        env["SSDPREDICT_API_TOKEN"] = token
    if env_host is not None:
        env["SSDPREDICT_HOST"] = env_host
    return subprocess.Popen(
        [sys.executable, "-m", "service.cli.main", "serve", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _nothing_listens(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_exposed_address_without_token_is_refused_before_binding(home: Path) -> None:
    """In a real process (one address: each start costs 2-8 s of imports; the ways of
    naming an exposed address are all checked in-process below)."""
    port = free_port()
    proc = _serve(home, "--port", str(port), env_host="0.0.0.0")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "refusing to serve" in lines[0]
    assert "SSDPREDICT_API_TOKEN" in lines[0] and "--insecure" in lines[0]
    assert "serving on" not in out
    assert _nothing_listens(port)
    assert not home.exists(), "the refusal must come before the data directory is touched"


@pytest.mark.parametrize(
    ("args", "env_host"),
    [(("--host", "0.0.0.0"), None), (("--host", "::"), None), ((), "0.0.0.0")],
    ids=["flag-any-ipv4", "flag-any-ipv6", "env-any-ipv4"],
)
def test_every_exposed_address_is_refused_before_serving(
    home: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], env_host: str | None
) -> None:
    import uvicorn

    def no_server(*a: object, **kw: object) -> None:
        raise AssertionError("uvicorn must not start")

    monkeypatch.setattr(uvicorn, "run", no_server)
    if env_host is not None:
        monkeypatch.setenv("SSDPREDICT_HOST", env_host)
    get_settings.cache_clear()
    res = CliRunner().invoke(app, ["serve", *args, "--port", str(free_port())])
    assert res.exit_code == 2, res.output
    assert "refusing to serve" in res.output
    assert "SSDPREDICT_API_TOKEN" in res.output and "--insecure" in res.output
    assert "serving on" not in res.output
    assert not home.exists(), "the refusal must come before the data directory is touched"


def _wait_healthy(proc: subprocess.Popen[str], port: int) -> None:
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
        while True:
            try:
                if http.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if proc.poll() is not None:
                raise AssertionError(f"server exited {proc.returncode}: {proc.communicate()}")
            assert time.monotonic() < deadline, "server did not answer /healthz"
            time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "token"),
    [
        (("--host", "127.0.0.1"), None),
        (("--host", "localhost"), None),
        (("--host", "0.0.0.0", "--insecure"), None),
        (("--host", "0.0.0.0"), "a-token"),
    ],
    ids=["loopback", "localhost", "any-insecure", "any-with-token"],
)
def test_allowed_paths_serve(home: Path, args: tuple[str, ...], token: str | None) -> None:
    port = free_port()
    proc = _serve(home, *args, "--port", str(port), token=token)
    try:
        _wait_healthy(proc, port)
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert "refusing" not in err
    assert f":{port}" in out


def test_loopback_rule() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert is_loopback_host(host), host
    for host in ("0.0.0.0", "::", "", "192.0.2.10", "no-such-host.invalid"):
        assert not is_loopback_host(host), host
    outward = socket.gethostbyname(socket.gethostname())
    assert is_loopback_host(outward) == outward.startswith("127.")
