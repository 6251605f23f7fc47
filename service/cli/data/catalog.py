"""CLI: ``ssdpredict catalog check`` and ``ssdpredict catalog rebuild``."""

from __future__ import annotations

from typing import Annotated

import typer

from modeling.errors import InvalidInput
from modeling.store.catalog import data_files_exist
from modeling.store.rebuild import rebuild_catalog
from modeling.store.schema import integrity_problems
from service.cli.common import console, datadir, handle_errors, print_json
from service.cli.options import JsonOption

catalog_app = typer.Typer(help="Check the catalog for damage, or rebuild it from the data files.",
                          no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the ``catalog`` group."""
    app.add_typer(catalog_app, name="catalog")


@catalog_app.command("check")
@handle_errors
def check() -> None:
    """Run SQLite's full integrity check on the catalog (every command runs a quick one)."""
    data = datadir()
    path = data.catalog_path
    if (not path.exists() or path.stat().st_size == 0) and not data_files_exist(data.measurements_dir,
                                                                                  data.models_dir):
        # a fresh data directory: the catalog is created by the first sweep, ingest or train
        console.print(f"no catalog yet in {data.root}: nothing measured or trained here, nothing to check",
                      highlight=False, soft_wrap=True)
        return
    problems = integrity_problems(path)
    if problems:
        raise InvalidInput(f"the catalog is damaged: {'; '.join(problems[:5])}; "
                           "recover with `ssdpredict catalog rebuild`")
    console.print("catalog ok")


@catalog_app.command("rebuild")
@handle_errors
def rebuild(
    force: Annotated[bool, typer.Option(
        "--force", help="rebuild even though the catalog is not damaged")] = False,
    json_output: JsonOption = False,
) -> None:
    """Rebuild the catalog from the Parquet measurements and model files (keeps the damaged one)."""
    data = datadir()
    if not force and not integrity_problems(data.catalog_path):
        raise InvalidInput("the catalog is not damaged; a rebuild would drop unfinished sweeps, the raw "
                           "fio JSON and the job history. Pass --force to rebuild anyway")
    report = rebuild_catalog(data)
    if json_output:
        print_json(vars(report))
        return
    console.print(f"rebuilt the catalog: {report.devices} devices, {report.sweeps} sweeps, {report.points} "
                  f"points, {report.models} model versions", highlight=False)
    for device, version in sorted(report.active.items()):
        console.print(f"  {device}: active model {version}", highlight=False)
    for line in report.notes:
        console.print(f"note: {line}", highlight=False)
    for line in report.skipped:
        console.print(f"[yellow]skipped[/] {line}", highlight=False)
    if report.damaged_copy:
        console.print(f"the old catalog is kept as {report.damaged_copy}", highlight=False)
