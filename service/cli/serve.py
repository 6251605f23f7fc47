"""CLI: ``ssdpredict serve`` runs the REST API with uvicorn."""

from __future__ import annotations

import errno
import socket
from typing import Annotated

import typer

from modeling.errors import InvalidInput

from service.cli.common import console, datadir, err_console, handle_errors
from service.cli.options import HostOption, PortOption, WorkersOption
from service.config import get_settings, is_loopback_host


def token_notice(token_set: bool) -> str:
    """One line saying whether mutating endpoints need a bearer token."""
    if token_set:
        return "API token: in force (upload, retrain and activate need `Authorization: Bearer <token>`)"
    return "API token: none (set SSDPREDICT_API_TOKEN to protect upload, retrain and activate)"


@handle_errors
def serve(
    host: HostOption = None,
    port: PortOption = None,
    workers: WorkersOption = None,
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
    check_port_free(host, port)
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


def check_port_free(host: str, port: int) -> None:
    """Bind ``host:port`` once and let it go, so a port in use is one line before "serving on"
    rather than uvicorn's multi-line ``[Errno 98]`` after it."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind(address)
    except socket.gaierror as exc:
        raise InvalidInput(f"cannot serve on {host}: {exc.strerror}") from None
    except OSError as exc:
        raise InvalidInput(f"cannot serve on {host}:{port}: {exc.strerror}"
                           + ("; another process is listening there (pick another --port)"
                              if exc.errno == errno.EADDRINUSE else "")) from None


def register(app: typer.Typer) -> None:
    """Add this module's commands to the app."""
    app.command("serve")(serve)
