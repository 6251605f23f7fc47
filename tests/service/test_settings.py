"""Settings: bad values are refused naming the variable; BLAS threads are applied at start-up."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from threadpoolctl import threadpool_info, threadpool_limits

from service.config import Settings


@pytest.mark.parametrize("value", ["0", "-2", "lots", "100000"])
def test_bad_blas_threads_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("SSDPREDICT_BLAS_THREADS", value)
    with pytest.raises(ValidationError, match="blas_threads"):
        Settings()


def test_the_server_runs_with_the_configured_blas_threads(make_app: Any) -> None:
    if not any(lib["user_api"] == "blas" for lib in threadpool_info()):
        pytest.skip("no BLAS library loaded in this process")
    with threadpool_limits(limits=None):  # restore the test process's limits afterwards
        threadpool_limits(limits=2, user_api="blas")
        with TestClient(make_app(blas_threads=1)):
            blas = [lib for lib in threadpool_info() if lib["user_api"] == "blas"]
            assert blas and all(lib["num_threads"] == 1 for lib in blas)


def test_a_bad_setting_is_named_by_its_variable_on_the_cli(
    monkeypatch: pytest.MonkeyPatch, home: Any
) -> None:
    """It said "invalid workload: model_cache_mb" (issue 25, small ones)."""
    from typer.testing import CliRunner

    from service.cli.main import app

    monkeypatch.setenv("SSDPREDICT_MODEL_CACHE_MB", "-3")
    result = CliRunner().invoke(app, ["devices"])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: invalid setting: SSDPREDICT_MODEL_CACHE_MB: Input should be")
    assert "workload" not in result.output and len(result.output.strip().splitlines()) == 1
