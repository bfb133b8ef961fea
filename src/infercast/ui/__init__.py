"""``infercast ui``: a local web app over the public API (predict, simulate, plan, calibrate/validate).

Needs the ``ui`` extra (``pip install -e ".[ui]"``: FastAPI, uvicorn, Plotly's bundled plotly.js). Binds to
loopback unless told otherwise; every page's address encodes its inputs.
"""

from __future__ import annotations

import ipaddress

from infercast.errors import InfercastError

MISSING = 'the web UI needs its extra: pip install -e ".[ui]" (fastapi, uvicorn, jinja2, plotly, python-multipart)'


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, port: int, allow_remote: bool) -> None:
    """Refuse a non-loopback bind unless ``allow_remote``; refuse a port outside 1..65535 (0: any free port)."""
    if not allow_remote and not is_loopback(host):
        raise InfercastError(
            f"{host!r} is not a loopback address: the app has no authentication, so it binds to 127.0.0.1 "
            "unless --allow-remote is given",
            field="host",
        )
    if not 0 <= port <= 65535:
        raise InfercastError(f"must be 0-65535, got {port}", field="port")


def serve(host: str = "127.0.0.1", port: int = 8765, *, allow_remote: bool = False) -> None:
    """Run the app until Ctrl-C (uvicorn stops cleanly and running jobs are stopped)."""
    check_bind(host, port, allow_remote)
    try:
        import uvicorn

        from infercast.ui.app import create_app
    except ImportError as exc:
        raise InfercastError(f"{MISSING}; {' '.join(str(exc).split())}", field="ui") from None
    if port == 0:  # any free port, chosen here so that the printed address is the real one
        import socket

        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.bind((host.strip("[]"), 0))
            port = probe.getsockname()[1]
    app = create_app()
    shown = f"[{host}]" if ":" in host else host
    print(f"infercast ui: http://{shown}:{port}/  (Ctrl-C stops it)", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=5)
