"""CLI: ``ssdpredict sweep --remote h1:8765,h2:8765`` -- one plan on many hosts at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import typer

from service.cli.common import console, err_console, print_json, progress_bar, waiting

if TYPE_CHECKING:
    from rich.progress import Progress

    from collectors.plans.presets import Plan
    from collectors.sweep.run import Progress as SweepProgress
    from collectors.sweep.settings import SweepSettings
    from modeling.store import DataDir


def sweep_hosts(data: DataDir, device: str, plan: Plan, settings: SweepSettings, remotes: Sequence[str], *,
                json_output: bool, wait: bool,
                progress: Callable[[Progress, str], SweepProgress]) -> None:
    """Sweep every host, print one line per host and a summary; exit 1 when any host failed."""
    from collectors.sweep.multihost import run_multihost, summary

    with progress_bar(quiet=json_output) as bar:
        results = run_multihost(data, device, plan, settings, remotes,
                                progress=lambda name: progress(bar, name), wait=wait, on_wait=waiting)
    counts = summary(results)
    if json_output:
        print_json({"plan": plan.name, "host_count": counts["hosts"], "complete": counts["complete"],
                    "failed": counts["failed"], "unfinished": counts["unfinished"], "hosts": [
            {"remote": r.remote, "device": r.device, "error": r.error,
             **({"sweep_id": r.sweep.id, "status": r.sweep.status, "points": r.sweep.n_points,
                 "planned": r.sweep.n_planned, "engine": r.sweep.info.get("engine")} if r.sweep else {})}
            for r in results]})
    else:
        for r in results:
            if r.sweep is not None:
                console.print(f"sweep {r.sweep.id} of {r.device}: {r.sweep.n_points}/{r.sweep.n_planned} "
                              f"points stored ({r.sweep.status}, engine {r.sweep.info.get('engine')})",
                              highlight=False)
            else:
                err_console.print(f"[bold red]failed:[/] {r.device} ({r.remote}): {r.error}",
                                  highlight=False, soft_wrap=True)
        console.print(f"{counts['hosts']} hosts: {counts['complete']} complete, {counts['failed']} failed"
                      + (f", {counts['unfinished']} unfinished" if counts["unfinished"] else ""),
                      highlight=False)
    if counts["failed"]:
        raise typer.Exit(1)
