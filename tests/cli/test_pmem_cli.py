"""Class pmem end to end through the CLI: real fio (libpmem) on the tmpfs stand-in, then ingest of
an SSD, training, prediction and the report with the two side by side (slow: 8 fio points of 1 s)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.cli.main import app
from tests.conftest import FIO_PLOT

runner = CliRunner()
SSD = FIO_PLOT / "HPDL380G8" / "HBA" / "SAMSUNG_860PRO"


def run(*args: str):
    return runner.invoke(app, list(args))


@pytest.mark.slow
def test_pmem_sweep_train_predict_and_compare_with_an_ssd(fio_available: str, tmp_path: Path) -> None:
    target = Path("/dev/shm") / f"ssdpredict-test-{uuid.uuid4().hex[:8]}.img"
    try:
        r = run(
            "sweep",
            "--device",
            "pm",
            "--class",
            "pmem",
            "--target",
            str(target),
            "--size",
            "8MiB",
            "--sizes",
            "64,4k",
            "--write-ratios",
            "0,1",
            "--numjobs",
            "1,2",
            "--randomness",
            "1",
            "--runtime",
            "1s",
        )
        assert r.exit_code == 0, r.output
        assert "pmem stand-in" in r.output and "engine libpmem" in r.output
    finally:
        target.unlink(missing_ok=True)
    assert run("ingest", "--device", "ssd", str(SSD)).exit_code == 0
    for device in ("pm", "ssd"):
        r = run("train", "--device", device, "--candidates", "cart", "--folds", "2")
        assert r.exit_code == 0, r.output
    one = json.loads(
        run(
            "predict",
            "-d",
            "pm",
            "--write-ratio",
            "0",
            "--queue-depth",
            "1",
            "--request-size",
            "64",
            "--randomness",
            "1",
            "--numjobs",
            "2",
            "--json",
        ).output
    )
    assert one["predictions"]["iops"]["value"] > 0 and one["workload"]["request_size"] == 64
    ranked = run(
        "predict",
        "--devices",
        "pm,ssd",
        "--write-ratio",
        "0",
        "--queue-depth",
        "1",
        "--request-size",
        "4k",
        "--randomness",
        "1",
        "--json",
    )
    assert ranked.exit_code == 0, ranked.output
    assert {"pm", "ssd"} <= set(ranked.output.replace('"', " ").split())
    out = tmp_path / "report.html"
    r = run("report", "--device", "pm", "--compare", "ssd", "--output", str(out))
    assert r.exit_code == 0, r.output
    html = out.read_text()
    assert "ssdpredict report: pm vs ssd" in html and "class pmem" in html and "pmem_stand_in True" in html
