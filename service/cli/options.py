"""The options more than one command takes, each declared once.

A command names an option by its alias (``target: TargetOption = ""``): the name, short
form, help and limits are written here only, so ``--target`` means and checks the same
everywhere.  Where an option's value reads differently in a command (``--randomness`` is
a list in ``sweep``, one value in ``predict``), the help says so.  An option that only one
command takes is declared beside that command.  ``tests/cli/test_command_shape.py`` holds
every option name to one declaration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# -- which device, and how to answer ------------------------------------------------------
_DEVICE = typer.Option(
    "--device", "-d",
    help="device name (see `ssdpredict devices`; trace capture: a block device)")
DeviceOption = Annotated[str, _DEVICE]
OptionalDeviceOption = Annotated[str | None, _DEVICE]
DevicesOption = Annotated[str | None, typer.Option(
    "--devices", help="many devices: names or globs, comma-separated (ssd-*,nvme0)")]
AllDevicesOption = Annotated[bool, typer.Option("--all", "--all-devices", help="every device of the catalog")]
JsonOption = Annotated[bool, typer.Option("--json", help="print JSON on stdout")]
WaitOption = Annotated[bool, typer.Option(
    "--wait", help="wait while another writer (sweep, ingest, train, delete) holds the device")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="really delete (there is no undo)")]
_OUTPUT = typer.Option(
    "--output", "-o",
    help="where to write: predict and export a CSV (default stdout), report an HTML file (default "
    "DEVICE-report.html), trace commands the window table as CSV, `trace capture` a directory")
OutputOption = Annotated[Path | None, _OUTPUT]
OutputDirOption = Annotated[Path, _OUTPUT]
FormatOption = Annotated[str, typer.Option(
    "--format", "-f", help="trace commands: the trace format or 'auto'; export: csv or parquet")]
_CLASS = typer.Option(
    "--class", help="device class: ssd|raid|csd|nvmeof|pmem (ingest: of a new device, default ssd)")
ClassOption = Annotated[str, _CLASS]
OptionalClassOption = Annotated[str | None, _CLASS]

# -- what to write on, and the licence to ---------------------------------------------------
_TARGET = typer.Option("--target", "-t", help="file or block device to measure or replay on")
TargetOption = Annotated[str, _TARGET]
OptionalTargetOption = Annotated[str | None, _TARGET]
DestroyDataOption = Annotated[bool, typer.Option(
    "--destroy-data", help="allow writing over a block device's data (or a device with data)")]

# -- how to measure -------------------------------------------------------------------------
_PLAN = typer.Option(
    "--plan", help="quick|pts|nvmeof|pmem|grid|lhs|random|adaptive or a plan FILE.toml "
    "(sweep default quick; nvmeof for --class nvmeof, pmem for --class pmem)")
PlanOption = Annotated[str | None, _PLAN]
PlanNameOption = Annotated[str, _PLAN]
RuntimeOption = Annotated[str, typer.Option("--runtime", help="fio runtime per point, e.g. 500ms, 1s")]
SizeOption = Annotated[str, typer.Option(
    "--size", help="span of the target, e.g. 256MiB (a file or reference device is created at this size)")]
ReferenceOption = Annotated[str | None, typer.Option(
    "--reference", help="another device with a model: train corrects that model with this device's "
    "measurements (cross-validation keeps it or trains from scratch; a what-if device, `whatif raid|fabric`, "
    "is calibrated on this device's points instead); sweep --plan adaptive picks the points that best "
    "calibrate such a transfer")]
_RANDOMNESS = typer.Option(
    "--randomness", help="fraction of random requests, 0..1 (sweep: a value list, e.g. 0,1)")
RandomnessOption = Annotated[float | None, _RANDOMNESS]
RandomnessListOption = Annotated[str | None, _RANDOMNESS]
_NUMJOBS = typer.Option("--numjobs", help="parallel jobs (sweep: a value list, e.g. 1,4)")
NumjobsOption = Annotated[int | None, _NUMJOBS]
NumjobsListOption = Annotated[str | None, _NUMJOBS]

# -- how to learn ---------------------------------------------------------------------------
FoldsOption = Annotated[int, typer.Option(
    "--folds", min=2, max=20, help="cross-validation folds for model selection (evaluate: the outer folds)")]
TimeBudgetOption = Annotated[float, typer.Option(
    "--time-budget", min=0.0, help="seconds of model tuning per training (evaluate: one training per fold)")]
FeaturesOption = Annotated[str, typer.Option(
    "--features", help="feature set: extended, basic, or both (cross-validation chooses)")]
CandidatesOption = Annotated[str | None, typer.Option(
    "--candidates", help="only these estimator kinds, untuned (fast): e.g. cart or cart,xgboost")]
SchedulerOption = Annotated[str | None, typer.Option(
    "--scheduler",
    help="Dask scheduler tcp://HOST:8786 (default: SSDPREDICT_SCHEDULER, else a local cluster)")]
WorkersOption = Annotated[int | None, typer.Option(
    "--workers", min=1, max=64,
    help="worker processes: train/evaluate's local Dask cluster (default one per core), serve's (default 1)")]

# -- where to serve -------------------------------------------------------------------------
_HOST = typer.Option("--host", help="address to bind (default SSDPREDICT_HOST or 127.0.0.1)")
HostOption = Annotated[str | None, _HOST]
BindHostOption = Annotated[str, _HOST]
_PORT = typer.Option("--port", min=1, max=65535, help="port (default SSDPREDICT_PORT or 8000)")
PortOption = Annotated[int | None, _PORT]
BindPortOption = Annotated[int, _PORT]

_SLO = typer.Option(
    "--slo", help='latency targets that must all hold, e.g. "p99<=1ms" or "p99<=1ms,mean<=200us" '
    "(report: its capacity section's, default p99<=1ms)")
SloOption = Annotated[str, _SLO]
OptionalSloOption = Annotated[str | None, _SLO]

# -- what to ask ----------------------------------------------------------------------------
WorkloadMixesOption = Annotated[list[str] | None, typer.Option(
    "--workload", "-w", metavar="MIX", show_default=False,
    help='a workload mix, e.g. "write_ratio=0.3,request_size=16k,randomness=1" (no queue depth: the offered '
    "rate sets it); repeat for more (capacity: the mixes asked; sweep --for-capacity: the mixes measured)")]
InputCsvOption = Annotated[Path | None, typer.Option(
    "--input", "-i", help="CSV of workloads, ingest columns (capacity: mixes, queue_depth/numjobs left out)")]

# -- traces ---------------------------------------------------------------------------------
WindowOption = Annotated[str, typer.Option("--window", help="window length, e.g. 1s, 500ms")]
WindowRequestsOption = Annotated[int | None, typer.Option(
    "--window-requests", help="N requests per window", min=1)]
LanesOption = Annotated[int | None, typer.Option(
    "--lanes", help="parallel replay jobs (default: the trace's peak in flight, else 16)")]
SpeedOption = Annotated[float, typer.Option("--speed", help="time scale: 2.0 replays twice as fast")]
CapacityProbesOption = Annotated[int, typer.Option(
    "--capacity-probes", min=0, max=9,
    help="with --target and --destroy-data: measure the replay path's capacity this many times before the "
    "replay where sweep --for-trace measured it, and predict with the median (0: the sweep's)")]
OpenLoopProbeOption = Annotated[bool, typer.Option(
    "--open-loop-probe/--no-open-loop-probe",
    help="trace validate with --target and --destroy-data: right before the replay, measure the trace's "
    "light rates open loop (a few seconds) and report the prediction re-anchored on them, the one as swept "
    "beside it")]
ResizeOption = Annotated[str, typer.Option(
    "--resize", help="requests the target cannot take (size not a multiple of its block): "
    "round-up (counted and warned) or refuse")]
MethodOption = Annotated[str, typer.Option(
    "--method", help="trace predict/validate: open-loop (queueing on the device's curve) or trace-qd "
    "(the old one); trace capture: auto, blktrace, ftrace or perf")]
