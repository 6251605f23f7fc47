"""``ssdpredict whatif``: derived devices registered, listed and predicted through the real CLI."""

from __future__ import annotations

import json

import numpy as np

from typer.testing import CliRunner

from service.cli.main import app

runner = CliRunner()
QUERY = ["--write-ratio", "0", "--queue-depth", "8", "--request-size", "4k", "--randomness", "1"]


def run(*args: str):
    return runner.invoke(app, list(args))


def test_raid_whatif_is_listed_and_predicted_as_derived(trained: str) -> None:
    r = run("whatif", "raid", "--member", "synth", "--level", "5", "--members", "4", "--name", "arr")
    assert r.exit_code == 0, r.output
    assert "raid5 of 4" in r.output
    listed = json.loads(run("devices", "--json").output)["devices"]
    arr = next(d for d in listed if d["name"] == "arr")
    assert arr["class"] == "raid" and arr["derived"]["base"] == "synth" and arr["derived"]["level"] == 5
    assert next(d for d in listed if d["name"] == "synth")["derived"] is None
    out = json.loads(run("predict", "-d", "arr", *QUERY, "--json").output)
    assert out["derived"]["whatif"] is True and "read-modify-write" in out["derived"]["law"]
    assert all(p["model"] == "whatif" for p in out["predictions"].values())
    member = json.loads(run("predict", "-d", "synth", *QUERY, "--json").output)
    assert "derived" not in member
    # 4 members at 8 in flight: more reads per second than the member alone
    assert out["predictions"]["iops"]["value"] > member["predictions"]["iops"]["value"]
    table = run("predict", "-d", "arr", *QUERY)
    assert "what-if, not measured" in table.output


def test_fabric_whatif_over_a_raid_whatif(trained: str) -> None:
    assert (
        run("whatif", "raid", "--member", "synth", "--level", "0", "--members", "2", "--name", "r0").exit_code
        == 0
    )
    r = run("whatif", "fabric", "--local", "r0", "--transport", "rdma", "--added-latency", "10us", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert (
        doc["device"] == "r0-nvmeof-rdma" and doc["class"] == "nvmeof" and "+10 us" in doc["derived"]["law"]
    )
    local = json.loads(run("predict", "-d", "r0", *QUERY, "--queue-depth", "1", "--json").output)
    remote = json.loads(run("predict", "-d", "r0-nvmeof-rdma", *QUERY, "--queue-depth", "1", "--json").output)
    assert (
        remote["predictions"]["latency_mean_us"]["value"] > local["predictions"]["latency_mean_us"]["value"]
    )


def test_bad_whatif_input_is_one_line_and_exit_2(trained: str) -> None:
    cases = [
        (["raid", "--member", "nope", "--level", "0", "--members", "2"], "unknown device"),
        (["raid", "--member", "synth", "--level", "5", "--members", "2"], "at least 3"),
        (["raid", "--member", "synth", "--level", "4", "--members", "4"], "RAID level"),
        (["raid", "--member", "synth", "--level", "0", "--members", "2", "--chunk", "3k"], "chunk"),
        (["raid", "--member", "synth", "--level", "0", "--members", "2", "--name", "synth"], "itself"),
        (["fabric", "--local", "synth", "--transport", "fc"], "transport"),
    ]
    for args, message in cases:
        r = run("whatif", *args)
        assert r.exit_code == 2 and message in r.output, (args, r.output)


def test_train_with_a_whatif_reference_calibrates_it_on_the_measured_points(trained: str, datadir) -> None:
    from modeling.serving.registry import ModelRegistry
    from modeling.workload_matrix import workload_matrix
    from tests.modeling.conftest import synthetic_rows

    assert (
        run(
            "whatif", "raid", "--member", "synth", "--level", "0", "--members", "3", "--name", "arr"
        ).exit_code
        == 0
    )
    rows = synthetic_rows().drop_duplicates(
        ["write_ratio", "queue_depth", "request_size", "randomness", "numjobs"]
    )
    k8, other = rows.iloc[:8].copy(), rows.iloc[8:16]
    before = ModelRegistry(datadir).load("arr")
    for m, (v, *_rest) in before.predict_matrix(
        workload_matrix(k8), metrics=["iops", "latency_mean_us"]
    ).items():
        k8[m] = 1.5 * v if m == "iops" else v / 1.5  # the real array: 1.5x the what-if, everywhere
    datadir.catalog.ensure_device("real")
    datadir.catalog.add_measurements(
        "real", k8[[*k8.columns[:9], "iops", "latency_mean_us"]].to_dict("records")
    )
    r = run("train", "--device", "real", "--reference", "arr", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["calibration"]["points"] == 8 and doc["calibration"]["metrics"]["iops"]["kind"] == "constant"
    after = ModelRegistry(datadir).load("arr")
    w = workload_matrix(other)
    ratio = (
        after.predict_matrix(w, metrics=["iops"])["iops"][0]
        / before.predict_matrix(w, metrics=["iops"])["iops"][0]
    )
    np.testing.assert_allclose(ratio, 1.5, rtol=1e-6)
    assert "calibrated on 8 measured points of real" in after.law
    assert datadir.catalog.active_model_version("real") is None  # nothing trained: the what-if was calibrated


def test_a_base_without_model_is_refused_and_nothing_is_stored(trained: str, datadir) -> None:
    datadir.catalog.ensure_device("bare")
    r = run("whatif", "fabric", "--local", "bare", "--name", "bare-tcp")
    assert r.exit_code == 2 and "no trained model" in r.output
    assert not datadir.catalog.has_device("bare-tcp")
