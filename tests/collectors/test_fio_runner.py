"""Running fio: missing binary, failures, remote address validation."""

from __future__ import annotations

import pytest

from collectors.fio.runner import fio_binary, parse_remote, run_fio
from modeling.errors import FioError, FioMissing, InvalidInput


def test_missing_fio_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(FioMissing, match="apt-get install fio"):
        fio_binary("/nonexistent/fio")
    with pytest.raises(FioMissing, match="apt-get install fio"):
        run_fio("[x]\nrw=read\n", binary="/nonexistent/fio")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(FioMissing):
        run_fio("[x]\nrw=read\n")


@pytest.mark.fio
def test_fio_failure_is_reported(fio_available: str) -> None:
    with pytest.raises(FioError, match="fio failed"):
        run_fio("[x]\nrw=sideways\nsize=1m\n", timeout=30)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("127.0.0.1:8765", ("127.0.0.1", 8765)), ("localhost", ("localhost", 8765)),
     ("csd0.lab:9000", ("csd0.lab", 9000))],
)
def test_parse_remote(text: str, expected: tuple[str, int]) -> None:
    assert parse_remote(text) == expected


@pytest.mark.parametrize("bad", ["", "host:port", "a b:1", "h:70000", "h;rm -rf /:1", "x:1:2:3"])
def test_parse_remote_rejects_garbage(bad: str) -> None:
    with pytest.raises(InvalidInput):
        parse_remote(bad)
