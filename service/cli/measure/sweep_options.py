"""The options only ``sweep`` takes, and their reading into one checked :class:`SweepRequest`.

``sweep_request`` does every check a sweep's options need -- the settings
(:class:`~collectors.sweep.settings.SweepSettings`: durations, sizes, passes, class,
NVMe-oF, RAID), the value lists, the hosts and the open-loop fractions -- before the
command touches the data directory, takes a lock or creates a target file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from modeling.errors import InvalidInput
from modeling.units import parse_size
from service.config import get_settings

if TYPE_CHECKING:
    from collectors.sweep.settings import SweepSettings

RampOption = Annotated[str, typer.Option("--ramp", help="fio ramp time per point")]
OffsetOption = Annotated[str, typer.Option("--offset", help="start of the span")]
CsdPathOption = Annotated[str | None, typer.Option(
    "--csd-path", help="external|internal|concurrent (class csd)")]
InternalTargetOption = Annotated[str | None, typer.Option(
    "--internal-target", help="path inside the CSD for internal/concurrent")]
RemoteOption = Annotated[str | None, typer.Option(
    "--remote", help="HOST:PORT of a fio --server to run the jobs on; several (h1:8765,h2:8765) sweep every "
    "host at once, each stored as device NAME@HOST")]
NvmeofTransportOption = Annotated[str | None, typer.Option(
    "--nvmeof-transport", help="tcp or rdma: attach with nvme connect")]
NvmeofAddressOption = Annotated[str | None, typer.Option("--nvmeof-address", help="NVMe-oF target address")]
NvmeofPortOption = Annotated[int, typer.Option("--nvmeof-port", help="NVMe-oF target port")]
NvmeofNqnOption = Annotated[str | None, typer.Option("--nvmeof-nqn", help="NVMe-oF subsystem NQN")]
NvmeofNsidOption = Annotated[int, typer.Option("--nvmeof-nsid", help="NVMe-oF namespace id")]
RaidLevelOption = Annotated[str | None, typer.Option(
    "--raid-level", help="RAID level (hardware/GPU/software RAID)")]
RaidMembersOption = Annotated[str | None, typer.Option("--raid-members", help="member devices or count")]
RaidChunkOption = Annotated[str | None, typer.Option("--raid-chunk", help="RAID chunk size, e.g. 512k")]
RaidKindOption = Annotated[str | None, typer.Option(
    "--raid-kind", help="hardware|gpu|software (md arrays are read from sysfs)")]
RaidControllerOption = Annotated[str | None, typer.Option(
    "--raid-controller", help="RAID controller, e.g. 'GRAID SR-1010'")]
RaidVendorOption = Annotated[str | None, typer.Option("--raid-vendor", help="RAID vendor")]
RepeatsOption = Annotated[int, typer.Option("--repeats", help="measure each point N times")]
PreconditionOption = Annotated[bool, typer.Option("--precondition", help="fill the span sequentially first")]
PreconditionPassesOption = Annotated[int, typer.Option(
    "--precondition-passes", help="sequential fills for --precondition")]
SteadyStateOption = Annotated[bool, typer.Option("--steady-state", help="measure each point at steady state")]
SteadyStateRuleOption = Annotated[str, typer.Option(
    "--steady-state-rule", help="fio (fio's steadystate) or pts (5-round window)")]
EngineOption = Annotated[str, typer.Option(
    "--engine", help="auto|io_uring|libaio|psync|spdk; libpmem|dev-dax for --class pmem")]
SeedOption = Annotated[int | None, typer.Option("--seed", help="seed of the point order (and sampled plans)")]
BudgetOption = Annotated[int | None, typer.Option("--budget", help="points for --plan adaptive/lhs/random")]
PointsOption = Annotated[int | None, typer.Option(
    "--points", help="measure only the first N points of the plan")]
WriteRatiosOption = Annotated[str | None, typer.Option("--write-ratios", help="value list, e.g. 0,0.5,1")]
QueueDepthsOption = Annotated[str | None, typer.Option("--queue-depths", help="value list, e.g. 1,8,32")]
SizesOption = Annotated[str | None, typer.Option("--sizes", help="value list, e.g. 4k,64k")]
OpenLoopOption = Annotated[str | None, typer.Option(
    "--open-loop", help="then Poisson-arrival points at these fractions of each mix's measured capacity, "
    "e.g. 0.1,0.3,0.6,0.9 (trace predictions learn light-load latency from them)")]
OpenLoopRequestsOption = Annotated[int, typer.Option(
    "--open-loop-requests", min=1, help="a sparse open-loop point runs long enough for this many "
    "requests (at most 10 s)")]
ForTraceOption = Annotated[bool, typer.Option(
    "--for-trace", help="design the sweep from the TRACES given after the options: their mixes, "
    "in-flight range and rates, measured as the replay issues them (psync), closed and open loop")]
TracesArgument = Annotated[list[str] | None, typer.Argument(
    help="trace files, with --for-trace", show_default=False)]


@dataclass(frozen=True)
class SweepRequest:
    """A sweep command, checked: its settings, which plan, and what runs after it."""

    device: str
    settings: SweepSettings
    plan: str | None
    values: dict[str, list[Any]]
    budget: int | None
    seed: int | None
    points: int | None
    reference: str | None
    remotes: list[str] | None
    """Every host of a multi-host sweep (None: one host, or this one)."""
    open_loop: list[float] | None
    open_loop_requests: int
    wait: bool
    json_output: bool
    runtime: str
    """The runtime as typed, for the header line."""
    for_trace: bool
    traces: list[str]
    for_trace_conflicts: dict[str, Any]
    """The options a sweep designed from traces does not take, as given."""

    @property
    def where(self) -> str:
        """What is measured, for the header line."""
        nvmeof = self.settings.nvmeof
        where = self.settings.target or f"NVMe-oF {nvmeof.nqn if nvmeof else None}"
        return where + (f" on {len(self.remotes)} hosts" if self.remotes else "")


def sweep_request(options: Mapping[str, Any]) -> SweepRequest:
    """The sweep the options (by parameter name) ask for; every bad option raises here, first."""
    from collectors.sweep.multihost import split_remotes
    from collectors.sweep.settings import SweepSettings, nvmeof_target

    o = options
    remote = o["remote"]
    remotes = split_remotes(remote) if remote and "," in remote else None
    if remotes and o["open_loop"]:
        raise InvalidInput("--open-loop runs on one host: sweep the hosts, then each host's open-loop points")
    if o["traces"] and not o["for_trace"]:
        raise InvalidInput(f"unexpected argument {o['traces'][0]!r}: trace files go after --for-trace")
    config = get_settings()
    settings = SweepSettings(
        target=o["target"], device_class=o["device_class"], engine=o["engine"], runtime=o["runtime"],
        ramp=o["ramp"], size=o["size"], offset=o["offset"], remote=remotes[0] if remotes else remote,
        destroy_data=o["destroy_data"], repeats=o["repeats"], precondition=o["precondition"],
        precondition_passes=o["precondition_passes"], steady_state=o["steady_state"],
        steady_state_rule=o["steady_state_rule"], csd_path=o["csd_path"],
        internal_target=o["internal_target"],
        nvmeof=nvmeof_target(o["nvmeof_transport"], o["nvmeof_address"], o["nvmeof_port"], o["nvmeof_nqn"],
                             o["nvmeof_nsid"]),
        raid={"level": o["raid_level"], "members": o["raid_members"], "chunk": o["raid_chunk"],
              "kind": o["raid_kind"], "controller": o["raid_controller"], "vendor": o["raid_vendor"]},
        fio=config.fio, spdk_plugin=config.spdk_plugin, open_loop_warmup_ms=config.open_loop_warmup_ms,
    )
    return SweepRequest(
        device=o["device"], settings=settings, plan=o["plan"],
        values=_value_lists(write_ratios=o["write_ratios"], queue_depths=o["queue_depths"], sizes=o["sizes"],
                            randomness=o["randomness"], numjobs=o["numjobs"]),
        budget=o["budget"], seed=o["seed"], points=o["points"], reference=o["reference"], remotes=remotes,
        open_loop=_list(o["open_loop"], float, "open-loop"), open_loop_requests=o["open_loop_requests"],
        wait=o["wait"], json_output=o["json_output"], runtime=o["runtime"], for_trace=o["for_trace"],
        traces=o["traces"] or [], for_trace_conflicts={
            "--plan": o["plan"], "--open-loop": o["open_loop"], "--remote": remote, "--points": o["points"]},
    )


def _list(text: str | None, parse: Callable[[str], Any], what: str) -> list[Any] | None:
    if not text:
        return None
    try:
        return [parse(item.strip()) for item in text.split(",") if item.strip()]
    except ValueError as exc:
        raise InvalidInput(f"invalid --{what} {text!r}: {exc}") from exc


def _value_lists(**texts: str | None) -> dict[str, list[Any]]:
    """The ``--write-ratios 0,0.5,1``-style options as value lists (only those given)."""
    parsers: dict[str, Callable[[str], Any]] = {
        "write_ratios": float, "queue_depths": int, "sizes": parse_size, "randomness": float, "numjobs": int,
    }
    lists = {name: _list(text, parsers[name], name.replace("_", "-")) for name, text in texts.items()}
    return {name: values for name, values in lists.items() if values}
