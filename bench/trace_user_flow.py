"""The trace flow a user runs, exactly, on the zram and throttled references (issue 22).

``bench/traces.py --user-flow [--quick]``.  Per reference (``reference create --kind zram``
and ``--kind throttled --iops N``), every step is an ``ssdpredict`` command run as a
subprocess, printed as it runs, with no option a user would not pass:

    ssdpredict reference create --kind zram --size 256MiB
    ssdpredict sweep --device zram-for-trace --target REF --destroy-data --for-trace T1 T2 ...
    ssdpredict train --device zram-for-trace
    ssdpredict trace validate T --device zram-for-trace --target REF --destroy-data --window W --json -o CSV
    ssdpredict reference destroy REF

and beside it the same flow with ``--plan quick`` instead of ``--for-trace`` (device
``zram-quick``).  The traces: the three shared ones (``tests/data/traces``: the blktrace
sample, tpcc, a cut of wsrch) and synthetic Poisson and H2 traces (``traces/synthetic.py``)
at 20/50/80/95 % of the reference's capacity at one mix, written before the sweep so that
``--for-trace`` sees them.  That capacity is what the replay path serves on the reference
(``traces.replay.capacity``, a Poisson trace offered at 3x a guess): 1 MiB random reads on
zram (4 KiB ones run at rates no timed replay keeps), 4 KiB random reads on the throttled one.

Per trace and flow: the mean and p99 latency MRE over the unsaturated windows and the
saturation agreement, as ``trace validate`` reports them; beside them the noise floor:
the two flows' replays of the same trace on the same reference, compared window by window
(``|a - b| / (sqrt 2 x their mean)``: the error a perfect prediction would show against
one replay).  Targets: mean <= 15 %, p99 <= 30 %, saturation agreement >= 90 %.
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

from traces.replay.capacity import measure_replay_capacity  # noqa: E402
from traces.synthetic import load_levels, write_synthetic  # noqa: E402

TESTDATA = ROOT / "tests" / "data" / "traces"
TARGETS = {"mean": 0.15, "p99": 0.30, "sat": 0.90}
MIN_P99_REQUESTS = 200  # traces.validate.compare.MIN_P99_REQUESTS
SETTINGS: dict[str, dict[str, Any]] = {
    "quick": {
        "synthetic_s": 2.0,
        "window": "0.5s",
        "levels": (0.5,),
        "processes": ("poisson",),
        "wsrch_s": 10.0,
        "shared": ("wsrch",),
        "budget": ("--budget", "16"),
    },
    "full": {
        "synthetic_s": 4.0,
        "window": "0.5s",
        "levels": (0.2, 0.5, 0.8, 0.95),
        "processes": ("poisson", "h2"),
        "wsrch_s": 30.0,
        "shared": ("blktrace", "tpcc", "wsrch"),
        "budget": (),
    },
}
REFERENCES = {
    "zram": (("--kind", "zram"), 1 << 20, 10_000.0),
    "throttled": (("--kind", "throttled", "--iops", "2000"), 4096, 2000.0),
}


def ssdpredict(home: Path, *args: str, log: Path | None = None) -> str:
    """Run one ``ssdpredict`` command on the data directory ``home``; its stdout, or exit with its message.

    It runs in ``home``, where ``trace validate`` leaves its default PNG.
    """
    exe = shutil.which("ssdpredict") or str(Path(sys.executable).parent / "ssdpredict")
    env = {**os.environ, "SSDPREDICT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    shown = " ".join(a if " " not in a else repr(a) for a in args)
    print(f"    $ ssdpredict {shown}", flush=True)
    t0 = time.time()
    proc = subprocess.run([exe, *args], env=env, capture_output=True, text=True, cwd=home)
    if log is not None:
        with log.open("a") as fh:
            fh.write(f"$ ssdpredict {shown}\n{proc.stderr}\n")
    if proc.returncode != 0:
        raise SystemExit(
            f"ssdpredict {args[0]} failed ({proc.returncode}): "
            f"{(proc.stderr.strip() or proc.stdout.strip())[-800:]}"
        )
    print(f"      ({time.time() - t0:.0f} s)", flush=True)
    return proc.stdout


def _cut(path: Path, seconds: float, out: Path) -> Path:
    """The first ``seconds`` of a 5-field (mqsim) trace."""
    lines = path.read_text().splitlines()
    t0 = float(lines[0].split()[0])
    out.write_text("\n".join(ln for ln in lines if float(ln.split()[0]) - t0 < seconds * 1e9) + "\n")
    return out


def shared_traces(names: tuple[str, ...], wsrch_s: float, out: Path) -> list[tuple[Path, str]]:
    """The shared traces (path, window): the windows the reference bench uses for them."""
    every = {
        "blktrace": (TESTDATA / "sample.blktrace.0", "0.1s"),
        "tpcc": (TESTDATA / "tpcc-small.trace", "0.05s"),
        "wsrch": (_cut(TESTDATA / "wsrch-small.trace", wsrch_s, out / "wsrch-cut.trace"), "1s"),
    }
    return [every[n] for n in names]


def synthetic_traces(
    ref_path: str, kind: str, s: dict[str, Any], out: Path
) -> tuple[list[tuple[Path, str]], float]:
    """Poisson/H2 traces at the load levels of the replay path's capacity on the reference."""
    size, guess = REFERENCES[kind][1], REFERENCES[kind][2]
    cap = measure_replay_capacity(ref_path, guess, size=size, destroy_data=True).iops
    print(
        f"    capacity through the replay path, random reads of {size // 1024} KiB: {cap:,.0f} IO/s",
        flush=True,
    )
    found = []
    for process in s["processes"]:
        for spec in load_levels(
            cap, levels=s["levels"], duration_s=s["synthetic_s"], process=process, size=size
        ):
            path, _ = write_synthetic(spec, out)
            found.append((path, s["window"]))
    return found, cap


def _flows(ref: str, traces: list[Path], s: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    base = ("--target", ref, "--destroy-data")
    return {
        "for-trace": (*base, *s["budget"], "--for-trace", *map(str, traces)),
        "quick": (*base, "--plan", "quick"),
    }


def floor(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, float]:
    """The two replays' per-window distance (the error a perfect prediction would show against one)."""
    keys = ["window_start_s"]
    cols = ["latency_mean_us", "latency_p99_us", "requests", "too_short"]
    j = a[keys + cols].merge(b[keys + cols], on=keys, suffixes=("_a", "_b"))
    j = j[~j["too_short_a"].astype(bool)]
    out = {}
    for m, min_n in (("latency_mean_us", 0), ("latency_p99_us", MIN_P99_REQUESTS)):
        x, y = j[f"{m}_a"].astype(float), j[f"{m}_b"].astype(float)
        ok = np.isfinite(x) & np.isfinite(y) & (j["requests_a"] >= min_n)
        rel = (x[ok] - y[ok]).abs() / ((x[ok] + y[ok]) / 2) / np.sqrt(2)
        out[m] = float(rel.mean()) if len(rel) else float("nan")
    return out


def _row(report: dict[str, Any]) -> dict[str, Any]:
    e, sat = report["summary"]["errors"], report["summary"].get("saturation") or {}
    unsat = e.get("latency_mean_us", {}).get("unsaturated", {})
    return {
        "mean": unsat.get("mre"),
        "unsat": unsat.get("n", 0),
        "p99": e.get("latency_p99_us", {}).get("unsaturated", {}).get("mre"),
        "p99_n": e.get("latency_p99_us", {}).get("unsaturated", {}).get("n", 0),
        "sat": sat.get("agree"),
        "sat_n": sat.get("windows", 0),
        "limited": sat.get("replay_limited", 0),
        "sat_pred": sat.get("predicted"),
        "sat_meas": sat.get("measured"),
        "windows": len(report["windows"]),
        "warnings": report["warnings"],
        # the replay path's capacity: the sweep's and the probes trace validate took before its replay
        "capacity_probe": report.get("capacity_probe") or [],
        # the light open-loop probe (traces.validate.openloop_probe): the errors above are re-anchored on it,
        # these the prediction as swept against the same replay (None: no probe ran)
        **_as_swept(report.get("open_loop_probe")),
    }


def _as_swept(probe: dict[str, Any] | None) -> dict[str, Any]:
    if not probe:
        return {"as_swept_mean": None, "as_swept_p99": None, "anchors": [], "anchor_s": 0.0}
    e = probe["as_swept"]["errors"]
    return {"as_swept_mean": e.get("latency_mean_us", {}).get("unsaturated", {}).get("mre"),
            "as_swept_p99": e.get("latency_p99_us", {}).get("unsaturated", {}).get("mre"),
            "anchors": probe["points"], "anchor_s": probe["seconds"]}


def _pct(v: Any) -> str:
    return "  n/a" if v is None or not np.isfinite(v) else f"{v * 100:5.1f}%"


SUBSETS = ("shared", "poisson", "h2")


def pick(s: dict[str, Any], subsets: tuple[str, ...]) -> dict[str, Any]:
    """The settings cut to the trace ``subsets`` (shared, poisson, h2): one quiet run each."""
    unknown = set(subsets) - set(SUBSETS)
    if unknown or not subsets:
        bad = ", ".join(sorted(unknown)) or "(none)"
        raise SystemExit(f"unknown trace subset(s) {bad}: use {', '.join(SUBSETS)}")
    return {**s, "shared": s["shared"] if "shared" in subsets else (),
            "processes": tuple(p for p in s["processes"] if p in subsets)}


def run_reference(kind: str, s: dict[str, Any], out: Path, keep: bool = False) -> list[dict[str, Any]]:
    """The whole user flow on one reference, both plans; one row per trace (``keep``: leave the data
    directory, to predict its traces again)."""
    home = Path(tempfile.mkdtemp(prefix=f"bench-flow-{kind}-"))
    log = out / f"{kind}-commands.log"
    created = ssdpredict(home, "reference", "create", *REFERENCES[kind][0], "--size", "256MiB", log=log)
    ref = created.split()[0]
    rows: list[dict[str, Any]] = []
    try:
        print(f"  reference {ref} ({kind}); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        traces = shared_traces(s["shared"], s["wsrch_s"], out)
        cap = float("nan")
        if s["processes"]:
            synth, cap = synthetic_traces(ref, kind, s, out / f"{kind}-synthetic")
            traces += synth
        flows = _flows(ref, [t for t, _ in traces], s)
        for flow, args in flows.items():
            device = f"{kind}-{flow}"
            t0 = time.time()
            ssdpredict(home, "sweep", "--device", device, *args, log=log)
            ssdpredict(home, "train", "--device", device, log=log)
            print(f"    {flow}: swept and trained in {time.time() - t0:.0f} s", flush=True)
        for path, window in traces:
            row: dict[str, Any] = {"reference": kind, "trace": path.name, "capacity": cap}
            tables = {}
            for flow in flows:
                csv = out / f"{kind}.{path.name}.{flow}.csv"
                text = ssdpredict(
                    home,
                    "trace",
                    "validate",
                    str(path),
                    "--device",
                    f"{kind}-{flow}",
                    "--target",
                    ref,
                    "--destroy-data",
                    "--window",
                    window,
                    "--json",
                    "-o",
                    str(csv),
                    log=log,
                )
                row[flow] = _row(json.loads(text))
                tables[flow] = pd.read_csv(csv)
            row["floor"] = floor(tables["for-trace"], tables["quick"])
            rows.append(row)
            print_row(row)
    finally:
        ssdpredict(home, "reference", "destroy", ref, log=log)
        if keep:
            print(f"  data directory kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    return rows


HEADER = (
    f"  {'trace':34s} {'win':>4s} {'uns':>4s} {'lim':>4s} | {'for-trace mean':>14s} {'p99':>6s} {'sat':>6s}"
    f" | {'quick mean':>10s} {'p99':>6s} {'sat':>6s} | {'floor mean':>10s} {'p99':>6s}"
)


def print_row(r: dict[str, Any]) -> None:
    """One trace: both flows' errors and the noise floor beside them."""
    a, b, f = r["for-trace"], r["quick"], r["floor"]
    print(
        f"  {r['trace'][:34]:34s} {a['windows']:4d} {a['unsat']:4d} {a['limited']:4d} |"
        f" {_pct(a['mean']):>14s}"
        f" {_pct(a['p99']):>6s} {_pct(a['sat']):>6s} | {_pct(b['mean']):>10s} {_pct(b['p99']):>6s}"
        f" {_pct(b['sat']):>6s} | {_pct(f['latency_mean_us']):>10s} {_pct(f['latency_p99_us']):>6s}",
        flush=True,
    )
    for p in a.get("capacity_probe", []):
        shown = ", ".join(f"{x:,.0f}" for x in p["probes_iops"])
        print(f"    capacity of {p['mix']}: sweep {p['swept_iops']:,.0f} IO/s, probed {shown} (median"
              f" {p['probed_iops']:,.0f}, spread {p['spread'] * 100:.0f} %)", flush=True)
    if a.get("anchors"):
        print(f"    re-anchored (the figures above); as swept, same replay: mean {_pct(a['as_swept_mean'])}"
              f" p99 {_pct(a['as_swept_p99'])}; open-loop probe {a['anchor_s']:.1f} s", flush=True)
    for p in a.get("anchors", []):
        s, q, used = p["swept"], p["probed"], p.get("anchor") or p["probed"]
        was = "none" if s is None else f"{s['latency_mean_us']:.1f} us at {s['offered_iops']:,.0f}"
        change = "" if p["change_mean"] is None else f" ({p['change_mean'] * 100:+.0f} %)"
        print(f"    anchor {p['mix']} at {p['rate_iops']:,} IO/s: sweep {was}, probed"
              f" {q['latency_mean_us']:.1f} us at {q['offered_iops']:,.0f}{change}, used"
              f" {used['latency_mean_us']:.1f} us", flush=True)


def summary(rows: list[dict[str, Any]]) -> None:
    """Per flow: traces meeting each target, mean of the MREs, window-weighted saturation agreement;
    for ``--for-trace`` also the medians of the mean MRE re-anchored and as swept (same replays)."""
    # a trace the probe measured nothing for (no light window) was predicted once: both are that one
    paired = [(r["for-trace"]["mean"], r["for-trace"]["as_swept_mean"] if r["for-trace"].get("anchors")
               else r["for-trace"]["mean"]) for r in rows]
    paired = [(a, b) for a, b in paired if a is not None and b is not None]
    probed = sum(bool(r["for-trace"].get("anchors")) for r in rows)
    if paired:
        a, b = np.array(paired).T
        print(f"  for-trace, {len(paired)} trace(s) with a number ({probed} probed): median mean MRE"
              f" re-anchored {np.median(a) * 100:.1f} %, as swept {np.median(b) * 100:.1f} %;"
              f" worse by > 3 points re-anchored on {int(np.sum(a - b > 0.03))}")
    for flow in ("for-trace", "quick"):
        got = [r[flow] for r in rows]
        mean = [g["mean"] for g in got if g["mean"] is not None]
        p99 = [g["p99"] for g in got if g["p99"] is not None]
        n_sat = sum(g["sat_n"] for g in got if g["sat"] is not None)
        sat = sum(g["sat"] * g["sat_n"] for g in got if g["sat"] is not None) / max(n_sat, 1)
        print(
            f"  {flow:9s}: mean MRE <= 15 % on {sum(m <= TARGETS['mean'] for m in mean)}/{len(mean)} traces"
            f" (average {np.mean(mean) * 100 if mean else float('nan'):.1f} %); p99 <= 30 % on"
            f" {sum(p <= TARGETS['p99'] for p in p99)}/{len(p99)} (average"
            f" {np.mean(p99) * 100 if p99 else float('nan'):.1f} %); saturation agreement {sat * 100:.0f} %"
            f" of {n_sat} windows"
        )
    fl = [r["floor"]["latency_mean_us"] for r in rows if np.isfinite(r["floor"]["latency_mean_us"])]
    fp = [r["floor"]["latency_p99_us"] for r in rows if np.isfinite(r["floor"]["latency_p99_us"])]
    print(
        f"  noise floor (two replays of each trace): mean {np.mean(fl) * 100 if fl else float('nan'):.1f} %,"
        f" p99 {np.mean(fp) * 100 if fp else float('nan'):.1f} % averaged over traces"
    )


def run(quick: bool, out: Path, kinds: tuple[str, ...] = ("zram", "throttled"),
        subsets: tuple[str, ...] = SUBSETS, keep: bool = False) -> None:
    """Both references (see the module docstring), the trace ``subsets``; results in out/user-flow.json."""
    unknown = set(kinds) - set(REFERENCES)
    if unknown:
        known = ", ".join(REFERENCES)
        raise SystemExit(f"unknown reference kind(s) {', '.join(sorted(unknown))}: use {known}")
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)
    s = pick(SETTINGS["quick" if quick else "full"], subsets)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    print(f"user flow ({'quick' if quick else 'full'}; traces: {', '.join(subsets)}), results in {out}; "
          f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    rows: list[dict[str, Any]] = []
    for kind in kinds:
        print(f"reference {kind}:")
        print(HEADER)
        mine = run_reference(kind, s, out, keep)
        rows += mine
        summary(mine)
        (out / "user-flow.json").write_text(json.dumps(rows, indent=1, default=str))
    print("all references:")
    summary(rows)
    print(f"load average at the end {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"done in {time.time() - t0:.0f} s; per-window tables, commands and their stderr in {out}")
