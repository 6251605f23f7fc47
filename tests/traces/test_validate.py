"""Validation: the CLI (with and without a replay) and the API route."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from modeling.store import DataDir
from modeling.workload import METRICS
from service.api.main import create_app
from service.cli.main import app
from service.config import get_settings
from tests.traces.helpers import DATA, sequential_writes, write_generic
from traces.validate.compare import MIN_P99_REQUESTS, validate_trace


def _check_errors(windows: list[dict], metric: str) -> None:
    for w in windows:
        if w.get(metric) is None or w.get(f"pred_{metric}") is None:
            continue
        if metric == "latency_p99_us" and w["requests"] < MIN_P99_REQUESTS:
            assert w[f"{metric}_rel_error"] is None  # a p99 of a few requests is not compared
            continue
        expected = abs(w[f"pred_{metric}"] - w[metric]) / w[metric]
        assert w[f"{metric}_rel_error"] == pytest.approx(expected)


def test_validate_trace_with_latency_against_itself(trained: DataDir, tmp_path: Path) -> None:
    report = validate_trace(
        trained, "synth", DATA / "sample.blktrace.0", window_s=0.1, plot_path=tmp_path / "v.png"
    )
    doc = report.to_dict()
    assert len(doc["windows"]) == 4
    for m in METRICS:
        _check_errors(doc["windows"], m)
        err = [w[f"{m}_rel_error"] for w in doc["windows"] if w[f"{m}_rel_error"] is not None]
        assert doc["summary"]["errors"][m]["n"] == len(err) > 0
        assert doc["summary"]["errors"][m]["mre"] == pytest.approx(float(np.mean(err)))
    png = (tmp_path / "v.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_validate_without_latency_gives_predictions_only(trained: DataDir) -> None:
    report = validate_trace(trained, "synth", DATA / "tpcc-small.trace", window_s=0.05)
    assert report.summary["errors"] == {} and report.warnings
    assert (report.windows["pred_iops"] > 0).all()


def test_validate_cli_with_replay_target(trained: DataDir, tmp_path: Path, fio_available: str) -> None:
    t, w, off, size, _ = sequential_writes(200, 65536, 1, latency_s=0.01)
    trace = write_generic(tmp_path / "seq.csv", t, w, off, size)
    res = CliRunner().invoke(
        app,
        [
            "trace",
            "validate",
            str(trace),
            "--device",
            "synth",
            "--target",
            str(tmp_path / "t.img"),
            "--window",
            "500ms",
            "--plot",
            str(tmp_path / "p.png"),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["replay"]["requests"] == 200 and doc["summary"]["measured"]
    assert sum(w["replay_requests"] for w in doc["windows"]) == 200
    # windows where fio or the CPU fell behind (a loaded machine) are counted, not compared
    limited = sum(bool(w["replay_limited"]) for w in doc["windows"])
    assert doc["summary"]["saturation"]["replay_limited"] == limited
    assert doc["summary"]["errors"]["latency_mean_us"]["n"] == len(doc["windows"]) - limited
    _check_errors([w for w in doc["windows"] if not w["replay_limited"]], "latency_mean_us")
    assert (tmp_path / "p.png").exists()
    # the probe needs --destroy-data: said, not skipped silently
    assert doc["open_loop_probe"] is None
    said = [w for w in doc["warnings"] if "open-loop probe did not run" in w]
    assert len(said) == 1 and "--destroy-data" in said[0], doc["warnings"]


def test_validate_cli_unknown_device(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["trace", "validate", str(DATA / "tpcc-small.trace"), "--device", "nope"])
    assert res.exit_code == 2 and "unknown device" in res.output


@pytest.mark.parametrize(("n", "bound"), [("-1", "greater than or equal to 0"),
                                          ("10", "less than or equal to 9")])
def test_validate_cli_capacity_probes_out_of_range(n: str, bound: str) -> None:
    res = CliRunner().invoke(app, ["trace", "validate", str(DATA / "tpcc-small.trace"), "--device", "nope",
                                   "--capacity-probes", n])
    said = " ".join(res.output.replace("│", " ").split())  # rich's error box folds the line
    assert res.exit_code == 2 and "--capacity-probes" in said and bound in said
    assert "unknown device" not in said  # refused before anything is looked up


def _validated(client: TestClient, name: str, form: dict[str, str]) -> dict:
    """The answer of /validate on the data file ``name`` for the trained device (must be 200)."""
    blob = (DATA / name).read_bytes()
    res = client.post("/v1/devices/synth/validate", files={"file": (name, blob)}, data=form)
    assert res.status_code == 200, res.text
    return res.json()  # type: ignore[no-any-return]


def test_validate_route(trained: DataDir) -> None:
    client = TestClient(create_app(get_settings()))
    blob = (DATA / "sample.blktrace.0").read_bytes()
    doc = _validated(client, "sample.blktrace.0", {"window_s": "0.1"})
    assert len(doc["windows"]) == 4 and doc["summary"]["trace"]["requests"] == 963
    assert set(doc["summary"]["errors"]) == set(METRICS)
    _check_errors(doc["windows"], "iops")
    res = client.post("/v1/devices/synth/validate", files={"file": ("x.trace", b"hello\n")})
    assert res.status_code == 422 and res.json()["error"]["code"] == "bad_trace"
    res = client.post("/v1/devices/nope/validate", files={"file": ("x.trace", blob)})
    assert res.status_code == 404
    res = client.post("/v1/devices/synth/validate", files={"file": ("t", blob)}, data={"window_s": "0"})
    assert res.status_code == 422


def test_validate_route_trace_without_latency(trained: DataDir) -> None:
    doc = _validated(TestClient(create_app(get_settings())), "tpcc-small.trace", {"window_requests": "1000"})
    assert doc["summary"]["errors"] == {} and doc["warnings"]
    assert [w["requests"] for w in doc["windows"]] == [1000] * 6 + [999]
    assert all("latency_mean_us" not in w and w["pred_latency_mean_us"] > 0 for w in doc["windows"])
    assert all(w["offered_iops"] > 0 and "iops" not in w for w in doc["windows"])
    assert doc["method"] == "open-loop" and all(w["utilisation"] > 0 for w in doc["windows"])


def test_replay_limited_windows_are_counted_apart_from_the_errors() -> None:
    import pandas as pd

    from traces.predict.windows import TracePrediction
    from traces.validate.compare import compare

    pred = pd.DataFrame({"window_start_s": [0.0, 1.0, 2.0], "too_short": False, "saturated": False,
                         "requests": [500, 500, 150], "pred_latency_mean_us": 10.0,
                         "pred_latency_p99_us": 20.0})
    meas = pd.DataFrame({"window_start_s": [0.0, 1.0, 2.0], "latency_mean_us": [10.0, 12.5, 1000.0],
                         "latency_p99_us": [20.0, 20.0, 5000.0], "replay_limited": [False, False, True],
                         "measured_saturated": [False, True, None]})
    df, summary = compare(TracePrediction("d", "v1", "open-loop", pred, {}), meas)
    err = summary["errors"]["latency_mean_us"]
    assert err["n"] == 2 and err["mre"] == pytest.approx((0 + 0.2) / 2)
    assert np.isnan(df["latency_mean_us_rel_error"].iloc[2])
    sat = summary["saturation"]
    assert sat["windows"] == 2 and sat["measured"] == 1 and sat["replay_limited"] == 1
    assert sat["agree"] == pytest.approx(1 / 2)
    # the p99 of a window under MIN_P99_REQUESTS requests is not compared
    pred.loc[0, "requests"] = MIN_P99_REQUESTS - 1
    df, summary = compare(TracePrediction("d", "v1", "open-loop", pred, {}), meas)
    assert summary["errors"]["latency_p99_us"]["n"] == 1 and summary["errors"]["latency_mean_us"]["n"] == 2
    assert np.isnan(df["latency_p99_us_rel_error"].iloc[0])
