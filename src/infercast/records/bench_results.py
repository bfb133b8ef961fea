"""Result files of public serving benchmarks as measurement records: ``vllm bench serve``, GuideLLM, AIPerf.

A user with a GPU runs one benchmark and hands its result file to ``infercast validate`` / ``calibrate``. Each
load point of the file (a vLLM result, a GuideLLM benchmark, an AIPerf run) becomes three serving records of
:mod:`infercast.records.record`: mean TTFT, median TPOT and output throughput, with the run's load (closed-loop
clients, open-loop rate, or all at once) and mean prompt/output lengths.

Formats read (schemas from the tools' sources):

- ``vllm bench serve --save-result`` JSON (``vllm/benchmarks/serve.py``; ``--append-result`` files, one JSON
  object per line, too): ``mean_ttft_ms``, ``median_tpot_ms``, ``output_throughput``, ``completed``,
  ``total_input_tokens``, ``total_output_tokens``, ``max_concurrency``, ``request_rate``, ``burstiness``,
  ``model_id``, ``backend``; ``--metadata gpu=... tp=... engine=... precision=...`` entries are read as well.
- GuideLLM JSON report (``guidellm/benchmark/schemas``): ``benchmarks[*].metrics`` distributions
  (``time_to_first_token_ms``, ``inter_token_latency_ms``, ``prompt_token_count``, ``output_token_count``, each
  ``.successful.{mean,median,count,total_sum}``), ``duration``, and the strategy in ``config.strategy`` (or
  ``args.strategy`` in older reports): synchronous, concurrent (``streams``), throughput, constant/poisson
  (``rate``).
- AIPerf ``profile_export_aiperf.json`` (metrics ``time_to_first_token``, ``inter_token_latency``,
  ``input_sequence_length``, ``output_sequence_length`` with ``avg``/``p50``, ``output_token_throughput``,
  ``request_count``; load in ``input_config.loadgen``) and ``profile_export_aiperf.csv`` (the same statistics,
  without the load: give ``concurrency`` or ``request_rate``).

Metric definitions differ between the tools; each is mapped to infercast's (vLLM's) definition:
TTFT is request sent -> first token everywhere. vLLM's TPOT is ``(E2E - TTFT)/(n - 1)`` per request; GuideLLM
calls that quantity "ITL" (``inter_token_latency_ms``; its own ``time_per_output_token_ms`` divides by n and so
includes the first token, and is not used) and so does AIPerf (``inter_token_latency``). GuideLLM's ITL
distribution weights each request by its n - 1 tokens; with the fixed output lengths of a calibration run that
is the per-request median. What a file does not say (the GPU always, often TP, the engine, sometimes the model)
must come from the caller: missing facts are one-line errors, never guesses.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from infercast.errors import InfercastError
from infercast.files import parse_json, read_text
from infercast.records.record import Record, check_record
from infercast.specs.catalog import get_hardware, get_model, model_id_for_repo

FORMATS = ("auto", "vllm", "guidellm", "aiperf")
TOOL_NAMES = {"vllm": "vllm bench serve", "guidellm": "GuideLLM", "aiperf": "AIPerf"}
ENGINES_BY_BACKEND = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm", "trtllm": "trtllm"}
"""``vllm bench serve --backend`` values that name the serving engine (``openai`` and the like do not)."""


@dataclass(frozen=True)
class BenchRun:
    """One load point of a benchmark result file, in SI units and infercast's metric definitions."""

    tool: str
    where: str
    model: str
    num_requests: int
    input_len: float
    output_len: float
    ttft_mean_s: float
    tpot_median_s: float
    output_throughput_tok_s: float
    concurrency: int = 0
    request_rate: float = 0.0
    arrival: str = ""
    burstiness: float = 1.0
    engine: str = ""
    load_known: bool = True
    """False when the file does not record its load (AIPerf CSV): the caller must give it."""
    metadata: dict[str, str] = field(default_factory=dict)


def _bad(where: str, text: str) -> InfercastError:
    return InfercastError(f"{where}: {text}", field="bench")


def _number(obj: Any, key: str, where: str, *, positive: bool = True) -> float:
    """``obj[key]`` as a finite number (> 0 unless ``positive`` is False), or a one-line error naming the key."""
    value = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(where, f"field {key!r} is missing or not a number (got {value!r})")
    if positive and value <= 0:
        raise _bad(where, f"field {key!r} must be > 0, got {value!r}")
    return float(value)


def _count(obj: Any, key: str, where: str) -> int:
    """``obj[key]`` as a whole number >= 1 (a request count), or a one-line error naming the key."""
    return _whole(_number(obj, key, where), key, where)


MAX_BENCH_COUNT = 10_000_000
"""Most requests or clients a result file may record: a benchmark is replayed by the simulator request by request,
so a count past any real run (the largest published runs send tens of thousands) would run for hours."""


def _whole(value: float, key: str, where: str) -> int:
    """A request or client count: a whole number in [1, :data:`MAX_BENCH_COUNT`], or a one-line error."""
    if not (1 <= value <= MAX_BENCH_COUNT and value == int(value)):
        raise _bad(where, f"field {key!r} must be a whole number in [1, {MAX_BENCH_COUNT:,}], got {value!r}")
    return int(value)


def _digits(value: Any) -> bool:
    """ASCII digits only: ``'²'.isdigit()`` is True but ``int('²')`` raises."""
    return str(value).isascii() and str(value).isdigit()


def _dig(obj: Any, path: str, where: str) -> Any:
    """``obj['a']['b']...`` for ``path`` 'a.b...', or a one-line error naming the missing part."""
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            raise _bad(where, f"field {path!r} is missing")
        obj = obj[part]
    return obj


# ----- readers ----------------------------------------------------------------------------------------------
def read_bench_file(path: str | Path, fmt: str = "auto") -> list[BenchRun]:
    """Every load point of one result file (``fmt``: auto-detected from the content unless given)."""
    path = Path(path)
    if fmt not in FORMATS:
        raise InfercastError(f"unknown benchmark format {fmt!r}; allowed: {', '.join(FORMATS)}", field="bench-format")
    text = read_text(path, "bench")  # missing, folder, symlink loop, oversized, non-UTF-8: one line each
    where = str(path)
    if path.suffix.lower() == ".csv" or (fmt == "aiperf" and not text.lstrip().startswith("{")):
        if fmt not in ("auto", "aiperf"):
            raise _bad(where, f"a CSV file can only be an AIPerf export, not {fmt}")
        return [_aiperf_csv(text, where)]
    docs = _json_documents(text, where)
    runs: list[BenchRun] = []
    for i, doc in enumerate(docs):
        here = f"{where}#{i + 1}" if len(docs) > 1 else where
        kind = fmt if fmt != "auto" else _detect(doc, here)
        reader = {"vllm": _vllm, "guidellm": _guidellm, "aiperf": _aiperf_json}[kind]
        runs.extend(reader(doc, here))
    if not runs:
        raise _bad(where, "holds no benchmark results")
    return runs


def _json_documents(text: str, where: str) -> list[dict]:
    """One JSON object, or one per line (``vllm bench serve --append-result``)."""
    try:  # the user-file JSON rules: no NaN/Infinity, nesting <= 64
        docs = [parse_json(text, where, "bench")]
    except InfercastError as first:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2:
            raise
        try:
            docs = [parse_json(line, f"{where} line {k}", "bench") for k, line in enumerate(lines, 1)]
        except InfercastError:
            raise first from None
    if not docs or not all(isinstance(d, dict) for d in docs):
        raise _bad(where, "must hold a JSON object (or one per line)")
    return docs


def detect_tool(doc: dict) -> str | None:
    """The tool whose result a JSON document is (vllm, guidellm, aiperf), else None."""
    if isinstance(doc.get("benchmarks"), list):
        return "guidellm"
    if "mean_ttft_ms" in doc or ("num_prompts" in doc and "backend" in doc):
        return "vllm"
    if isinstance(doc.get("time_to_first_token"), dict) or "input_config" in doc:
        return "aiperf"
    return None


def _detect(doc: dict, where: str) -> str:
    tool = detect_tool(doc)
    if tool is not None:
        return tool
    raise _bad(
        where,
        "is not a result file infercast reads: expected vllm bench serve --save-result JSON (mean_ttft_ms), "
        "a GuideLLM report (benchmarks) or an AIPerf profile_export_aiperf.json (time_to_first_token)",
    )


def _vllm(doc: dict, where: str) -> list[BenchRun]:
    completed = _count(doc, "completed", where)
    rate_raw = doc.get("request_rate", "inf")
    rate = math.inf if rate_raw in ("inf", None) else _number(doc, "request_rate", where)
    concurrency = doc.get("max_concurrency")
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= MAX_BENCH_COUNT
    ):
        raise _bad(where, f"field 'max_concurrency' must be a whole number >= 1 or null, got {concurrency!r}")
    if concurrency and math.isfinite(rate):
        raise _bad(where, "a run with both --request-rate and --max-concurrency cannot be simulated (one of the two)")
    burstiness = _number(doc, "burstiness", where) if "burstiness" in doc else 1.0
    if doc.get("ramp_up_strategy"):
        raise _bad(where, "ramp-up runs (--ramp-up-strategy) change the rate during the run and cannot be simulated")
    metadata = {str(k): str(v) for k, v in doc.items() if isinstance(v, str) and k in _METADATA_KEYS}
    backend = str(doc.get("backend") or doc.get("endpoint_type") or "")
    return [
        BenchRun(
            tool="vllm",
            where=where,
            model=str(doc.get("model_id") or ""),
            num_requests=completed,
            input_len=_number(doc, "total_input_tokens", where) / completed,
            output_len=_number(doc, "total_output_tokens", where) / completed,
            ttft_mean_s=_number(doc, "mean_ttft_ms", where) / 1e3,
            tpot_median_s=_number(doc, "median_tpot_ms", where, positive=False) / 1e3,  # 0 with 1-token outputs
            output_throughput_tok_s=_number(doc, "output_throughput", where),
            concurrency=int(concurrency or 0),
            request_rate=0.0 if math.isinf(rate) else rate,
            arrival="" if math.isinf(rate) else ("poisson" if burstiness == 1.0 else "gamma"),
            burstiness=burstiness,
            engine=ENGINES_BY_BACKEND.get(backend, ""),
            metadata=metadata,
        )
    ]


_METADATA_KEYS = ("gpu", "tp", "ep", "engine", "precision", "model")
"""``vllm bench serve --metadata KEY=VALUE`` entries read as facts about the run."""


def _guidellm(doc: dict, where: str) -> list[BenchRun]:
    runs = []
    model = str(_get_any(doc, ("args.model", "args.backend_kwargs.model")) or "")
    benchmarks = doc.get("benchmarks")
    if not isinstance(benchmarks, list):
        raise _bad(where, f"field 'benchmarks' must be a list of results, got {type(benchmarks).__name__}")
    for i, bench in enumerate(benchmarks):
        here = f"{where} benchmark {i + 1}"
        if not isinstance(bench, dict):
            raise _bad(here, "is not a JSON object")
        metrics = _dig(bench, "metrics", here)

        def stat(name: str, key: str, metrics: dict = metrics, here: str = here) -> float:
            summary = _dig(metrics, f"{name}.successful", here)
            if not isinstance(summary, dict):
                raise _bad(here, f"field '{name}.successful' must be an object, got {type(summary).__name__}")
            if key == "median" and "median" not in summary:
                return _number(_dig(summary, "percentiles", here), "p50", f"{here}: {name}.successful.percentiles")
            return _number(summary, key, f"{here}: {name}.successful")

        count = _whole(stat("prompt_token_count", "count"), "prompt_token_count.successful.count", here)
        strategy = _get_any(bench, ("config.strategy", "args.strategy"))
        load = _guidellm_load(strategy, here)
        output_len = stat("output_token_count", "mean")
        duration = bench.get("duration")
        if (
            isinstance(duration, int | float)
            and duration > 0
            and "total_sum" in metrics["output_token_count"]["successful"]
        ):
            throughput = stat("output_token_count", "total_sum") / float(duration)
        else:
            throughput = stat("output_tokens_per_second", "mean")
        run_model = str(_get_any(bench, ("config.backend.model", "config.requests.model")) or model)
        runs.append(
            BenchRun(
                tool="guidellm",
                where=here,
                model=run_model,
                num_requests=count,
                input_len=stat("prompt_token_count", "mean"),
                output_len=output_len,
                ttft_mean_s=stat("time_to_first_token_ms", "mean") / 1e3,
                # GuideLLM's ITL is vLLM's TPOT (first token excluded); its TPOT includes the first token
                tpot_median_s=stat("inter_token_latency_ms", "median") / 1e3,
                output_throughput_tok_s=throughput,
                **load,
            )
        )
    return runs


def _guidellm_load(strategy: Any, where: str) -> dict[str, Any]:
    if not isinstance(strategy, dict) or "type_" not in strategy:
        raise _bad(where, "has no strategy (config.strategy.type_) saying how requests were sent")
    kind = strategy["type_"]
    if kind == "synchronous":
        return {"concurrency": 1}
    if kind == "concurrent":
        return {"concurrency": _whole(_number(strategy, "streams", f"{where}: strategy"), "streams", where)}
    if kind == "throughput":
        cap = strategy.get("max_concurrency")
        return {"concurrency": _whole(cap, "max_concurrency", where)} if isinstance(cap, int) and cap > 0 else {}
    if kind in ("constant", "poisson"):
        return {"request_rate": _number(strategy, "rate", f"{where}: strategy"), "arrival": kind}
    raise _bad(
        where,
        f"strategy {kind!r} is not one infercast can simulate (synchronous, concurrent, throughput, constant, poisson)",
    )


def _get_any(obj: Any, paths: tuple[str, ...]) -> Any:
    for path in paths:
        cur = obj
        for part in path.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur:
            return cur
    return None


def _aiperf_json(doc: dict, where: str) -> list[BenchRun]:
    def stat(name: str, key: str) -> float:
        return _number(_dig(doc, name, where), key, f"{where}: {name}")

    loadgen = _get_any(doc, ("input_config.loadgen",)) or {}
    if not isinstance(loadgen, dict):
        raise _bad(where, f"field 'input_config.loadgen' must be an object, got {type(loadgen).__name__}")
    load: dict[str, Any] = {}
    if type(loadgen.get("concurrency")) is int and loadgen.get("request_rate") in (None, 0):
        load = {"concurrency": _whole(loadgen["concurrency"], "input_config.loadgen.concurrency", where)}
    elif isinstance(loadgen.get("request_rate"), int | float) and loadgen["request_rate"] > 0:
        if loadgen.get("concurrency"):
            raise _bad(where, "a run with both a request rate and a concurrency cap cannot be simulated")
        mode = str(loadgen.get("request_rate_mode") or "poisson").lower()
        load = {
            "request_rate": float(loadgen["request_rate"]),
            "arrival": "constant" if "constant" in mode else "poisson",
        }
    names = _get_any(doc, ("input_config.endpoint.model_names",)) or []
    return [
        BenchRun(
            tool="aiperf",
            where=where,
            model=str(names[0]) if isinstance(names, list) and names else "",
            num_requests=_whole(stat("request_count", "avg"), "request_count.avg", where),
            input_len=stat("input_sequence_length", "avg"),
            output_len=stat("output_sequence_length", "avg"),
            ttft_mean_s=stat("time_to_first_token", "avg") / 1e3,
            # AIPerf's inter_token_latency is (latency - TTFT)/(OSL - 1) per request: vLLM's TPOT
            tpot_median_s=stat("inter_token_latency", "p50") / 1e3,
            output_throughput_tok_s=stat("output_token_throughput", "avg"),
            load_known=bool(load),
            **load,
        )
    ]


_AIPERF_CSV_ROWS = {
    "Time to First Token (ms)": ("ttft", "avg"),
    "Inter Token Latency (ms)": ("itl", "p50"),
    "Input Sequence Length (tokens)": ("isl", "avg"),
    "Output Sequence Length (tokens)": ("osl", "avg"),
    "Output Token Throughput (tokens/sec)": ("tput", "Value"),
    "Request Count": ("count", "Value"),
}
"""Rows of ``profile_export_aiperf.csv`` read, and the column each value comes from."""


def _aiperf_csv(text: str, where: str) -> BenchRun:
    found: dict[str, float] = {}
    header: list[str] = []
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:  # e.g. a field over the csv module's 131,072-character limit
        raise _bad(where, f"is not a readable CSV ({exc})") from None
    for row in rows:
        if not row or not any(cell.strip() for cell in row):
            header = []
            continue
        if row[0] in ("Metric", "Endpoint"):
            header = row
            continue
        name = row[0].strip()
        if name in _AIPERF_CSV_ROWS and header:
            key, column = _AIPERF_CSV_ROWS[name]
            if column not in header:
                raise _bad(where, f"row {name!r} has no {column!r} column")
            cell = row[header.index(column)].strip() if header.index(column) < len(row) else ""
            try:
                value = float(cell) if cell.isascii() else math.nan  # float() reads '٣' as 3
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise _bad(where, f"row {name!r}: {column} is {cell[:40]!r}, not a finite number")
            found[key] = value
    missing = [name for name, (key, _) in _AIPERF_CSV_ROWS.items() if key not in found]
    if missing:
        raise _bad(where, f"is not an AIPerf profile_export_aiperf.csv: rows {', '.join(map(repr, missing))} missing")
    if min(found.values()) <= 0:
        raise _bad(where, "AIPerf statistics must be > 0")
    return BenchRun(
        tool="aiperf",
        where=where,
        model="",
        num_requests=_whole(found["count"], "Request Count", where),
        input_len=found["isl"],
        output_len=found["osl"],
        ttft_mean_s=found["ttft"] / 1e3,
        tpot_median_s=found["itl"] / 1e3,
        output_throughput_tok_s=found["tput"],
        load_known=False,
    )


# ----- runs -> records ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunFacts:
    """What the caller says about the runs (the files cannot say it): ``None``/empty = not given."""

    model: str = ""
    gpu: str = ""
    tp: int | None = None
    ep: int | None = None
    precision: str = ""
    engine: str = ""
    concurrency: int | None = None
    request_rate: float | None = None


def catalog_model_for(name: str) -> str | None:
    """The catalog id of a model a benchmark names (an HF repo id or a local path); None when unknown
    (:func:`infercast.specs.catalog.model_id_for_repo`: -Instruct, -FP8, dated and other checkpoint suffixes
    ignored, instruct, base and quantised checkpoints sharing the architecture)."""
    return model_id_for_repo(name) if name else None


def _fact(given: Any, from_file: Any, what: str, why: str) -> Any:
    if given not in (None, ""):
        return given
    if from_file not in (None, ""):
        return from_file
    raise InfercastError(f"is required: {why}", field=what)


def records_from_runs(runs: list[BenchRun], facts: RunFacts) -> list[Record]:
    """Three serving records per run (mean TTFT, median TPOT, output throughput), checked like CSV rows."""
    out: list[Record] = []
    for run in runs:
        meta = run.metadata
        named = run.model or meta.get("model", "")
        model = facts.model or catalog_model_for(named) or ""
        if not model:
            detail = (
                f"the file names model {named!r}, which is not in the catalog" if named else "the file names no model"
            )
            raise InfercastError(f"is required: {detail} ({run.where}); give --model ID|config.json", field="model")
        get_model(model)  # unknown ids and bad config paths fail here with the allowed values
        tool = TOOL_NAMES[run.tool]
        gpu = _fact(
            facts.gpu, meta.get("gpu"), "gpu", f"a {tool} result does not say which GPU served it; give --gpu ID"
        )
        get_hardware(gpu)
        tp_raw = _fact(
            facts.tp, meta.get("tp"), "tp", f"a {tool} result does not record tensor parallelism; give --tp N"
        )
        if not _digits(tp_raw) or int(tp_raw) < 1:
            raise InfercastError(f"must be a whole number >= 1, got {tp_raw!r} ({run.where})", field="tp")
        tp = int(tp_raw)
        ep_raw = facts.ep if facts.ep is not None else meta.get("ep", 1)
        if not _digits(ep_raw) or int(ep_raw) < 1:
            raise InfercastError(f"must be a whole number >= 1, got {ep_raw!r} ({run.where})", field="ep")
        no_engine = f"{run.where} does not say which engine served it; give --engine vllm|sglang|trtllm"
        # the file's own engine entry first: a client's backend names the request format it spoke (vLLM's
        # --backend, default 'openai'), which another engine may serve
        engine = _fact(facts.engine, meta.get("engine") or run.engine, "engine", no_engine)
        load = {"concurrency": run.concurrency, "request_rate": run.request_rate, "arrival": run.arrival}
        if not run.load_known:
            if not facts.concurrency and not facts.request_rate:
                raise InfercastError(
                    f"is required: {run.where} does not record the load; give --concurrency N or --request-rate R",
                    field="concurrency",
                )
            load = {"concurrency": facts.concurrency or 0, "request_rate": facts.request_rate or 0.0, "arrival": ""}
        common = dict(
            model=model,
            gpu=gpu,
            engine=engine,
            precision=facts.precision or meta.get("precision", ""),
            tp=tp,
            ep=int(ep_raw),
            num_prompts=run.num_requests,
            input_len=max(round(run.input_len), 1),
            output_len=max(round(run.output_len), 1),
            burstiness=run.burstiness,
            source=f"{run.tool} result {run.where}",
            notes=f"mean lengths {run.input_len:.1f}/{run.output_len:.1f} tokens",
            origin=run.where,
            **load,
        )
        values = (
            ("serving_ttft", run.ttft_mean_s, "s", "mean"),
            ("serving_tpot", run.tpot_median_s, "s", "median"),
            ("serving_throughput", run.output_throughput_tok_s, "tok/s", ""),
        )
        for kind, value, unit, statistic in values:
            if kind == "serving_tpot" and common["output_len"] < 2:
                continue  # one output token has no TPOT
            rec = Record(kind=kind, value=value, unit=unit, statistic=statistic, **common)
            try:
                check_record(rec)
            except InfercastError as exc:
                raise InfercastError(f"{run.where}: {exc}", field="bench") from None
            out.append(rec)
    return out


def load_bench_records(paths: list[Path], facts: RunFacts, fmt: str = "auto") -> list[Record]:
    """Records of every run in the result files ``paths`` (see :func:`read_bench_file`, :func:`records_from_runs`)."""
    return records_from_runs([run for p in paths for run in read_bench_file(p, fmt)], facts)


# ----- simulated run -> vLLM result (round trips and comparisons) --------------------------------------------
def to_vllm_result(
    result: Any,
    *,
    model_id: str,
    max_concurrency: int | None = None,
    request_rate: float = math.inf,
    burstiness: float = 1.0,
) -> dict[str, Any]:
    """A simulation result (:func:`infercast.sim.api.simulate`) written as ``vllm bench serve --save-result`` JSON.

    Same keys and units as vLLM's file (milliseconds, tokens/s); percentiles vLLM saves by default (p99) and the
    mean/median/std of TTFT, TPOT, ITL and E2E. Tells it was simulated in an ``infercast`` entry (as a
    ``--metadata`` entry would be).
    """
    duration = float(result["duration_s"])
    completed = int(result["completed"])
    out_tokens = float(result["output_throughput_tok_s"]) * duration
    in_tokens = float(result["total_throughput_tok_s"]) * duration - out_tokens
    doc: dict[str, Any] = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": "vllm",
        "backend": "vllm",
        "label": None,
        "model_id": model_id,
        "tokenizer_id": model_id,
        "num_prompts": int(result["num_requests"]),
        "infercast": "simulated",
        "request_rate": "inf" if math.isinf(request_rate) else request_rate,
        "burstiness": burstiness,
        "max_concurrency": max_concurrency,
        "duration": duration,
        "completed": completed,
        "failed": int(result["num_requests"]) - completed,
        "total_input_tokens": round(in_tokens),
        "total_output_tokens": round(out_tokens),
        "request_throughput": float(result["request_throughput_req_s"]),
        "request_goodput": None,
        "output_throughput": float(result["output_throughput_tok_s"]),
        "total_token_throughput": float(result["total_throughput_tok_s"]),
    }
    for ours, theirs in (("ttft_s", "ttft"), ("tpot_s", "tpot"), ("itl_s", "itl"), ("e2e_s", "e2el")):
        stats = result[ours]
        doc[f"mean_{theirs}_ms"] = stats["mean"] * 1e3
        doc[f"median_{theirs}_ms"] = stats["p50"] * 1e3
        doc[f"std_{theirs}_ms"] = stats["std"] * 1e3
        doc[f"p99_{theirs}_ms"] = stats["p99"] * 1e3
    return doc
