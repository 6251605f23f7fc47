"""``trace validate``'s light open-loop probe: the trace's light rates measured again right before
the replay, the prediction re-anchored on them, and the one as swept beside it against the same
replay (:mod:`traces.validate.openloop_probe`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from modeling.store import DataDir
from modeling.store.open_loop_rows import OFFERED
from service.cli.main import app
from service.config import get_settings
from tests.traces.helpers import write_generic
from traces.validate.openloop_probe import AnchorPoint, Planned, plan_probe, reanchor

KIB4 = {"write_ratio": 0.0, "queue_depth": 1, "request_size": 4096, "randomness": 1.0, "read_size": 4096,
        "write_size": 4096, "numjobs": 16, "engine": "psync"}
WRITES = {**KIB4, "write_ratio": 1.0, "request_size": 65536, "read_size": 65536, "write_size": 65536}


def _point(mix: dict[str, object], rate: float, mean: float) -> dict[str, object]:
    return {**mix, "offered_iops": rate, "iops": rate, "latency_mean_us": mean, "latency_p99_us": 3 * mean}


def _stored() -> pd.DataFrame:
    """A device's open-loop rows: 4 KiB reads at the sweep's rates, 64 KiB writes, and a replay-path
    capacity point (never an anchor)."""
    reads = [_point(KIB4, r, m) for r, m in ((400, 16.0), (432, 15.0), (1_000, 11.0), (1_600, 9.5),
                                               (1_900, 9.0))]
    writes = [_point(WRITES, r, 80.0) for r in (100, 300)]
    replay = {**_point(KIB4, 6_000, 900.0), "iops": 2_000.0, "open_loop_method": "replay"}
    return pd.DataFrame([*reads, *writes, replay])


def _table(rates: list[float], util: list[float], mix: dict[str, object] = KIB4,
           requests: int = 200) -> pd.DataFrame:
    """An as-swept window table (the columns the probe reads)."""
    return pd.DataFrame({"write_ratio": mix["write_ratio"], "request_size": mix["request_size"],
                         "randomness": mix["randomness"], "offered_iops": rates, "utilisation": util,
                         "requests": requests, "too_short": False, "saturated": [u >= 1 for u in util]})


def test_a_steady_light_trace_gets_one_point_at_its_median_rate_and_its_heavy_windows_none() -> None:
    table = pd.concat([_table([390, 400, 405, 410, 440], [0.2] * 5),
                       _table([1_900, 1_950], [0.95, 0.97]),  # near the wall: fio's lanes would land past it
                       _table([300], [0.05], WRITES, requests=50)])  # under a tenth of the light requests
    [p] = plan_probe(_stored(), table)
    assert p.rate == 405 and p.key == (0.0, 12.0, 1.0) and p.workload.numjobs == 16
    assert p.band == pytest.approx((405 / 1.2, 405 * 1.2))


def test_a_bursty_trace_gets_its_median_and_95th_percentile_and_a_second_mix_if_it_carries_enough() -> None:
    table = pd.concat([_table([300, 500, 600, 700, 900], [0.3] * 5), _table([200, 250], [0.05] * 2, WRITES)])
    points = plan_probe(_stored(), table)
    assert [p.rate for p in points] == [600, 860, 225]
    assert [p.key[0] for p in points] == [0.0, 0.0, 1.0]
    # at most MAX_POINTS in all: a mix that would pass it is left out
    assert len(plan_probe(_stored(), table, max_points=2)) == 2
    assert plan_probe(_stored(), _table([1_900], [0.95])) == []  # nothing light
    assert plan_probe(_stored().iloc[-1:], table) == []  # no fio point to re-anchor


def test_reanchoring_replaces_the_stored_points_in_the_band_and_keeps_the_rest() -> None:
    stored = _stored()
    [p] = plan_probe(stored, _table([400, 405, 410], [0.2] * 3))
    fresh = {**_point(KIB4, 405, 12.0), "offered_iops": 409.0}
    out, said = reanchor(stored, [p], [fresh])
    reads = out[(out["write_ratio"] == 0) & (out["open_loop_method"] != "replay")]
    assert sorted(reads["offered_iops"]) == [409.0, 1_000, 1_600, 1_900]  # 400 and 432 replaced
    assert reads.loc[reads["offered_iops"] == 409.0, "anchor_source"].tolist() == ["validate-probe"]
    assert len(out) == len(stored) - 1 and (out["open_loop_method"] == "replay").sum() == 1
    n, swept = said[0]
    assert n == 2 and swept == {"offered_iops": 400.0, "latency_mean_us": 16.0, "latency_p99_us": 48.0}
    # the anchor is the probe's and the sweep's point's geometric mean, at the rate probed, and so is
    # every percentile both hold (one the sweep's point lacks stays the probe's)
    fresh = {**fresh, "latency_p50_us": 10.0, "latency_p90_us": 20.0}
    stored.loc[0, "latency_p50_us"] = 14.4
    out, _ = reanchor(stored, [p], [fresh])
    anchor = out[out["anchor_source"] == "validate-probe"].iloc[0]
    assert anchor["latency_mean_us"] == pytest.approx((12.0 * 16.0) ** 0.5)
    assert anchor["latency_p99_us"] == pytest.approx((36.0 * 48.0) ** 0.5)
    assert anchor["latency_p50_us"] == pytest.approx(12.0) and anchor["latency_p90_us"] == 20.0
    assert anchor["offered_iops"] == 409.0
    # a rate where the sweep had no point: the probe is added, nothing is replaced
    far = Planned(p.key, p.workload, 5_000, (4_000.0, 6_000.0))
    out, said = reanchor(stored, [far], [_point(KIB4, 5_000, 7.0)])
    assert len(out) == len(stored) + 1 and said == [(0, None)]
    assert out.loc[out["offered_iops"] == 5_000, "latency_mean_us"].tolist() == [7.0]  # the probe as measured
    assert stored["latency_mean_us"].tolist()[:2] == [16.0, 15.0]  # the caller's rows are not changed
    # two points of one mix: all the band's stored points go, each is compared with those near its rate
    two = plan_probe(stored, _table([300, 500, 600, 700, 1_000], [0.3] * 5))
    assert [p.rate for p in two] == [600, 940] and two[0].band == pytest.approx((500.0, 1_128.0))
    out, said = reanchor(stored, two, [_point(KIB4, 600, 14.0), _point(KIB4, 940, 12.0)])
    assert sorted(out.loc[out["write_ratio"] == 0, "offered_iops"])[:3] == [400, 432, 600]
    assert said[0] == (0, None)  # 1,000 IO/s is not within 20 % of 600: dropped, not compared
    assert said[1] == (1, {"offered_iops": 1_000.0, "latency_mean_us": 11.0, "latency_p99_us": 33.0})


def test_an_anchor_points_note_gives_the_sweeps_value_the_probes_and_the_change() -> None:
    now = {"offered_iops": 409.0, "latency_mean_us": 12.0, "latency_p99_us": 30.0}
    p = AnchorPoint("4 KiB reads", 405, now, {"offered_iops": 400.0, "latency_mean_us": 16.0,
                                              "latency_p99_us": 48.0}, 2, 5.5)
    assert p.change == pytest.approx(-0.25)
    assert p.note == ("open-loop anchor for 4 KiB reads at 405 IO/s: sweep --for-trace measured 16.0 us "
                      "mean, p99 48.0 at 400 IO/s; probed now 12.0 us mean, p99 30.0 at 409 IO/s (-25%, "
                      "5.5 s); the re-anchored prediction uses their geometric mean (13.9 us mean, "
                      "p99 37.9) in place of 2 stored point(s) near it")
    assert p.to_dict()["change_mean"] == pytest.approx(-0.25) and p.to_dict()["replaced"] == 2
    assert p.anchor["latency_mean_us"] == pytest.approx(192**0.5) and p.anchor[OFFERED] == 409.0
    # without a stored point near its rate, or one more than 2x from it, the anchor is the probe's
    alone = AnchorPoint("4 KiB reads", 405, now, None, 0, 5.5)
    assert alone.anchor == now and alone.change is None
    changed = AnchorPoint("4 KiB reads", 405, now, {"offered_iops": 400.0, "latency_mean_us": 40.0,
                                                    "latency_p99_us": 90.0}, 1, 5.5)
    assert changed.anchor == now
    assert changed.note.endswith("uses the probe alone (more than 2x from the sweep's: the device changed) "
                                 "in place of 1 stored point(s) near it")


def _poisson_reads(path: Path, rate: float, seconds: float, seed: int = 3) -> Path:
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1 / rate, int(rate * seconds)))
    n = len(t)
    off = rng.integers(0, (64 << 20) // 4096, n) * 4096
    return write_generic(path, t, np.zeros(n, bool), off, np.full(n, 4096))


def test_both_predictions_are_compared_with_the_same_replay_and_the_headline_is_the_re_anchored_one() -> None:
    from traces.predict.windows import TracePrediction
    from traces.validate.compare import _beside, compare
    from traces.validate.openloop_probe import OpenLoopProber

    def predicted(mean: list[float]) -> TracePrediction:
        win = pd.DataFrame({"window_start_s": [0.0, 0.5, 1.0], "too_short": False, "saturated": False,
                            "requests": 500, "pred_latency_mean_us": mean, "pred_latency_p99_us": 40.0})
        return TracePrediction("d", "v1", "open-loop", win, {})

    measured = pd.DataFrame({"window_start_s": [0.0, 0.5, 1.0], "latency_mean_us": [10.0, 12.0, 20.0],
                             "latency_p99_us": 50.0})
    anchored, swept = predicted([11.0, 12.0, 18.0]), predicted([15.0, 15.0, 15.0])
    df, summary = compare(anchored, measured)
    df, probe = _beside(df, swept, measured, OpenLoopProber("t", True))
    assert summary["errors"]["latency_mean_us"]["mre"] == pytest.approx((0.1 + 0 + 0.1) / 3)
    assert probe["headline"] == "re-anchored" and probe["points"] == []
    assert probe["as_swept"]["errors"]["latency_mean_us"]["mre"] == pytest.approx((0.5 + 0.25 + 0.25) / 3)
    assert df["as_swept_pred_latency_mean_us"].tolist() == [15.0] * 3
    assert df["as_swept_latency_mean_us_rel_error"].tolist() == pytest.approx([0.5, 0.25, 0.25])
    assert df["latency_mean_us_rel_error"].tolist() == pytest.approx([0.1, 0.0, 0.1])


def _trained_home(trained_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DataDir:
    """A copy of the trained data directory, made the CLI's home."""
    home = tmp_path / "home"
    shutil.copytree(trained_root, home)
    monkeypatch.setenv("SSDPREDICT_HOME", str(home))
    get_settings.cache_clear()
    return DataDir(home)


def _validate_json(trace: Path, tmp_path: Path) -> dict:
    """``trace validate --json`` of ``trace`` on ``synth`` with a file target under ``tmp_path``."""
    res = CliRunner().invoke(app, ["trace", "validate", str(trace), "--device", "synth", "--target",
                                   str(tmp_path / "t.img"), "--destroy-data", "--window", "300ms",
                                   "--capacity-probes", "0", "--no-device-check", "--plot",
                                   str(tmp_path / "p.png"), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


@pytest.mark.slow
def test_validate_reports_the_re_anchored_prediction_and_the_one_as_swept_against_the_same_replay(
    trained_root: Path, tmp_path: Path, fio_available: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a copy of the trained device with open-loop points of 4 KiB random reads that say 5 ms, which a
    # file target does not take (this machine's disk reads 4 KiB in 0.1-1 ms; a 500 us point was within
    # its spread): the probe, at the trace's rate, measures what the file does now
    d = _trained_home(trained_root, tmp_path, monkeypatch)
    d.catalog.add_measurements("synth", [_point(KIB4, r, 5_000.0) for r in (300, 2_000, 6_000)])
    before = len(d.catalog.measurements("synth"))
    trace = _poisson_reads(tmp_path / "poisson.csv", 2_000.0, 0.6)
    doc = _validate_json(trace, tmp_path)
    probe = doc["open_loop_probe"]
    [point] = probe["points"]
    assert point["swept"]["offered_iops"] == 2_000 and point["swept"]["latency_mean_us"] == 5_000.0
    assert point["replaced"] == 1 and 0 < point["probed"]["latency_mean_us"] < 2_000
    assert point["anchor"] == point["probed"]  # over 2x from the sweep's: the device changed, probe alone
    assert probe["headline"] == "re-anchored" and 0 < probe["seconds"] < 30
    compared = [w for w in doc["windows"] if w["latency_mean_us_rel_error"] is not None]
    assert compared
    for w in compared:
        # both predictions against the same replayed latency
        for who in ("", "as_swept_"):
            want = abs(w[f"{who}pred_latency_mean_us"] - w["latency_mean_us"]) / w["latency_mean_us"]
            assert w[f"{who}latency_mean_us_rel_error"] == pytest.approx(want)
        assert w["as_swept_pred_latency_mean_us"] > 3_000  # through the stored 5 ms point
        assert w["pred_latency_mean_us"] < 0.8 * w["as_swept_pred_latency_mean_us"]  # through the anchor
    swept = probe["as_swept"]["errors"]["latency_mean_us"]
    anchored = doc["summary"]["errors"]["latency_mean_us"]
    assert swept["n"] == anchored["n"] == len(compared)
    assert anchored["mre"] < swept["mre"]
    assert len(d.catalog.measurements("synth")) == before  # the probe's points are not stored
    assert not any("open-loop probe did not run" in w for w in doc["warnings"])


@pytest.mark.slow
def test_validate_says_when_the_probe_has_no_stored_point_to_measure_again(
    trained_root: Path, tmp_path: Path, fio_available: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the trained device has closed-loop points only: nothing to re-anchor, said in the warnings
    _trained_home(trained_root, tmp_path, monkeypatch)
    trace = _poisson_reads(tmp_path / "poisson.csv", 2_000.0, 0.6)
    doc = _validate_json(trace, tmp_path)
    assert doc["open_loop_probe"] is None
    said = [w for w in doc["warnings"] if "open-loop probe did not run" in w]
    assert len(said) == 1 and "no light window" in said[0], doc["warnings"]
