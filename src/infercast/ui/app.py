"""The web app: FastAPI routes for the four pages, uploads, job progress and downloads.

Pages are server-rendered (Jinja2) GET forms, so a page's address encodes its inputs; charts are Plotly.js
figures served from the ``plotly`` package's bundled copy (no CDN: the app works offline).
"""

from __future__ import annotations

import hashlib
import tempfile
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from infercast.ui.forms import UPLOAD_PREFIX, Form
from infercast.ui.jobs import JobRunner

HERE = Path(__file__).parent
PAGES = ("predict", "simulate", "plan", "validate")
UPLOAD_KINDS = {"config": (".json",), "trace": (".csv", ".jsonl", ".json"), "bench": (".json", ".jsonl", ".csv")}
"""What each upload field takes (suffixes)."""


@dataclass
class Limits:
    """What the server refuses: uploads over ``upload_bytes``, runs past ``run_s``, more than ``running`` runs."""

    upload_bytes: int = 8 * 2**20
    run_s: float = 120.0
    running: int = 2
    sim_requests: int = 20_000
    plan_candidates: int = 96
    gpus: int = 8


@dataclass
class Upload:
    path: Path
    name: str


@dataclass
class UIState:
    """What the pages share: limits, the job runner, uploaded files, a scratch folder."""

    limits: Limits
    root: Path
    jobs: JobRunner
    uploads: dict[str, Upload] = field(default_factory=dict)

    def upload(self, key: str) -> Upload | None:
        return self.uploads.get(key)


def _page_module(name: str) -> Any:
    from importlib import import_module

    return import_module(f"infercast.ui.{name}_page")


def _plotly_js() -> Path:
    """plotly.min.js as bundled in the ``plotly`` Python package (offline)."""
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def create_app(limits: Limits | None = None, root: Path | None = None) -> FastAPI:
    """The app; ``root`` holds uploads and job files (a fresh temporary folder by default)."""
    limits = limits or Limits()
    scratch = root or Path(tempfile.mkdtemp(prefix="infercast-ui-"))
    state = UIState(limits, scratch, JobRunner(scratch / "jobs", limit_s=limits.run_s, max_running=limits.running))

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        state.jobs.shutdown()

    app = FastAPI(title="infercast", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.ui = state
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    @app.middleware("http")
    async def limit_upload(request: Request, call_next):
        size = request.headers.get("content-length")
        if request.method == "POST" and size and size.isdigit() and int(size) > limits.upload_bytes + 4096:
            return _too_big(limits)
        return await call_next(request)

    @app.get("/", include_in_schema=False)
    def index() -> RedirectResponse:
        return RedirectResponse("/predict")

    @app.get("/vendor/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        return FileResponse(_plotly_js(), media_type="application/javascript")

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"ok": True, "running": state.jobs.running()}

    def page(name: str):
        def handler(request: Request) -> HTMLResponse:
            form = Form(_multi(request), uploads=state.upload)
            template = f"{name}.html"
            try:
                context = _page_module(name).render(form, state)
            except Exception as exc:  # a bug: one line on the page, as the CLI prints it, never a traceback
                form.banner.append(_internal(exc))
                context, template = {}, "error.html"
            context |= {"page": name, "pages": PAGES, "form": form, "limits": limits, "q": form.query_items()}
            return templates.TemplateResponse(
                request, template, context, status_code=500 if template == "error.html" else 200
            )

        handler.__name__ = f"{name}_page"
        return handler

    for name in PAGES:
        app.get(f"/{name}", response_class=HTMLResponse)(page(name))

    _job_routes(app, state)

    @app.exception_handler(Exception)
    async def internal(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"error": {"field": None, "message": _internal(exc)}}, 500)

    return app


def _job_routes(app: FastAPI, state: UIState) -> None:
    """Job progress, cancel and downloads, and uploads."""

    @app.get("/api/jobs/{job_id}")
    def job_status(job_id: str) -> JSONResponse:
        job = state.jobs.jobs.get(job_id)
        if job is None:
            return JSONResponse({"error": {"field": "job", "message": "job: unknown or expired"}}, status_code=404)
        return JSONResponse(job.view())

    @app.post("/api/jobs/{job_id}/cancel")
    def job_cancel(job_id: str) -> JSONResponse:
        job = state.jobs.cancel(job_id)
        if job is None:
            return JSONResponse({"error": {"field": "job", "message": "job: unknown or expired"}}, status_code=404)
        return JSONResponse(job.view())

    @app.get("/jobs/{job_id}/{filename}")
    def job_file(job_id: str, filename: str) -> Response:
        job = state.jobs.jobs.get(job_id)
        path = job.folder / filename if job is not None else None
        if path is None or "/" in filename or filename.startswith(".") or not path.is_file():
            return JSONResponse({"error": {"field": "file", "message": "file: not found"}}, status_code=404)
        return FileResponse(path, filename=filename)

    @app.post("/upload")
    async def upload(request: Request) -> Response:
        return await _receive_upload(request, state)


def _internal(exc: Exception) -> str:
    """The CLI's line for a bug: its type, where it happened and its text (no traceback)."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    place = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    text = " ".join(str(exc).split())[:300]
    return f"internal error {type(exc).__name__}{place}: {text} (please report)"


def _multi(request: Request) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, value in request.query_params.multi_items():
        out.setdefault(key, []).append(value)
    return out


def _too_big(limits: Limits) -> JSONResponse:
    mib = limits.upload_bytes / 2**20
    message = f"file: larger than the web UI's upload limit of {mib:g} MiB"
    return JSONResponse({"error": {"field": "file", "message": message}}, status_code=413)


async def _receive_upload(request: Request, state: UIState) -> Response:
    """Store an uploaded file and go back to its page with the field naming it (``upload:<id>``)."""
    form = await request.form(max_part_size=state.limits.upload_bytes + 1)
    back = str(form.get("back") or "/predict")
    target = str(form.get("field") or "")
    kind = str(form.get("kind") or "")
    file = form.get("file")
    if not back.startswith("/") or back.startswith("//") or kind not in UPLOAD_KINDS or not target.isidentifier():
        return JSONResponse({"error": {"field": "kind", "message": "kind: not an upload this app takes"}}, 400)
    if file is None or isinstance(file, str) or not file.filename:
        return JSONResponse({"error": {"field": "file", "message": "file: choose a file to upload"}}, 400)
    data = await file.read(state.limits.upload_bytes + 1)
    if len(data) > state.limits.upload_bytes:
        return _too_big(state.limits)
    name = Path(file.filename).name
    suffix = next((s for s in UPLOAD_KINDS[kind] if name.lower().endswith(s)), None)
    if suffix is None:
        allowed = ", ".join(UPLOAD_KINDS[kind])
        return JSONResponse({"error": {"field": "file", "message": f"file: {name!r} is not one of {allowed}"}}, 400)
    key = hashlib.sha256(data).hexdigest()[:16]
    folder = state.root / "uploads" / key
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ("config.json" if kind == "config" else name)
    path.write_bytes(data)
    state.uploads[key] = Upload(path, name)
    parts = urlsplit(back)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k not in (target, "run", "job")]
    query.append((target, f"{UPLOAD_PREFIX}{key}"))
    return RedirectResponse(f"{parts.path}?{urlencode(query)}", status_code=303)
