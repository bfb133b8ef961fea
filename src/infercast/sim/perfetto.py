"""Export a simulation as a Chrome trace-event JSON file, for ui.perfetto.dev or chrome://tracing.

The file uses the JSON Object Format of the Trace Event Format (``{"traceEvents": [...], ...}``); timestamps
(``ts``) and durations (``dur``) are in microseconds of simulated time, starting at the simulation's t = 0.

What the trace holds:

- one *process* per replica (``process_name`` metadata ``replica N · model on gpu``), with

  - a ``steps`` thread (the process's main thread, tid = pid): one complete event (``"ph": "X"``) per
    engine step named ``prefill``, ``decode`` or ``mixed``; ``args`` give the prefill tokens, the decode
    sequences, how many consecutive identical-shape decode steps the slice stands for, and the ids of the
    requests prefilled in it;
  - counter tracks (``"ph": "C"``) from the occupancy samples: KV blocks in use, KV usage (% of the pool),
    running, waiting and prefilling sequences (Perfetto names them ``KV blocks in_use``, ``KV usage pct``,
    ``Batch running``, ``Queue waiting``, ``Prefilling seqs``: counter name, then series name);

- a ``requests`` process (the first ``max_requests`` requests by arrival) whose threads are lanes: each
  request is a ``req N`` slice from arrival to its last token with nested ``overhead`` → ``queued`` →
  ``prefill`` → ``decode`` slices from the per-request table (overhead: arrival → reaching the engine, the
  engine's per-request API-server and tokenisation time; queued: the engine's waiting queue, ``queue_s``,
  → first scheduled; prefill: → first token; decode: → last token), and its latencies in ``args``.
  Requests that do not overlap share a lane.

Step records exist only when the simulation kept them (``simulate(..., trace_steps=N)``); the file notes in
``otherData`` when none or only the first N were kept.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from infercast.errors import InfercastError
from infercast.sim.labels import deployment_label

if TYPE_CHECKING:
    from infercast.sim.api import SimulationResult

US_PER_S = 1e6
LANE_TID_BASE = 1000
"""Request lane k has tid ``pid * LANE_TID_BASE + k``: thread ids stay unique across the whole file (and
non-zero), which Perfetto needs to keep threads apart; a replica's steps thread is its main thread (tid = pid)."""
DEFAULT_MAX_REQUESTS = 200
"""Requests drawn on the per-request track by default (the first ones by arrival)."""
DEFAULT_MAX_COUNTER_SAMPLES = 50_000
"""Occupancy samples per replica above which counters are thinned (evenly) to keep files small."""
_PREFILL_IDS_SHOWN = 64
"""At most this many prefill request ids are listed in one step's args."""

_COUNTERS: tuple[tuple[str, str, str], ...] = (
    # (counter name, series key, occupancy column); Perfetto names each track "<name> <key>"
    ("KV blocks", "in_use", "kv_blocks"),
    ("Batch", "running", "running"),
    ("Queue", "waiting", "waiting"),
    ("Prefilling", "seqs", "prefilling"),
)


def _us(seconds: float) -> float:
    """Seconds of simulated time as microseconds, rounded to the nanosecond (keeps files compact)."""
    return round(float(seconds) * US_PER_S, 3)


def _finite(value: Any) -> Any:
    """``value`` made JSON-safe: numpy scalars to Python, non-finite floats to None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _meta(name: str, pid: int, args: dict[str, Any], tid: int | None = None) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": pid, "tid": pid if tid is None else tid, "args": args}


def _replica_ids(result: SimulationResult) -> list[int]:
    """Every replica that appears anywhere in the result (configured count, steps, samples, requests)."""
    ids = set(range(int(result.config.get("replicas", 1) or 1)))
    ids.update(s.replica for s in result.recorder.steps)
    ids.update(int(r) for r, *_ in result.recorder.samples)
    return sorted(ids)


def _step_events(result: SimulationResult, pid_of: dict[int, int]) -> list[dict[str, Any]]:
    events = []
    for s in result.recorder.steps:
        dur = _us(s.duration)
        if dur <= 0:
            continue
        args: dict[str, Any] = {
            "prefill_tokens": int(s.prefill_tokens),
            "decode_seqs": int(s.decode_seqs),
            "steps": int(s.steps),
        }
        if s.steps > 1:
            args["mean_step_ms"] = round(s.duration / s.steps * 1e3, 4)
        if s.prefill_ids:
            ids = [int(i) for i in s.prefill_ids]
            args["prefill_ids"] = ids[:_PREFILL_IDS_SHOWN]
            if len(ids) > _PREFILL_IDS_SHOWN:
                args["prefill_ids_omitted"] = len(ids) - _PREFILL_IDS_SHOWN
        events.append(
            {
                "name": s.kind,
                "cat": "step",
                "ph": "X",
                "ts": _us(s.start),
                "dur": dur,
                "pid": pid_of[s.replica],
                "tid": pid_of[s.replica],
                "args": args,
            }
        )
    return events


def _counter_events(result: SimulationResult, pid_of: dict[int, int], max_samples: int | None) -> list[dict[str, Any]]:
    occ = result.occupancy()
    if occ.empty:
        return []
    total_blocks = result.config.get("kv_blocks_per_replica") or 0
    events = []
    for replica, group in occ.groupby("replica", sort=True):
        group = group.sort_values("t", kind="stable")
        if max_samples is not None and len(group) > max_samples:
            keep = np.unique(np.linspace(0, len(group) - 1, max_samples).round().astype(int))
            group = group.iloc[keep]
        pid = pid_of[int(replica)]
        for row in group.itertuples(index=False):
            ts = _us(row.t)
            for name, key, column in _COUNTERS:
                events.append(
                    {
                        "name": name,
                        "ph": "C",
                        "ts": ts,
                        "pid": pid,
                        "tid": pid,
                        "args": {key: int(getattr(row, column))},
                    }
                )
            if total_blocks:
                events.append(
                    {
                        "name": "KV usage",
                        "ph": "C",
                        "ts": ts,
                        "pid": pid,
                        "tid": pid,
                        "args": {"pct": round(100.0 * row.kv_blocks / total_blocks, 3)},
                    }
                )
    return events


def _request_events(result: SimulationResult, pid: int, max_requests: int | None) -> tuple[list[dict[str, Any]], int]:
    """Lanes of per-request slices for the first ``max_requests`` finished requests (None: all); (events, lanes
    used)."""
    if max_requests is not None and max_requests <= 0:
        return [], 0
    df = result.requests()
    df = df[np.isfinite(df["finish_s"]) & np.isfinite(df["first_token_s"])]
    df = df.sort_values("arrival_s", kind="stable")
    if max_requests is not None:
        df = df.head(max_requests)
    events: list[dict[str, Any]] = []
    lane_free: list[float] = []  # per lane: when its last request ends (us)
    for rid, row in df.iterrows():
        arrive = _us(row.arrival_s)
        first = max(_us(row.first_token_s), arrive)
        scheduled = _us(row.scheduled_s) if math.isfinite(row.scheduled_s) else arrive
        scheduled = min(max(scheduled, arrive), first)
        queue_s = row.queue_s if math.isfinite(row.queue_s) else 0.0
        queued = min(max(_us(row.scheduled_s - queue_s), arrive), scheduled) if queue_s else scheduled
        finish = max(_us(row.finish_s), first)
        if finish <= arrive:
            continue
        lane = next((i for i, free in enumerate(lane_free) if free <= arrive), len(lane_free))
        if lane == len(lane_free):
            lane_free.append(finish)
        lane_free[lane] = finish
        tid = pid * LANE_TID_BASE + lane + 1
        args = {
            "request": int(rid),
            "replica": int(row.replica) if math.isfinite(row.replica) else None,
            "prompt_tokens": int(row.prompt_tokens),
            "output_tokens": int(row.output_tokens),
            "cached_tokens": int(row.cached_tokens),
            "preemptions": int(row.preemptions),
            "queue_ms": _finite(round(row.queue_s * 1e3, 4)),
            "ttft_ms": _finite(round(row.ttft_s * 1e3, 4)),
            "tpot_ms": _finite(round(row.tpot_s * 1e3, 4)),
            "e2e_ms": _finite(round(row.e2e_s * 1e3, 4)),
        }
        events.append(
            {
                "name": f"req {rid}",
                "cat": "request",
                "ph": "X",
                "ts": arrive,
                "dur": round(finish - arrive, 3),
                "pid": pid,
                "tid": tid,
                "args": args,
            }
        )
        for name, start, end in (
            ("overhead", arrive, queued),
            ("queued", queued, scheduled),
            ("prefill", scheduled, first),
            ("decode", first, finish),
        ):
            dur = round(end - start, 3)
            if dur > 0:
                events.append(
                    {
                        "name": name,
                        "cat": "request",
                        "ph": "X",
                        "ts": start,
                        "dur": dur,
                        "pid": pid,
                        "tid": tid,
                        "args": {"request": int(rid)},
                    }
                )
    return events, len(lane_free)


def to_chrome_trace(
    result: SimulationResult,
    *,
    max_requests: int | None = DEFAULT_MAX_REQUESTS,
    max_counter_samples: int | None = DEFAULT_MAX_COUNTER_SAMPLES,
) -> dict[str, Any]:
    """The simulation as a Chrome trace-event JSON object (see the module docstring for its tracks).

    ``max_requests``: requests drawn on the per-request track (first by arrival; 0 for none, None for all).
    ``max_counter_samples``: occupancy samples per replica kept for counters (thinned evenly; None: all).
    """
    if max_requests is not None and max_requests < 0:
        raise InfercastError(f"must be >= 0 or None (all), got {max_requests}", field="max_requests")
    if max_counter_samples is not None and max_counter_samples < 2:
        raise InfercastError(f"must be >= 2 or None, got {max_counter_samples}", field="max_counter_samples")
    cfg = result.config
    replicas = _replica_ids(result)
    pid_of = {r: r + 1 for r in replicas}  # pid 0 is avoided: some viewers treat it as the idle process
    label = deployment_label(cfg, pools=False)
    events: list[dict[str, Any]] = []
    for r in replicas:
        pid = pid_of[r]
        events.append(_meta("process_name", pid, {"name": f"replica {r} · {label}"}))
        events.append(_meta("process_sort_index", pid, {"sort_index": pid}))
        events.append(_meta("thread_name", pid, {"name": "steps"}))
    events.extend(_step_events(result, pid_of))
    events.extend(_counter_events(result, pid_of, max_counter_samples))

    req_pid = max(pid_of.values(), default=0) + 1
    req_events, lanes = _request_events(result, req_pid, max_requests)
    n_requests = int(result.table.n)
    if req_events:
        shown = sum(1 for e in req_events if e["name"].startswith("req "))
        title = f"requests (first {shown} of {n_requests})" if shown < n_requests else f"requests ({shown})"
        events.append(_meta("process_name", req_pid, {"name": title}))
        events.append(_meta("process_sort_index", req_pid, {"sort_index": req_pid}))
        for lane in range(lanes):
            tid = req_pid * LANE_TID_BASE + lane + 1
            events.append(_meta("thread_name", req_pid, {"name": f"lane {lane + 1}"}, tid=tid))
            events.append(_meta("thread_sort_index", req_pid, {"sort_index": lane + 1}, tid=tid))
        events.extend(req_events)

    rec = result.recorder
    kept = len(rec.steps)
    other: dict[str, Any] = {
        "generator": "infercast simulate",
        "time": "simulated; ts/dur in microseconds from t = 0",
        **{k: _finite(v) for k, v in cfg.items() if isinstance(v, str | int | float | bool)},
        "steps_total": int(rec.step_count),
        "step_records_kept": kept,
        "busy_time_s": float(rec.busy_time),
    }
    if kept == 0:
        other["note"] = "no engine steps were recorded: run simulate(..., trace_steps=N) to keep them"
    elif sum(s.steps for s in rec.steps) < rec.step_count:
        last = rec.steps[-1]
        other["note"] = (
            f"only the first {kept} step records were kept (to t = {last.start + last.duration:.3f} s); "
            "raise trace_steps to keep more"
        )
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def write_chrome_trace(
    result: SimulationResult,
    path: str | Path,
    *,
    max_requests: int | None = DEFAULT_MAX_REQUESTS,
    max_counter_samples: int | None = DEFAULT_MAX_COUNTER_SAMPLES,
) -> Path:
    """Write :func:`to_chrome_trace` to ``path`` (gzip-compressed when it ends with ``.gz``); returns the path.

    Open the file at https://ui.perfetto.dev ("Open trace file") or in chrome://tracing ("Load").
    """
    path = Path(path)
    trace = to_chrome_trace(result, max_requests=max_requests, max_counter_samples=max_counter_samples)
    text = json.dumps(trace, separators=(",", ":"), allow_nan=False)
    from infercast.files import atomic_path

    with atomic_path(path, "trace_out") as tmp:  # all or nothing: never a half-written trace
        if path.name.endswith(".gz"):
            with gzip.open(tmp, "wt", encoding="utf-8") as fh:
                fh.write(text)
        else:
            tmp.write_text(text, encoding="utf-8")
    return path


def trace_cuts(result: SimulationResult, max_requests: int | None = DEFAULT_MAX_REQUESTS) -> list[str]:
    """What a trace of ``result`` leaves out, and why, in words ('the request track shows the first 200 of 2,000
    requests (to keep the file small)'); empty when it holds everything."""
    cuts = []
    finished = int(np.count_nonzero(np.isfinite(result.table.finish) & np.isfinite(result.table.first_token)))
    if max_requests is not None and finished > max_requests:
        cuts.append(
            f"the request track shows the first {max_requests:,} of {finished:,} finished requests by arrival "
            "(to keep the file small and the viewer fast)"
        )
    rec = result.recorder
    if rec.steps and sum(s.steps for s in rec.steps) < rec.step_count:
        cuts.append(f"the step track holds the first {len(rec.steps):,} step records of {rec.step_count:,} steps")
    return cuts


_REQUIRED = {
    "X": ("name", "ph", "ts", "dur", "pid", "tid"),
    "C": ("name", "ph", "ts", "pid", "args"),
    "M": ("name", "ph", "pid", "args"),
}
_METADATA = {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}


def validate_chrome_trace(trace: dict[str, Any]) -> list[str]:
    """Problems with ``trace`` as a trace-event JSON object (empty list when it is well formed).

    Checks the subset of the format this module writes: the object layout, the fields each phase needs,
    positive numeric durations, numeric counter values and known metadata names.
    """
    problems: list[str] = []
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        return ["traceEvents: missing or not a list"]
    if trace.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        problems.append("displayTimeUnit: must be 'ms' or 'ns'")
    for i, e in enumerate(_indexed(events)):
        ph = e.get("ph")
        for key in _REQUIRED.get(str(ph), ("name", "ph", "ts", "pid", "tid")):
            if key not in e:
                problems.append(f"event {i} ({ph}): missing {key!r}")
        if ph == "X" and not (isinstance(e.get("dur"), int | float) and e["dur"] > 0):
            problems.append(f"event {i} (X): dur must be a number > 0, got {e.get('dur')!r}")
        if ph in ("X", "C") and not isinstance(e.get("ts"), int | float):
            problems.append(f"event {i} ({ph}): ts must be a number")
        if ph == "C" and not (
            isinstance(e.get("args"), dict)
            and e["args"]
            and all(isinstance(v, int | float) for v in e["args"].values())
        ):
            problems.append(f"event {i} (C): args must map series names to numbers")
        if ph == "M" and e.get("name") not in _METADATA:
            problems.append(f"event {i} (M): unknown metadata {e.get('name')!r}")
    return problems


def _indexed(events: Iterable[Any]) -> Iterable[dict[str, Any]]:
    for e in events:
        yield e if isinstance(e, dict) else {}
