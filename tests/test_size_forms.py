"""One size syntax everywhere: the CLI flag, a CSV cell, the API body, and the schema that says so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from modeling.errors import InvalidInput
from modeling.serving.batch import read_workload_csv
from modeling.store import DataDir
from modeling.workload import SIZE_PATTERN, Workload
from service.api.main import app as api_app
from service.api.schemas import BatchPredictRequest, PredictRequest
from service.cli.main import app as cli_app
from service.cli.ask.predict import workload_from_options

FORMS = ["4096", "4k", "4K", "4KiB", "4kb", " 4 KiB "]
BASE = {"write_ratio": 0.0, "queue_depth": 1, "randomness": 1.0}


def _csv(tmp_path: Path, size: str, *, metric: bool) -> Path:
    path = tmp_path / "rows.csv"
    header = "write_ratio,queue_depth,request_size,randomness" + (",iops" if metric else "")
    path.write_text(f'{header}\n0,1,"{size}",1{",1000" if metric else ""}\n')
    return path


@pytest.mark.parametrize("form", FORMS)
def test_a_size_reads_the_same_in_the_cli_a_csv_and_the_api(form: str, tmp_path: Path, home: Path) -> None:
    # the API's bodies: one workload, and a batch row
    assert PredictRequest(device="d", workload={**BASE, "request_size": form}).workload.request_size == 4096
    batch = BatchPredictRequest.model_validate({"device": "d", "workloads": [{**BASE, "request_size": form}]})
    assert batch.workloads is not None and Workload.model_validate(batch.workloads[0]).request_size == 4096
    # the CLI's --request-size
    cli = workload_from_options(**{**BASE, "request_size": form, "numjobs": None, "read_size": None,
                                    "write_size": None, "read_randomness": None, "write_randomness": None})
    assert cli.request_size == 4096
    # a CSV of measurements (ssdpredict ingest) and a CSV of workloads (predict --input)
    result = CliRunner().invoke(cli_app, ["ingest", "--device", "d", str(_csv(tmp_path, form, metric=True))])
    assert result.exit_code == 0, result.output
    assert DataDir(home).catalog.measurements("d")["request_size"].tolist() == [4096]
    assert read_workload_csv(_csv(tmp_path, form, metric=False))["request_size"].tolist() == [4096]
    # and the OpenAPI schema admits it
    assert re.fullmatch(SIZE_PATTERN, form)


@pytest.mark.parametrize("form", ["4x", "k", "4 kk", "-4k"])
def test_a_malformed_size_is_refused_everywhere(form: str, tmp_path: Path, home: Path) -> None:
    with pytest.raises(ValidationError, match="request_size"):
        PredictRequest(device="d", workload={**BASE, "request_size": form})
    with pytest.raises(ValidationError):
        BatchPredictRequest.model_validate({"device": "d", "workloads": [{**BASE, "request_size": form}]})
    result = CliRunner().invoke(cli_app, ["ingest", "--device", "d", str(_csv(tmp_path, form, metric=True))])
    assert result.exit_code == 2 and "request_size" in result.output
    with pytest.raises(InvalidInput, match="request_size"):
        read_workload_csv(_csv(tmp_path, form, metric=False))
    assert not re.fullmatch(SIZE_PATTERN, form)


def test_the_openapi_schema_says_a_size_may_be_a_string() -> None:
    schemas = api_app.openapi()["components"]["schemas"]
    for name in ("Workload", "BatchWorkload"):
        for field in ("request_size", "read_size", "write_size"):
            options = schemas[name]["properties"][field]["anyOf"]
            types = {o["type"] for o in options}
            assert {"integer", "string"} <= types, (name, field)
            (text,) = [o for o in options if o["type"] == "string"]
            assert text["pattern"] == SIZE_PATTERN
