"""``infercast ui``: start the local web app (imported lazily: the other commands stay free of FastAPI)."""

from __future__ import annotations

from typing import Annotated

import typer


def ui(
    host: Annotated[str, typer.Option(help="Address to bind (loopback unless --allow-remote).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = 8765,
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="Allow a non-loopback --host (the app has no authentication).")
    ] = False,
) -> None:
    """Start the web app: predict, simulate, plan and validate in a browser; prints its URL."""
    from infercast.ui import serve

    serve(host, port, allow_remote=allow_remote)
