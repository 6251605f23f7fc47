"""Open-loop trace validation on a reference device: sweep it, train it, replay traces on it.

One command (``bench/traces.py --reference``, or this file) does everything on a fresh
zram device (``collectors.devices.reference``; a loop device over tmpfs or a scratch file
where zram cannot be made, said so):

1. a closed-loop grid sweep (write ratio x size x queue depth x numjobs) plus open-loop
   points (Poisson arrivals at 10/30/60/90 % of each mix's capacity), then training, all
   through the ``ssdpredict`` CLI as a user would run them;
2. the open-loop noise floor: the same synthetic Poisson trace at 50 % load replayed
   ``repeats`` times; per window, how far a run's mean and p99 latency land from the
   median of the runs (the floor no model can beat);
3. per trace -- the three shared traces and synthetic Poisson and H2 traces at 20, 50,
   80, 95 and 120 % of the device's capacity -- one replay, then both methods' predictions
   compared with it: windows compared, replay drift (whole trace and the worst window),
   mean and p99 latency MRE over unsaturated windows for ``open-loop`` and ``trace-qd``,
   and the saturation flags against the replay falling behind.

fio runs at real-time priority (``chrt --fifo``, root only) through a wrapper named by
``SSDPREDICT_FIO``, so the other work on a shared machine disturbs the timing less.

    .venv/bin/python bench/traces.py --reference --skip-throughput            # ~12 min
    .venv/bin/python bench/traces.py --reference --quick --skip-throughput    # ~4 min
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from collectors.devices.reference import create_reference, destroy_reference  # noqa: E402
from modeling.serving.registry import ModelRegistry  # noqa: E402
from modeling.store import DataDir  # noqa: E402
from traces.characterize import characterize  # noqa: E402
from traces.openloop import closed_loop_curves  # noqa: E402
from traces.predict import device_source, predict_trace  # noqa: E402
from traces.replay import replay  # noqa: E402
from traces.synthetic import SyntheticSpec, load_levels, write_synthetic  # noqa: E402
from traces.validate import compare  # noqa: E402

TESTDATA = ROOT / "tests" / "data" / "traces"
DEVICE = "reference"
# psync with numjobs as the parallelism: trace replay issues each in-flight request from its
# own synchronous job, so that is the path whose curve predicts what a replay measures.
# The synthetic traces use large requests: zram serves 4 KiB in a few microseconds, at rates
# (hundreds of thousands of IO/s) that no timed replay reaches, while 256 KiB-1 MiB requests
# take 20-200 us of CPU, so 20-120 % of the capacity is replayable and queueing shows.
PLANS: dict[str, dict[str, Any]] = {
    "quick": {"write_ratios": "0,1", "sizes": "4k,16k,1m", "queue_depths": "1", "numjobs": "1,2,4,8,16",
              "runtime": "1s", "open_loop": "0.1,0.3,0.6,0.9", "mixes": [(0.0, 1 << 20)],
              "synthetic_s": 1.0, "synthetic_window": 0.5, "repeats": 2, "wsrch_s": 10.0, "budget": 10},
    "full": {"write_ratios": "0,0.4,1", "sizes": "4k,16k,256k,1m", "queue_depths": "1",
             "numjobs": "1,2,4,8,16,32", "runtime": "2s", "open_loop": "0.1,0.3,0.6,0.9",
             "mixes": [(0.0, 1 << 20), (0.4, 256 << 10)],
             "synthetic_s": 2.0, "synthetic_window": 0.5, "repeats": 3, "wsrch_s": 60.0, "budget": 30},
}


def _fio_wrapper(folder: Path) -> dict[str, str]:
    """Environment that makes the product's fio calls run at real-time priority (root only)."""
    fio, chrt = shutil.which("fio"), shutil.which("chrt")
    if not (fio and chrt and os.geteuid() == 0):
        print("  (fio at normal priority: real-time needs root and chrt)")
        return {}
    wrapper = folder / "fio-rt"
    wrapper.write_text(f'#!/bin/sh\nexec {chrt} --fifo 20 {fio} "$@"\n')
    wrapper.chmod(0o755)
    return {"SSDPREDICT_FIO": str(wrapper)}


def _cli(home: Path, env: dict[str, str], *args: str) -> None:
    full = {**os.environ, **env, "SSDPREDICT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "service.cli.main", *args], env=full, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        why = proc.stderr.strip() or proc.stdout.strip()
        raise SystemExit(f"ssdpredict {args[0]} failed: {why}")


def _cut(path: Path, seconds: float, out: Path) -> Path:
    """The first ``seconds`` of a 5-field (mqsim) trace."""
    lines = path.read_text().splitlines()
    t0 = float(lines[0].split()[0])
    out.write_text("\n".join(ln for ln in lines if float(ln.split()[0]) - t0 < seconds * 1e9) + "\n")
    return out


def noise_floor(trace: Path, target: str, window_s: float, repeats: int) -> dict[str, float]:
    """Mean relative distance of each run's per-window latency from the runs' median."""
    runs = [replay(trace, target, destroy_data=True, window_s=window_s).windows.set_index("window_start_s")
            for _ in range(repeats)]
    out = {}
    for m in ("latency_mean_us", "latency_p99_us"):
        table = pd.concat([r[m] for r in runs], axis=1).dropna()
        med = table.median(axis=1)
        out[m] = float((table.sub(med, axis=0).abs().div(med, axis=0)).to_numpy().mean())
    return out


def evaluate(datadir: DataDir, trace: Path, target: str, window_s: float, out: Path) -> dict[str, Any]:
    """One replay of ``trace``, both methods compared with it."""
    rep = replay(trace, target, destroy_data=True, window_s=window_s)
    row: dict[str, Any] = {"trace": trace.stem, "requests": rep.requests, "drift": rep.drift,
                           "worst_window_drift": float(rep.windows["window_drift"].abs().max())}
    for method in ("open-loop", "trace-qd"):
        pred, _ = predict_trace(datadir, DEVICE, trace, window_s=window_s, method=method)
        df, summary = compare(pred, rep.windows)
        df.to_csv(out / f"{trace.stem}.{method}.csv", index=False)
        err = summary["errors"]
        tag = "ol" if method == "open-loop" else "qd"
        row[f"{tag}_mean"] = err["latency_mean_us"]["unsaturated"]["mre"]
        row[f"{tag}_p99"] = err["latency_p99_us"]["unsaturated"]["mre"]
        row["unsaturated"] = err["latency_mean_us"]["unsaturated"]["n"]
        row["windows"] = int((~df["too_short"]).sum())
        if method == "open-loop":
            from traces.plot import plot_validation

            title = f"reference device, {trace.name}"
            plot_validation(df, out / f"{trace.stem}.png", title=title, summary=summary)
            sat = summary["saturation"] or {}
            row.update(sat_agree=sat.get("agree"), sat_pred=sat.get("predicted"),
                       sat_meas=sat.get("measured"), utilisation=float(df["utilisation"].max()))
    return row


def _fmt(v: Any, pct: bool = True) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "  n/a"
    return f"{v * 100:5.1f}%" if pct else str(v)


def run(quick: bool, out: Path, size_mib: int = 256, keep: bool = False) -> None:
    """The whole benchmark (see the module docstring)."""
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # progress shows when redirected to a file
    plan = PLANS["quick" if quick else "full"]
    t_start = time.time()
    out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="bench-ref-"))
    datadir = DataDir(home)
    ref = create_reference(datadir, "auto", size_mib << 20)
    print(f"reference device {ref.path}: {ref.note}; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")
    try:
        env = _fio_wrapper(home)
        _cli(home, env, "sweep", "--device", DEVICE, "--target", ref.path, "--destroy-data", "--plan", "grid",
             "--write-ratios", plan["write_ratios"], "--sizes", plan["sizes"], "--queue-depths",
             plan["queue_depths"], "--numjobs", plan["numjobs"], "--randomness", "1", "--engine", "psync",
             "--runtime", plan["runtime"], "--size", f"{size_mib - 16}MiB", "--open-loop", plan["open_loop"])
        print(f"  swept (closed loop + open-loop points) in {time.time() - t_start:.0f} s")
        _cli(home, env, "train", "--device", DEVICE, "--folds", "3", "--time-budget", str(plan["budget"]))
        print(f"  trained at {time.time() - t_start:.0f} s")
        model = ModelRegistry(datadir).load(DEVICE)
        source = device_source(datadir, DEVICE, model)
        synth = out / "synthetic"
        traces: list[tuple[Path, float]] = [
            (TESTDATA / "sample.blktrace.0", 0.1),
            (TESTDATA / "tpcc-small.trace", 0.05),
            (_cut(TESTDATA / "wsrch-small.trace", plan["wsrch_s"], out / "wsrch-cut.trace"), 1.0),
        ]
        floor_trace = None
        for wr, size in plan["mixes"]:
            probe_path, _ = write_synthetic(SyntheticSpec(1000, 1.0, "poisson", wr, size), synth)
            probe = characterize(str(probe_path))
            cap = closed_loop_curves(model, probe.windows, source.loads).curve(0, "value").capacity
            print(f"  capacity at write ratio {wr:g}, {size // 1024} KiB: {cap:,.0f} IO/s (model)")
            for process in ("poisson", "h2"):
                for spec in load_levels(cap, duration_s=plan["synthetic_s"], process=process, write_ratio=wr,
                                        size=size):
                    path, _ = write_synthetic(spec, synth)
                    traces.append((path, plan["synthetic_window"]))
                    if floor_trace is None and process == "poisson" and spec.load == 0.5:
                        floor_trace = path
        assert floor_trace is not None
        floor = noise_floor(floor_trace, ref.path, plan["synthetic_window"], plan["repeats"])
        print(f"  open-loop noise floor ({plan['repeats']} replays of {floor_trace.stem}): mean latency "
              f"{floor['latency_mean_us'] * 100:.1f} %, p99 {floor['latency_p99_us'] * 100:.1f} %")
        rows = []
        print(f"  {'trace':26s} {'win':>4s} {'unsat':>5s} {'drift':>7s} {'worst':>6s} {'peak u':>6s}"
              f"  {'OL mean':>7s} {'OL p99':>7s}  {'QD mean':>7s} {'QD p99':>7s}  saturation (pred/meas)")
        for path, window_s in traces:
            r = evaluate(datadir, path, ref.path, window_s, out)
            rows.append(r)
            print(f"  {r['trace'][:26]:26s} {r['windows']:4d} {r['unsaturated']:5d} {r['drift'] * 100:+6.1f}%"
                  f" {_fmt(r['worst_window_drift'])} {r['utilisation'] * 100:5.0f}%  {_fmt(r['ol_mean']):>7s}"
                  f" {_fmt(r['ol_p99']):>7s}  {_fmt(r['qd_mean']):>7s} {_fmt(r['qd_p99']):>7s}"
                  f"  {_fmt(r['sat_agree'])} ({r['sat_pred']}/{r['sat_meas']})")
        table = pd.DataFrame(rows)
        unsat = table[table["unsaturated"] > 0]
        means = {k: unsat[k].mean() * 100 for k in ("ol_mean", "ol_p99", "qd_mean", "qd_p99")}
        print(f"  mean over traces with unsaturated windows: open-loop mean {means['ol_mean']:.1f} %,"
              f" p99 {means['ol_p99']:.1f} %; trace-qd mean {means['qd_mean']:.1f} %,"
              f" p99 {means['qd_p99']:.1f} %; saturation agreement "
              f"{table['sat_agree'].mean() * 100:.0f} % (targets: 15 %, 30 %, 90 %)")
        (out / "reference.json").write_text(json.dumps({"device": ref.path, "kind": ref.kind, "floor": floor,
                                                        "rows": rows, "quick": quick}, indent=1, default=str))
        print(f"  done in {time.time() - t_start:.0f} s; results in {out / 'reference.json'}")
    finally:
        destroy_reference(datadir, ref.path)
        if keep:
            print(f"  data directory kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the data directory (sweep and model)")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "bench-trace-reference")
    a = ap.parse_args()
    run(a.quick, a.out, keep=a.keep)
