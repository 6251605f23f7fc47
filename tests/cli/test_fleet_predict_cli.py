"""``predict --all-devices`` / ``--devices``: devices ranked per workload as a table, JSON or CSV."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from modeling.store import DataDir
from service.cli.main import app
from tests.modeling.test_fleet_rank import WORKLOADS, fleet, fleet_template

__all__ = ["fleet", "fleet_template"]

runner = CliRunner()
ONE = ["--write-ratio", "0.3", "--queue-depth", "8", "--request-size", "16k", "--randomness", "1"]


def test_one_workload_table_and_json(fleet: DataDir) -> None:
    r = runner.invoke(app, ["predict", "--all-devices", *ONE])
    assert r.exit_code == 0, r.output
    assert "devices ranked by p99 latency (lower is better)" in r.stdout
    lines = r.stdout.splitlines()
    order = [next(i for i, line in enumerate(lines) if f" {d} " in line) for d in ("fast", "mid", "slow")]
    assert order == sorted(order)  # fast first
    assert "skipped: untrained: device 'untrained' has no trained model" in " ".join(r.stderr.split())
    assert "skipped: iops-only" in r.stderr

    r = runner.invoke(app, ["predict", "--devices", "fast,s*", *ONE, "--json", "--rank-by", "iops"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["rank_by"] == "iops" and doc["higher_is_better"] and doc["count"] == 1
    assert doc["ranking"] == [["fast", "slow"]] and doc["skipped"] == []
    iops = doc["devices"]["fast"]["predictions"]["iops"]
    assert iops["lower"][0] < iops["value"][0] < iops["upper"][0]


def test_csv_of_workloads_to_a_csv_ranking(fleet: DataDir, tmp_path: Path) -> None:
    source, out = tmp_path / "w.csv", tmp_path / "ranked.csv"
    WORKLOADS.to_csv(source, index=False)
    r = runner.invoke(app, ["predict", "--all-devices", "--input", str(source), "-o", str(out), "--top", "2"])
    assert r.exit_code == 0, r.output
    assert "wrote 8 rows (4 workloads x 2 devices" in r.stdout
    rows = pd.read_csv(out)
    assert rows["device"].tolist() == ["fast", "mid"] * 4 and rows["rank"].tolist() == [1, 2] * 4
    assert {"write_ratio", "pred_latency_p99_us", "pred_iops_upper", "iops_model"} <= set(rows.columns)

    r = runner.invoke(app, ["predict", "--devices", "fast,mid", "--input", str(source)])  # a table by default
    assert r.exit_code == 0, r.output
    assert "4: 70% writes, QD4x1, 4k, 50% random" in r.stdout


def test_fleet_options_are_checked(fleet: DataDir) -> None:
    r = runner.invoke(app, ["predict", "--all-devices", *ONE, "--rank-by", "speed"])
    assert r.exit_code == 2 and "cannot rank by 'speed'" in r.output
    r = runner.invoke(app, ["predict", "--all-devices", *ONE, "--version", "v1"])
    assert r.exit_code == 2 and "--version is for one --device" in r.output
    r = runner.invoke(app, ["predict", "--device", "fast", *ONE, "--top", "1"])
    assert r.exit_code == 2 and "--rank-by and --top rank many devices" in r.output
    r = runner.invoke(app, ["predict", "--devices", "hdd-*", *ONE])
    assert r.exit_code == 2 and "no device matches 'hdd-*'" in r.output
    r = runner.invoke(app, ["predict", "--devices", "untrained", *ONE])
    assert r.exit_code != 0 and "none of the 1 devices can rank" in r.output
