"""CLI: ``ssdpredict serve`` runs the REST API with uvicorn."""

from __future__ import annotations

from typing import Annotated

import typer

from service.cli.common import console, datadir, err_console, handle_errors
from service.config import get_settings, is_loopback_host


def token_notice(token_set: bool) -> str:
    """One line saying whether mutating endpoints need a bearer token."""
    if token_set:
        return "API token: in force (upload, retrain and activate need `Authorization: Bearer <token>`)"
    return "API token: none (set SSDPREDICT_API_TOKEN to protect upload, retrain and activate)"


@handle_errors
def serve(
    host: Annotated[
        str | None, typer.Option(help="address to bind (default SSDPREDICT_HOST or 127.0.0.1)")
    ] = None,
    port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="port (default SSDPREDICT_PORT or 8000)")
    ] = None,
    workers: Annotated[int | None, typer.Option(min=1, max=64, help="worker processes (default 1)")] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level")] = "info",
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure",
            help="serve on a non-loopback address without SSDPREDICT_API_TOKEN (anyone who reaches "
            "the port can upload, retrain and activate)",
        ),
    ] = False,
) -> None:
    """Serve predictions, devices, uploads and retrain jobs over HTTP (OpenAPI docs at /docs)."""
    import uvicorn  # imported here so other commands start fast

    settings = get_settings()
    host = host or settings.host
    port = port or settings.port
    workers = workers or settings.workers
    if settings.api_token is None and not insecure and not is_loopback_host(host):
        # Checked before anything else happens: an exposed port without a token lets anyone
        # replace the models, so the safe default is to not start at all.
        err_console.print(
            f"[bold red]error:[/] refusing to serve on {host} without an API token: anyone who reaches it "
            "could upload, retrain and activate models; set SSDPREDICT_API_TOKEN, or pass --insecure "
            "on a network you trust",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(2)
    home = datadir().root
    console.print(f"data directory: {home}", highlight=False, soft_wrap=True)
    console.print(token_notice(settings.api_token is not None), highlight=False, soft_wrap=True)
    console.print(
        f"serving on http://{host}:{port} (docs: http://{host}:{port}/docs)", highlight=False, soft_wrap=True
    )
    uvicorn.run(
        "service.api.main:app",
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        access_log=False,  # per-request logging would cost more than a prediction; /metrics counts
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("serve")(serve)
