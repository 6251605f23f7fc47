"""`trace predict` (CLI and API) on every trace format, and the validation PNG."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from modeling.store import DataDir
from service.api.main import create_app
from service.cli.main import app
from service.config import get_settings
from tests.traces.helpers import DATA, write_generic
from traces.predict.windows import predict_trace
from traces.validate.compare import compare

FORMATS = {
    "sample.blktrace.0": "blktrace",
    "sample.blkparse.txt": "blkparse",
    "fio-v2.iolog": "fio",
    "fio-v3.iolog": "fio",
    "msr-sample.csv": "msr",
    "spc-sample.csv": "spc",
    "tpcc-small.trace": "mqsim",
    "disksim-sample.trace": "disksim",
    "generic.csv": "csv",
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_trace_predict_cli_every_format(trained: DataDir, tmp_path: Path, name: str) -> None:
    out = tmp_path / "w.csv"
    args = ["trace", "predict", str(DATA / name), "--device", "synth", "--window", "50ms", "-o", str(out)]
    # disksim is mqsim's layout with ms timestamps: only the name can tell them apart
    res = CliRunner().invoke(app, [*args, "--format", FORMATS[name], "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["summary"]["trace"]["format"].startswith(FORMATS[name]) and doc["method"] == "open-loop"
    table = pd.read_csv(out)
    assert len(table) == len(doc["windows"]) == doc["summary"]["windows"]
    for w in doc["windows"]:
        assert w["offered_iops"] > 0 and w["capacity_iops"] > 0
        assert w["utilisation"] == pytest.approx(w["offered_iops"] / w["capacity_iops"])
        assert w["pred_latency_mean_us_lower"] <= w["pred_latency_mean_us"] <= w["pred_latency_mean_us_upper"]
        assert w["pred_latency_p99_us"] >= w["pred_latency_mean_us"]
        if w["saturated"]:
            assert w["pred_iops"] == pytest.approx(w["capacity_iops"])
        else:
            assert w["pred_iops"] == pytest.approx(w["offered_iops"])
            assert w["pred_inflight"] == pytest.approx(w["offered_iops"] * w["pred_latency_mean_us"] / 1e6)


def test_trace_predict_methods_differ_and_table_is_printed(trained: DataDir) -> None:
    path = DATA / "wsrch-small.trace"
    ol, _ = predict_trace(trained, "synth", path, window_s=5.0)
    qd, _ = predict_trace(trained, "synth", path, window_s=5.0, method="trace-qd")
    assert (ol.windows["utilisation"] < 1).all() and not ol.windows["saturated"].any()
    assert not np.allclose(ol.windows["pred_latency_mean_us"], qd.windows["pred_latency_mean_us"])
    res = CliRunner().invoke(app, ["trace", "predict", str(path), "--device", "synth", "--window", "10s"])
    assert res.exit_code == 0, res.output
    assert "peak utilisation" in res.output and "pred_latency_mean_us" in res.output
    res = CliRunner().invoke(app, ["trace", "predict", str(path), "--device", "synth", "--method", "guess"])
    assert res.exit_code == 2 and "unknown method" in res.output


def test_a_fast_trace_saturates(trained: DataDir, tmp_path: Path) -> None:
    # 200k 64 KiB random writes per second: far beyond the synthetic device's 2 GB/s
    n = 20_000
    t = np.arange(n) / 200_000
    offsets = (np.arange(n) * 7919 % 4096) * 65536
    trace = write_generic(tmp_path / "fast.csv", t, np.ones(n, bool), offsets, np.full(n, 65536))
    res, _ = predict_trace(trained, "synth", trace, window_s=0.02)
    w = res.windows
    assert w["saturated"].all() and (w["utilisation"] > 1).all()
    assert (np.diff(w["pred_latency_mean_us"]) > 0).all()  # the backlog grows window after window
    assert res.summary["saturated_windows"] == len(w)


def test_zero_response_times_carry_no_latency(trained: DataDir, tmp_path: Path) -> None:
    rows = [f"{128166372000000000 + i * 2000},h,0,Read,{i * 4096},4096,0" for i in range(300)]
    trace = tmp_path / "zero.csv"
    trace.write_text("\n".join(rows) + "\n")
    res, char = predict_trace(trained, "synth", trace, window_s=0.02)
    assert char.info.latency_source is None
    assert char.windows["latency_mean_us"].isna().all()
    assert char.summary["measured"]["latency_mean_us"] is None
    from traces.replay.iolog import load_requests, max_outstanding
    from traces.formats.reader import open_trace

    assert max_outstanding(load_requests(open_trace(trace))) is None  # does not size the replay
    df, summary = compare(res, None)
    assert summary["errors"] == {} and not summary["measured"]


def test_predict_trace_route(trained: DataDir) -> None:
    client = TestClient(create_app(get_settings()))
    blob = (DATA / "sample.blktrace.0").read_bytes()
    url = "/v1/devices/synth/predict-trace"
    res = client.post(url, files={"file": ("sample.blktrace.0", blob)}, data={"window_s": "0.1"})
    assert res.status_code == 200, res.text
    doc = res.json()
    assert doc["summary"]["trace"]["paths"] == ["sample.blktrace.0"] and len(doc["windows"]) == 4
    assert all(w["pred_latency_mean_us"] > 0 and w["offered_iops"] > 0 for w in doc["windows"])
    res = client.post(url, files={"file": ("t", blob)}, data={"method": "trace-qd"})
    assert res.status_code == 200 and res.json()["method"] == "trace-qd"
    res = client.post(url, files={"file": ("t", blob)}, data={"method": "x"})
    assert res.status_code == 422
    res = client.post(url, files={"file": ("x.trace", b"hello\n")})
    assert res.status_code == 422 and res.json()["error"]["code"] == "bad_trace"
    res = client.post("/v1/devices/nope/predict-trace", files={"file": ("x.trace", blob)})
    assert res.status_code == 404


@pytest.mark.parametrize("window", ["0.1", "1"])
def test_validation_png(trained: DataDir, tmp_path: Path, window: str) -> None:
    from traces.validate.compare import validate_trace

    png = tmp_path / f"v{window}.png"
    trace = DATA / "sample.blktrace.0"
    report = validate_trace(trained, "synth", trace, window_s=float(window), plot_path=png)
    assert len(report.windows) == (4 if window == "0.1" else 1)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.summary["errors"]["latency_mean_us"]["n"] == len(report.windows)


def test_validation_png_marks_replay_limited_and_measured_saturated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from traces.validate.plot import plot_validation

    df = pd.DataFrame({
        "window_start_s": [0.0, 0.5, 1.0], "window_end_s": [0.5, 1.0, 1.5], "too_short": False,
        "saturated": [False, False, True], "utilisation": [0.5, 0.9, 1.2], "offered_iops": 1000.0,
        "pred_iops": [1000.0, 1000.0, 900.0], "iops": [1000.0, 980.0, 850.0],
        "pred_latency_mean_us": 100.0, "latency_mean_us": [110.0, 900.0, 2000.0],
        "pred_latency_p99_us": 300.0, "latency_p99_us": [320.0, 3000.0, 9000.0],
        "replay_limited": [False, True, False], "measured_saturated": [False, False, True],
    })
    seen: dict[str, list[str]] = {}
    real_savefig = plt.Figure.savefig

    def keep_labels(fig: plt.Figure, *a: object, **k: object) -> None:  # what the PNG says, read back
        seen["suptitle"] = [fig.get_suptitle()]
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        seen["legend"] = [t.get_text() for leg in legends for t in leg.get_texts()]
        real_savefig(fig, *a, **k)

    monkeypatch.setattr(plt.Figure, "savefig", keep_labels)
    out = plot_validation(df, tmp_path / "v.png", title="t")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "1 window the replay fell behind (not compared)" in seen["suptitle"][0]
    assert "1 window predicted saturated" in seen["suptitle"][0]
    assert "measured, replay behind (not compared)" in seen["legend"]
    assert "measured saturated (replay fell behind)" in seen["legend"]
