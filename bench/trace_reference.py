"""Open-loop trace validation on a reference device: sweep it, train it, replay traces on it.

One command (``bench/traces.py --reference``, or this file) does everything on a fresh
zram device (``collectors.devices.reference``; a loop device over tmpfs or a scratch file
where zram cannot be made, said so):

1. a closed-loop grid sweep (write ratio x size x queue depth x numjobs) plus open-loop
   points (Poisson arrivals at 10/30/60/90 % of each mix's capacity), then training, all
   through the ``ssdpredict`` CLI as a user would run them;
2. the open-loop noise floor: the same synthetic Poisson trace at 50 % load replayed
   ``repeats`` times; per window, how far a run's mean and p99 latency land from the
   runs' mean (the floor no model can beat), with the same completions cut into windows of
   0.25-4 s: how long a window (how many requests) must be to get under 15 %;
3. per mix, the replay path's own capacity (``traces.replay.capacity``: a Poisson trace
   offered at 3x the model's capacity, replayed; what it serves), which is the
   reference's capacity for open-loop purposes: the synthetic load levels are fractions of
   it and the open-loop prediction of the synthetic traces caps the model's curve at it,
   so that "saturated" means the same for the prediction and the replay;
4. per trace -- the three shared traces and synthetic Poisson and H2 traces at 20, 50,
   80, 95 and 120 % of that capacity -- one replay, then both methods' predictions
   compared with it: windows compared, replay drift (whole trace and the worst window),
   mean and p99 latency MRE over unsaturated windows for ``open-loop`` and ``trace-qd``,
   and the saturation flags against the replay falling behind.  Windows where the replay
   itself (fio, the CPU) fell behind with its lanes idle are counted apart (``lim``) and
   left out of the errors: they measured the machine, not the device.

Before each replay, and once right after training per mix, a device check
(``traces/validate/device_check.py``: a 1 s QD1 probe at the trace's mix against the model) gives
the device's level against the model (``dev``: measured / predicted - 1 of the probe's mean
latency): the zram moves by tens of percent between sweep and replay, and an ``OL mean``
error of that size is the device's drift, not the method's.

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
from modeling.store.open_loop_rows import swept_mixes  # noqa: E402
from traces.validate.device_check import DeviceCheck, check_device, probe_mix  # noqa: E402
from traces.predict.openloop import closed_loop_curves  # noqa: E402
from traces.predict.windows import device_source, predict_trace  # noqa: E402
from traces.replay.run import replay  # noqa: E402
from traces.replay.capacity import measure_replay_capacity  # noqa: E402
from traces.synthetic import SyntheticSpec, load_levels, write_synthetic  # noqa: E402
from traces.validate.compare import compare  # noqa: E402

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
              "synthetic_s": 1.0, "synthetic_window": 0.5, "repeats": 2, "floor_s": 8.0, "wsrch_s": 10.0,
              "budget": 10},
    "full": {"write_ratios": "0,0.4,1", "sizes": "4k,16k,256k,1m", "queue_depths": "1",
             "numjobs": "1,2,4,8,16,32", "runtime": "2s", "open_loop": "0.1,0.3,0.6,0.9",
             "mixes": [(0.0, 1 << 20), (0.4, 256 << 10)],
             "synthetic_s": 2.0, "synthetic_window": 0.5, "repeats": 3, "floor_s": 16.0, "wsrch_s": 60.0,
             "budget": 30},
}


def fio_wrapper(folder: Path) -> dict[str, str]:
    """Environment that makes the product's fio calls run at real-time priority (root only)."""
    fio, chrt = shutil.which("fio"), shutil.which("chrt")
    if not (fio and chrt and os.geteuid() == 0):
        print("  (fio at normal priority: real-time needs root and chrt)")
        return {}
    wrapper = folder / "fio-rt"
    wrapper.write_text(f'#!/bin/sh\nexec {chrt} --fifo 20 {fio} "$@"\n')
    wrapper.chmod(0o755)
    return {"SSDPREDICT_FIO": str(wrapper)}


def run_cli(home: Path, env: dict[str, str], *args: str) -> None:
    """Run ``ssdpredict ARGS`` on the data directory ``home``; exit with its message on failure."""
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


FLOOR_WINDOWS = (0.25, 0.5, 1.0, 2.0, 4.0)


def _spread(runs: list[pd.DataFrame], metric: str) -> float:
    """Mean over windows of a run's relative distance from the true per-window value.

    The runs' mean stands for the truth; ``|x - mean|`` underestimates ``|x - truth|`` by
    ``sqrt((n - 1) / n)`` (for two runs, ``|a - b| / 2`` against ``|a - b| / sqrt(2)``), so
    it is scaled back: the result is the error a perfect prediction would show.
    """
    table = pd.concat([r[metric] for r in runs], axis=1).dropna()
    if table.empty:
        return float("nan")
    mean = table.mean(axis=1)
    rel = table.sub(mean, axis=0).abs().div(mean, axis=0).to_numpy()
    return float(rel.mean() * np.sqrt(len(runs) / (len(runs) - 1)))


def noise_floor(trace: Path, target: str, window_s: float, repeats: int,
                lengths: tuple[float, ...] = FLOOR_WINDOWS) -> dict[str, Any]:
    """Repeat noise per window at ``window_s`` and, re-windowing the same completions, at ``lengths``."""
    reps = [replay(trace, target, destroy_data=True, window_s=window_s) for _ in range(repeats)]
    out: dict[str, Any] = {"trace": trace.stem, "repeats": repeats, "by_window": []}
    for length in sorted({window_s, *lengths}):
        # replay-limited windows stay in: the machine's noise is what the floor measures
        runs = [r.rewindow(length).set_index("window_start_s") for r in reps]
        row = {"window_s": length, "windows": int(min(len(r) for r in runs)),
               "replay_limited": int(sum(r["replay_limited"].sum() for r in runs)),
               "requests": float(np.mean([r["replay_requests"].mean() for r in runs])),
               "latency_mean_us": _spread(runs, "latency_mean_us"),
               "latency_p99_us": _spread(runs, "latency_p99_us")}
        out["by_window"].append(row)
        if length == window_s:
            out["latency_mean_us"], out["latency_p99_us"] = row["latency_mean_us"], row["latency_p99_us"]
    out["drift"] = [r.drift for r in reps]
    return out


def print_floor(floor: dict[str, Any], target: float = 0.15) -> None:
    """The noise floor per window length, and the shortest window that gets under ``target``."""
    print(f"  open-loop noise floor ({floor['repeats']} replays of {floor['trace']}, drift "
          + ", ".join(f"{d * 100:+.1f} %" for d in floor["drift"]) + "): per window length")
    print(f"    {'window':>7s} {'windows':>7s} {'req/win':>8s} {'mean':>7s} {'p99':>7s} {'limited':>7s}")
    for r in floor["by_window"]:
        print(f"    {r['window_s']:6.2f}s {r['windows']:7d} {r['requests']:8.0f}"
              f" {_fmt(r['latency_mean_us']):>7s} {_fmt(r['latency_p99_us']):>7s} {r['replay_limited']:7d}")
    for metric, name in (("latency_mean_us", "mean"), ("latency_p99_us", "p99")):
        under = [r for r in floor["by_window"] if r["windows"] >= 2 and r[metric] <= target]
        if under:
            r = under[0]
            print(f"    {name}: under {target * 100:.0f} % from {r['window_s']:g} s windows "
                  f"(~{r['requests']:,.0f} requests a window)")
        else:
            print(f"    {name}: no window length up to {FLOOR_WINDOWS[-1]:g} s gets under"
                  f" {target * 100:.0f} %")


def window_drift(windows: pd.DataFrame) -> tuple[float, float, int]:
    """(worst window's |drift|, share of windows within 2 %, windows with a drift) of a replay."""
    known = windows["window_drift"].dropna().abs()
    if not len(known):
        return float("nan"), float("nan"), 0
    return float(known.max()), float((known <= 0.02).mean()), len(known)


def device_level(datadir: DataDir, model: Any, target: str, trace: Path, window_s: float,
                 device: str = DEVICE) -> DeviceCheck:
    """The device check at ``trace``'s dominant mix (the bench owns the device: destroy_data)."""
    mix = probe_mix(characterize(str(trace), window_s=window_s).windows,
                    *swept_mixes(datadir.catalog.measurements(device)))
    return check_device(model, target, *mix, destroy_data=True)


def evaluate(datadir: DataDir, trace: Path, target: str, window_s: float, out: Path,
             device: str = DEVICE, ceiling: float = 1.0) -> dict[str, Any]:
    """One replay of ``trace``, both methods compared with it (open-loop capped at ``ceiling``).

    A device check at the trace's mix runs right before the replay (``dev_mean``).
    """
    check = device_level(datadir, ModelRegistry(datadir).load(device), target, trace, window_s, device)
    rep = replay(trace, target, destroy_data=True, window_s=window_s)
    w = rep.windows
    worst, ok, _ = window_drift(w)
    row: dict[str, Any] = {"trace": trace.stem, "requests": rep.requests, "drift": rep.drift,
                           "worst_window_drift": worst, "drift_ok": ok,
                           "replay_limited": int(w["replay_limited"].sum()),
                           # the gap compensation (traces/replay/clock.py) and what the lanes still slipped
                           "slip_us": rep.slip_us, "residual_slip_us": rep.residual_slip_us,
                           "dev_mean": check.mean_diff, "device_check": check.to_dict()}
    for method in ("open-loop", "trace-qd"):
        pred, _ = predict_trace(datadir, device, trace, window_s=window_s, method=method,
                                ceiling=ceiling if method == "open-loop" else 1.0)
        df, summary = compare(pred, rep.windows)
        df.to_csv(out / f"{trace.stem}.{method}.csv", index=False)
        err = summary["errors"]
        tag = "ol" if method == "open-loop" else "qd"
        row[f"{tag}_mean"] = err["latency_mean_us"]["unsaturated"]["mre"]
        row[f"{tag}_p99"] = err["latency_p99_us"]["unsaturated"]["mre"]
        # windows each method predicted unsaturated (the column printed is the open-loop one's)
        row[f"{tag}_unsaturated"] = err["latency_mean_us"]["unsaturated"]["n"]
        row["windows"] = int((~df["too_short"]).sum())
        row["sat_windows"] = (summary["saturation"] or {}).get("windows")
        if method == "open-loop":
            from traces.validate.plot import plot_validation

            title = f"{device} device, {trace.name}"
            plot_validation(df, out / f"{trace.stem}.png", title=title, summary=summary)
            sat = summary["saturation"] or {}
            row.update(unsaturated=row["ol_unsaturated"], sat_agree=sat.get("agree"),
                       sat_pred=sat.get("predicted"), sat_meas=sat.get("measured"),
                       utilisation=float(df["utilisation"].max()))
    return row


def run_traces(datadir: DataDir, device: str, target: str, traces: list[tuple[Path, float, float]],
               out: Path) -> list[dict[str, Any]]:
    """Evaluate every trace and print one line each (the issue's "Done when" columns)."""
    print("  per trace: windows compared, unsaturated, replay-limited (left out); replay drift (whole trace,"
          " worst window, share of windows within 2 %); peak predicted utilisation; latency MRE"
          " over unsaturated windows, open-loop (OL) and trace-QD (QD); saturation agreement"
          " (predicted/measured saturated of windows known); dev: the device check's mean latency against the"
          " model's, right before the replay")
    print(f"  {'trace':26s} {'win':>4s} {'unsat':>5s} {'lim':>4s} {'drift':>7s} {'worst':>6s} {'<=2%':>5s}"
          f" {'peak u':>6s}  {'OL mean':>7s} {'dev':>6s} {'OL p99':>7s}  {'QD mean':>7s} {'QD p99':>7s}"
          "  saturation")
    rows = []
    for path, window_s, ceiling in traces:
        r = evaluate(datadir, path, target, window_s, out, device, ceiling)
        rows.append(r)
        print(f"  {r['trace'][:26]:26s} {r['windows']:4d} {r['unsaturated']:5d} {r['replay_limited']:4d}"
              f" {r['drift'] * 100:+6.1f}% {_fmt(r['worst_window_drift'])} {_fmt(r['drift_ok'])}"
              f" {r['utilisation'] * 100:5.0f}%  {_fmt(r['ol_mean']):>7s} {r['dev_mean'] * 100:+5.0f}%"
              f" {_fmt(r['ol_p99']):>7s}  {_fmt(r['qd_mean']):>7s} {_fmt(r['qd_p99']):>7s}"
              f"  {_fmt(r['sat_agree'])} ({r['sat_pred']}/{r['sat_meas']} of {r['sat_windows']})")
    return rows


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
        env = fio_wrapper(home)
        sweep = ("sweep", "--device", DEVICE, "--target", ref.path, "--destroy-data", "--plan", "grid",
                 "--write-ratios", plan["write_ratios"], "--sizes", plan["sizes"], "--queue-depths",
                 plan["queue_depths"], "--numjobs", plan["numjobs"], "--randomness", "1", "--engine", "psync",
                 "--runtime", plan["runtime"], "--size", f"{size_mib - 16}MiB")
        # closed loop at normal priority: 16-32 CPU-bound jobs at real-time priority on two
        # CPUs do not share them (a FIFO job runs until it blocks, and zram I/O never
        # blocks), so jobs start late and fio's per-job rates add up to nonsense (6.4
        # million 4 KiB reads a second, 2026-11-25 21:18)
        run_cli(home, {}, *sweep)
        # open-loop points at real-time priority, as the replays run: their timing is the point;
        # the closed-loop sweep is found complete by its key and not measured again
        run_cli(home, env, *sweep, "--open-loop", plan["open_loop"])
        print(f"  swept (closed loop + open-loop points) in {time.time() - t_start:.0f} s")
        run_cli(home, env, "train", "--device", DEVICE, "--folds", "3", "--time-budget", str(plan["budget"]))
        print(f"  trained at {time.time() - t_start:.0f} s")
        model = ModelRegistry(datadir).load(DEVICE)
        source = device_source(datadir, DEVICE, model)
        levels = [check_device(model, ref.path, wr, size, destroy_data=True)
                  for wr, size in [*plan["mixes"], (0.0, 4096)]]  # 4 KiB reads: the shared traces
        print("  device level at sweep time: "
              + "; ".join(c.note.removeprefix("device check: ") for c in levels))
        synth = out / "synthetic"
        # the shared traces are far below any capacity at their mixes: no ceiling
        traces: list[tuple[Path, float, float]] = [
            (TESTDATA / "sample.blktrace.0", 0.1, 1.0),
            (TESTDATA / "tpcc-small.trace", 0.05, 1.0),
            (_cut(TESTDATA / "wsrch-small.trace", plan["wsrch_s"], out / "wsrch-cut.trace"), 1.0, 1.0),
        ]
        floor_cap = 0.0
        for wr, size in plan["mixes"]:
            probe_path, _ = write_synthetic(SyntheticSpec(1000, 1.0, "poisson", wr, size), synth)
            probe = characterize(str(probe_path))
            model_cap = closed_loop_curves(model, probe.windows, source.loads).curve(0, "value").capacity
            # the replay path's own capacity at this mix: what "saturated" means for a replay
            # (traces/replay/capacity.py); the load levels and the prediction use it
            rcap = measure_replay_capacity(ref.path, model_cap, write_ratio=wr, size=size, destroy_data=True)
            ceiling = rcap.ceiling(model_cap)
            cap = model_cap * ceiling
            print(f"  capacity at write ratio {wr:g}, {size // 1024} KiB: {model_cap:,.0f} IO/s (model,"
                  f" closed loop), {rcap.iops:,.0f} IO/s through the {rcap.lanes}-lane replay path (offered"
                  f" {rcap.offered_iops:,.0f}): open-loop capacity {cap:,.0f} IO/s ({ceiling * 100:.0f} %)")
            floor_cap = floor_cap or cap
            for process in ("poisson", "h2"):
                for spec in load_levels(cap, duration_s=plan["synthetic_s"], process=process, write_ratio=wr,
                                        size=size):
                    path, _ = write_synthetic(spec, synth)
                    traces.append((path, plan["synthetic_window"], ceiling))
        floor_spec = SyntheticSpec(0.5 * floor_cap, plan["floor_s"], "poisson", plan["mixes"][0][0],
                                   plan["mixes"][0][1], load=0.5, seed=100)
        floor_trace, _ = write_synthetic(floor_spec, synth)
        floor = noise_floor(floor_trace, ref.path, plan["synthetic_window"], plan["repeats"])
        print_floor(floor)
        # a light trace of microsecond I/Os has a floor of its own (the cold path between
        # sparse requests moves from replay to replay): the wsrch cut, replayed the same way
        light_floor = noise_floor(traces[2][0], ref.path, traces[2][1], plan["repeats"])
        print_floor(light_floor)
        rows = run_traces(datadir, DEVICE, ref.path, traces, out)
        table = pd.DataFrame(rows)
        unsat = table[table["unsaturated"] > 0]
        means = {k: unsat[k].mean() * 100 for k in ("ol_mean", "ol_p99", "qd_mean", "qd_p99")}
        known = table.dropna(subset=["sat_agree"])
        n_known = max(known["sat_windows"].sum(), 1)
        sat_agree = float((known["sat_agree"] * known["sat_windows"]).sum() / n_known)
        print(f"  mean over traces with unsaturated windows: open-loop mean {means['ol_mean']:.1f} %,"
              f" p99 {means['ol_p99']:.1f} %; trace-qd mean {means['qd_mean']:.1f} %,"
              f" p99 {means['qd_p99']:.1f} %; saturation agreement {sat_agree * 100:.0f} % of"
              f" {int(known['sat_windows'].sum())} windows (targets: 15 %, 30 %, 90 %; noise floor at"
              f" {plan['synthetic_window']:g} s windows: mean {_fmt(floor['latency_mean_us']).strip()},"
              f" p99 {_fmt(floor['latency_p99_us']).strip()}); {int(table['replay_limited'].sum())} window(s)"
              f" replay-limited (left out); device level against the model over the run (dev)"
              f" {table['dev_mean'].min() * 100:+.0f} % to {table['dev_mean'].max() * 100:+.0f} %")
        doc = {"device": ref.path, "kind": ref.kind, "floor": floor, "light_floor": light_floor,
               "rows": rows, "quick": quick, "sweep_time_checks": [c.to_dict() for c in levels]}
        (out / "reference.json").write_text(json.dumps(doc, indent=1, default=str))
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
