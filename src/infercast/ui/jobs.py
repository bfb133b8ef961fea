"""Long runs (simulate, plan) in child processes: a job id to poll, progress, cancel, and a hard time limit.

A child process (not a thread) so that cancel and the time limit stop the work for real; the child sends back
plain data (what the page shows) and writes its downloads into the job's folder.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import shutil
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from infercast.errors import InfercastError
from infercast.ui.forms import Form

Work = Callable[[dict[str, Any], Path, Callable[[float | None, str], None]], dict[str, Any]]
"""A job's function: (inputs, folder for its files, progress(fraction or None, text)) -> what the page shows."""


def _child(work: Work, inputs: dict[str, Any], folder: Path, conn: Connection) -> None:
    """Run ``work`` and send ("done", result) / ("error", field, message) / ("crash", text) back."""
    import warnings

    def progress(fraction: float | None, text: str) -> None:
        conn.send(("progress", None if fraction is None else float(fraction), text))

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = work(inputs, folder, progress)
        result.setdefault("warnings", [])
        result["warnings"] += [str(w.message) for w in caught if str(w.message) not in result["warnings"]]
        conn.send(("done", result))
    except InfercastError as exc:
        conn.send(("error", exc.field, str(exc), exc.message))
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
        place = f" at {Path(where.filename).name}:{where.lineno}" if where else ""
        conn.send(("crash", f"internal error {type(exc).__name__}{place}: {' '.join(str(exc).split())[:300]}"))
    finally:
        conn.close()


@dataclass
class Job:
    """One run: its state (running, done, error, cancelled, timeout), progress and result."""

    id: str
    kind: str
    key: str
    folder: Path
    limit_s: float
    started: float = field(default_factory=time.monotonic)
    state: str = "running"
    fraction: float | None = None
    text: str = ""
    result: dict[str, Any] | None = None
    error: tuple[str | None, str, str] | None = None
    """(field, the one-line message, the message without its field) of a run that failed or was stopped."""
    ended: float | None = None
    process: Any = None

    def view(self) -> dict[str, Any]:
        """The progress endpoint's answer."""
        elapsed = (self.ended or time.monotonic()) - self.started
        out: dict[str, Any] = {"id": self.id, "state": self.state, "elapsed_s": round(elapsed, 2)}
        out |= {"limit_s": self.limit_s, "fraction": self.fraction, "text": self.text}
        if self.error:
            out["error"] = {"field": self.error[0], "message": self.error[1]}
        return out


class JobRunner:
    """At most ``max_running`` child processes; each is stopped at ``limit_s``; finished jobs are kept (LRU)."""

    def __init__(self, root: Path, *, limit_s: float = 120.0, max_running: int = 2, keep: int = 32):
        self.root = root
        self.limit_s = limit_s
        self.max_running = max_running
        self.keep = keep
        self.jobs: dict[str, Job] = {}
        self.lock = threading.Lock()
        self.ctx = mp.get_context("spawn")  # not fork: the server runs threads

    def running(self) -> int:
        return sum(1 for j in self.jobs.values() if j.state == "running")

    def find(self, kind: str, key: str) -> Job | None:
        """The newest job of this kind and inputs that is running or done (a reload does not rerun it)."""
        with self.lock:
            hits = [j for j in self.jobs.values() if j.kind == kind and j.key == key and j.state in ("running", "done")]
        return hits[-1] if hits else None

    def start(self, kind: str, key: str, work: Work, inputs: dict[str, Any]) -> Job:
        """Start ``work(inputs)``; raises InfercastError when ``max_running`` jobs already run."""
        with self.lock:
            if self.running() >= self.max_running:
                raise InfercastError(
                    f"{self.max_running} runs are in progress (the web UI's limit); wait or cancel one", field="run"
                )
            job_id = uuid.uuid4().hex[:12]
            folder = self.root / job_id
            folder.mkdir(parents=True)
            job = Job(job_id, kind, key, folder, self.limit_s)
            parent, child = self.ctx.Pipe(duplex=False)
            job.process = self.ctx.Process(target=_child, args=(work, inputs, folder, child), daemon=True)
            job.process.start()
            child.close()
            self.jobs[job_id] = job
            self._forget_old()
        threading.Thread(target=self._watch, args=(job, parent), daemon=True).start()
        return job

    def _watch(self, job: Job, conn: Connection) -> None:
        """Read the child's messages until it ends, stopping it at the time limit."""
        deadline = job.started + job.limit_s
        while job.state == "running":
            left = deadline - time.monotonic()
            if left <= 0:
                text = f"stopped at the web UI's limit of {job.limit_s:g} s; use the CLI for longer runs"
                job.error = ("run", f"run: {text}", text)  # before the state: a page reading 'timeout' has it
                self._stop(job, "timeout")
                break
            try:
                ready = conn.poll(min(left, 0.2))
                message = conn.recv() if ready else None
            except (EOFError, OSError):
                if job.state == "running":
                    job.state = "error"
                    text = "internal error: the run's process ended without an answer"
                    job.error = (None, text, text)
                break
            if message is not None:
                self._receive(job, message)
        job.ended = job.ended or time.monotonic()
        conn.close()
        if job.process is not None:
            job.process.join(timeout=5)

    def _receive(self, job: Job, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "progress":
            job.fraction, job.text = message[1], message[2]
        elif kind == "done":
            job.result, job.state, job.fraction = message[1], "done", 1.0
        elif kind == "error":
            job.error, job.state = (message[1], message[2], message[3]), "error"
        elif kind == "crash":
            job.error, job.state = (None, message[1], message[1]), "error"

    def _stop(self, job: Job, state: str) -> None:
        job.state = state  # first: the watcher then reads the child's end as this stop, not as a crash
        job.ended = time.monotonic()
        if job.process is not None and job.process.is_alive():
            job.process.terminate()
            job.process.join(timeout=5)
            if job.process.is_alive():
                job.process.kill()

    def cancel(self, job_id: str) -> Job | None:
        job = self.jobs.get(job_id)
        if job is not None and job.state == "running":
            self._stop(job, "cancelled")
        return job

    def _forget_old(self) -> None:
        finished = [j for j in self.jobs.values() if j.state != "running"]
        for job in finished[: max(0, len(self.jobs) - self.keep)]:
            self.jobs.pop(job.id, None)
            shutil.rmtree(job.folder, ignore_errors=True)

    def shutdown(self) -> None:
        """Stop every running child (the server is stopping)."""
        for job in list(self.jobs.values()):
            if job.state == "running":
                self._stop(job, "cancelled")


def follow(
    form: Form,
    runner: JobRunner,
    kind: str,
    work: Work,
    inputs: dict[str, Any],
    *,
    command: Any,
    fields: Any,
    flag_fields: bool = False,
) -> tuple[Job | None, dict[str, Any] | None]:
    """The job for the form's inputs (the one its ``job`` names, or an equal one running or done, else a new
    one) and its result when done; a failed run's error goes beside its field, as the CLI words it."""
    key = hashlib.sha256(json.dumps(sorted(form.query_items())).encode()).hexdigest()[:16]
    named = runner.jobs.get(form.get("job"))
    job = named if named is not None and named.key == key else runner.find(kind, key)
    if job is None:
        try:
            job = runner.start(kind, key, work, inputs)
        except InfercastError as exc:
            form.banner.append(str(exc))
            return None, None
    if job.state == "done":
        return job, job.result
    if job.error:
        field, text, bare = job.error
        if job.state == "error" and field:
            form.library_error(InfercastError(bare, field=field), command, fields, flag_fields=flag_fields)
        else:
            form.banner.append(text)
    elif job.state == "cancelled":
        form.banner.append("run: cancelled; press Run to start it again")
    return job, None
