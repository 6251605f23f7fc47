"""CLI: ``ssdpredict whatif raid|fabric``: derived devices computed from a measured device's model."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from modeling.units import parse_duration_us, parse_size
from service.cli.common import JsonOption, console, datadir, handle_errors, print_json

whatif_app = typer.Typer(
    help="What-if devices: an array from a member's model, a fabric export from a local device's model. "
    "They are listed, predicted and compared like measured devices, marked derived.",
    no_args_is_help=True,
)

NameOption = Annotated[
    Optional[str], typer.Option("--name", help="the derived device's name (default from the law)")
]


def register(app: typer.Typer) -> None:
    """Add the ``whatif`` group."""
    app.add_typer(whatif_app, name="whatif")


@whatif_app.command("raid")
@handle_errors
def raid(
    member: Annotated[str, typer.Option("--member", help="the measured member device (trained)")],
    level: Annotated[int, typer.Option("--level", help="RAID level: 0, 1, 5, 6 or 10")],
    members: Annotated[int, typer.Option("--members", help="number of member devices")],
    chunk: Annotated[str, typer.Option("--chunk", help="strip (chunk) size per member")] = "64KiB",
    name: NameOption = None,
    ceiling_iops: Annotated[Optional[float], typer.Option(help="controller/host IOPS ceiling")] = None,
    ceiling_mib_s: Annotated[Optional[float], typer.Option(help="controller/host MiB/s ceiling")] = None,
    json_output: JsonOption = False,
) -> None:
    """Register an array of N members as a derived device, predicted from the member's model."""
    spec = {
        "kind": "raid",
        "base": member,
        "level": level,
        "members": members,
        "chunk": parse_size(chunk),
        "ceiling_iops": ceiling_iops,
        "ceiling_mib_s": ceiling_mib_s,
    }
    _register(name or f"{member}-raid{level}x{members}", spec, json_output)


@whatif_app.command("fabric")
@handle_errors
def fabric(
    local: Annotated[str, typer.Option("--local", help="the measured local device (trained)")],
    transport: Annotated[str, typer.Option("--transport", help="tcp or rdma")] = "tcp",
    added_latency: Annotated[
        Optional[str],
        typer.Option(help="latency the fabric adds per I/O (default 20us for tcp, 5us for rdma)"),
    ] = None,
    link_gbps: Annotated[float, typer.Option(help="link speed, Gb/s")] = 25.0,
    target_iops: Annotated[
        Optional[float],
        typer.Option(help="the target's IOPS ceiling (its submission threads; binds small I/O)"),
    ] = None,
    name: NameOption = None,
    json_output: JsonOption = False,
) -> None:
    """Register a local device exported over NVMe-oF as a derived device."""
    from modeling.derived.fabric import TRANSPORTS

    added = TRANSPORTS.get(transport, 0.0) if added_latency is None else parse_duration_us(added_latency)
    spec = {
        "kind": "fabric",
        "base": local,
        "transport": transport,
        "added_latency_us": added,
        "link_gbps": link_gbps,
        "target_iops": target_iops,
    }
    _register(name or f"{local}-nvmeof-{transport}", spec, json_output)


def _register(name: str, spec: dict[str, Any], json_output: bool) -> None:
    from modeling.derived.store import load_derived, register_derived
    from modeling.serving.registry import ModelRegistry

    data = datadir()
    registry = ModelRegistry(data)
    registry.load(str(spec["base"]))  # a base without a model fails here, before anything is stored
    dev = register_derived(data, name, spec)
    model = load_derived(dev, registry.load)
    if json_output:
        print_json(
            {
                "device": dev.name,
                "class": dev.device_class,
                "derived": model.derived,
                "spec": dev.metadata["derived"],
                "metrics": list(model.metrics),
            }
        )
        return
    console.print(
        f"registered what-if [bold]{dev.name}[/] (class {dev.device_class}, derived from "
        f"{spec['base']}): {model.law}"
    )
    console.print(f"predict it like any device: ssdpredict predict --device {dev.name} ...")


def calibrate_whatif(device: str, reference: str, json_output: bool) -> bool:
    """``train --device REAL --reference WHATIF``: calibrate the what-if on REAL's points.

    False when the reference is not a what-if (then ``train`` transfers as usual).
    """
    from modeling.derived.store import calibrate_derived
    from modeling.serving.registry import ModelRegistry

    data = datadir()
    if "derived" not in data.catalog.get_device(reference).metadata:
        return False
    calib = calibrate_derived(data, device, reference, ModelRegistry(data).load)
    if json_output:
        print_json({"device": reference, "calibrated_on": device, "calibration": calib})
        return True
    console.print(
        f"calibrated what-if [bold]{reference}[/] on {calib['points']} measured workloads of {device}"
    )
    for m, c in calib["metrics"].items():
        console.print(
            f"  {m}: {c['kind']} log-ratio correction; error on those points "
            f"{calib['mre_before'][m]:.1%} -> {calib['mre_after'][m]:.1%}",
            highlight=False,
        )
    console.print(f"predict with it: ssdpredict predict --device {reference} ...")
    return True
