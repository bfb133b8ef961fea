"""Measurement records: one measured figure per CSV row, the common currency of measure/calibrate/validate.

A record says what was run (model, GPU, formats, parallelism, the shape of the work) and what was measured
(``value`` in ``unit``). Published figures and our own GPU runs use the same columns, so one calibration
fit and one validation report serve both.

Kinds and the fields they use:

=====================  ======================================================  ===========
kind                   work described by                                       unit
=====================  ======================================================  ===========
prefill_step           ``batch`` chunks of ``input_len`` tokens on ``context``  s
                       cached tokens each (one forward pass)
decode_step            ``batch`` decode tokens, each at ``context`` (one step)  s
ttft                   one request (``batch`` requests) of ``input_len`` tokens s
tpot                   mean decode step of a static batch (input/output/batch)  s
static_throughput      output tok/s of a static batch (input/output/batch)      tok/s
gemm                   one GEMM of ``m`` x ``k`` @ ``k`` x ``n`` in ``precision``   s
op                     one layer operator (``op``) of a 1-layer model: a GEMM   s
                       etc. for ``batch`` tokens; ``attention_prefill``:
                       ``batch`` prompts of ``input_len`` on ``context``;
                       ``attention_decode``: ``batch`` tokens at ``context``
hbm_copy               device-to-device copy of ``bytes`` (read + write)        s
launch_overhead        one tiny kernel launch (``op`` eager or cuda_graph)      s
serving_ttft           TTFT of a serving benchmark (see below)                  s
serving_tpot           TPOT ((E2E - TTFT)/(n - 1), vLLM's definition) of one    s
serving_throughput     output tokens/s of the benchmark's requests              tok/s
=====================  ======================================================  ===========

Serving kinds include queueing and scheduling, so they are predicted by the simulator. Their fields say:

* load: ``concurrency`` > 0: a closed loop of that many clients, each sending its next request when the last
  one finished (``vllm bench serve --max-concurrency``, GuideLLM's concurrent strategy, aiconfigurator's
  client); ``request_rate`` > 0: an open loop at that rate (``arrival`` poisson (default), gamma with
  ``burstiness``, or constant); neither: offline, every request sent at once;
* lengths: ``input_len`` / ``output_len`` = L, the top of the length range; prompt and output lengths uniform
  in [r L, L], r = ``min_len_ratio`` (1 or empty: fixed lengths; ``--random-range-ratio`` of older vLLM);
* size: ``num_prompts`` requests measured (empty in a closed loop: 10 x ``concurrency``, the published
  sweeps'), after ``warmup`` requests sent first and left out (0: none; the means then include the ramp-up);
* statistic: ``mean`` or ``median`` over those requests (empty: mean TTFT, median TPOT, as ``vllm bench
  serve`` reports them; throughput has none);
* the engine's step budget ``max_num_batched_tokens``, sequence limit ``max_num_seqs``, KV memory fraction
  ``gpu_memory_utilization`` and step policy ``scheduler`` when not its preset's.

Benchmark result files of ``vllm bench serve``, GuideLLM and AIPerf become such rows through
:mod:`infercast.records.bench_results`, and a CSV of closed-loop benchmark rows in aiconfigurator's silicon
format (``ttft_ms_mean``, ``tpot_ms_mean``, ...) through :mod:`infercast.records.silicon_rows`; the simulator
replays them in :mod:`infercast.calibrate.serving`.

``layers`` (optional) says the run used only the first N decoder layers of the model; predictions for
that row use the same truncated model (:func:`infercast.specs.truncate.truncated`).

:func:`~infercast.records.readers.read_records` checks every row: known columns only, the fields its kind
needs present and positive, whole numbers where counts are meant, a finite positive value in a unit the kind
allows. Each record keeps
where it came from (``origin``, ``path:row``) so that later errors (an unknown GPU, say) can name the row.
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from infercast.errors import InfercastError, nearest, require_positive_int, unknown_choice
from infercast.specs.engine import GRAPH_SCOPES, MOE_BACKENDS

GROUP_FIELDS = ("engine", "model", "gpu", "tp", "precision", "load")
"""What ``validate --by`` can group points by; ``load``: light (<= 16 concurrent requests), medium (<= 64), heavy,
the error bands' levels."""

KINDS = (
    "prefill_step",
    "decode_step",
    "ttft",
    "tpot",
    "static_throughput",
    "gemm",
    "op",
    "hbm_copy",
    "launch_overhead",
    "serving_ttft",
    "serving_tpot",
    "serving_throughput",
)
UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "tok/s": 1.0}
TIME_UNITS = ("s", "ms", "us")


@dataclass(frozen=True)
class KindRule:
    """What a row of one kind must hold: fields that must be >= 1 (with their minimum), text fields that
    must be given, and the units its value may be in."""

    positive: dict[str, int]
    text: tuple[str, ...] = ("gpu", "model")
    units: tuple[str, ...] = TIME_UNITS


_REQUEST = {"batch": 1, "input_len": 1}
RULES: dict[str, KindRule] = {
    "prefill_step": KindRule(_REQUEST),
    "decode_step": KindRule({"batch": 1, "context": 1}),
    "ttft": KindRule(_REQUEST),
    "tpot": KindRule(_REQUEST | {"output_len": 2}),  # a TPOT needs a second token
    "static_throughput": KindRule(_REQUEST | {"output_len": 1}, units=("tok/s",)),
    "gemm": KindRule({"m": 1, "n": 1, "k": 1}, text=("gpu",)),
    "op": KindRule({"batch": 1}, text=("gpu", "model", "op")),
    "hbm_copy": KindRule({}, text=("gpu",)),  # bytes: checked below (a float)
    "launch_overhead": KindRule({}, text=("gpu",)),
    "serving_ttft": KindRule({"input_len": 1, "output_len": 1}),
    "serving_tpot": KindRule({"input_len": 1, "output_len": 2}),
    "serving_throughput": KindRule({"input_len": 1, "output_len": 1}, units=("tok/s",)),
}
"""Per kind: the fields a row needs (see the module docstring for what each kind describes)."""
OP_RULES: dict[str, dict[str, int]] = {"attention_prefill": {"input_len": 1}, "attention_decode": {"context": 1}}
"""Extra positive fields of the harness's attention operators (the work is not a token count)."""
SERVING_KINDS = ("serving_ttft", "serving_tpot", "serving_throughput")
STATISTICS = ("", "mean", "median")
"""Statistics of a serving row's TTFT or TPOT over its requests ('' = the kind's: mean TTFT, median TPOT)."""
DEFAULT_STATISTIC = {"serving_ttft": "mean", "serving_tpot": "median"}
RETIRED_KINDS = {"closed_loop_ttft": "serving_ttft", "closed_loop_tpot": "serving_tpot"}
"""Kinds merged into the serving family: such a row is now that kind with ``concurrency`` = its former ``batch``,
``num_prompts`` = 10 x that, ``statistic`` mean and ``min_len_ratio`` 0.8 where it was empty."""
ARRIVALS = ("", "poisson", "gamma", "constant")
"""Open-loop arrival processes of serving rows ('' = poisson when ``request_rate`` is given)."""
LAUNCH_OPS = ("", "eager", "cuda_graph", "cpu_op")
"""``launch_overhead`` variants: eager launches (``cpu_op`` on the CPU harness) or kernels in a CUDA graph."""
CLOSED_LOOP_PROMPTS_PER_CLIENT = 10
"""Requests per client of published closed-loop sweeps (``--num-prompts 10*C``; sim.workload.spec's
PROMPTS_PER_CLIENT, repeated here as records sit below the simulator)."""
_MINIMUM = {"tp": 1, "ep": 1, "attention_dp": 1, "batch": 1}
"""Integer fields that can never be 0 (the others may be 0 = not applicable, e.g. ``layers`` = whole model)."""


@dataclass
class Record:
    """One measured figure (see module docstring for kinds)."""

    kind: str
    model: str = ""
    gpu: str = ""
    engine: str = "torch"
    precision: str = "bf16"
    kv_precision: str = ""
    tp: int = 1
    ep: int = 1
    attention_dp: int = 1
    """Attention data-parallel ways (wide EP: ``tp x attention_dp`` GPUs hold ``ep``-way experts)."""
    batch: int = 1
    input_len: int = 0
    output_len: int = 0
    context: int = 0
    layers: int = 0
    concurrency: int = 0
    request_rate: float = 0.0
    arrival: str = ""
    burstiness: float = 1.0
    num_prompts: int = 0
    """Serving kinds: requests measured (0 / empty in a closed loop: 10 x ``concurrency``)."""
    warmup: int = 0
    """Serving kinds: requests sent before the measured ones and left out of the statistics."""
    statistic: str = ""
    """Serving TTFT / TPOT: ``mean`` or ``median`` over the measured requests ('' = mean TTFT, median TPOT)."""
    m: int = 0
    n: int = 0
    k: int = 0
    bytes: float = 0.0
    min_len_ratio: float = 0.0
    """Serving kinds: prompt and output lengths were uniform in [min_len_ratio x L, L] (0 / empty or 1: fixed
    lengths L)."""
    max_num_batched_tokens: int = 0
    """Serving kinds: the engine's token budget per step in the run (0 / empty: the engine
    preset's default)."""
    max_num_seqs: int = 0
    """Serving kinds: the most sequences the engine ran at once (its max_num_seqs /
    max_batch_size; 0 / empty: the engine preset's default)."""
    gpu_memory_utilization: float = 0.0
    """Serving kinds: the fraction of GPU memory the engine's KV cache was given in the run, as
    the preset's ``kv_fraction`` reads it (vLLM ``--gpu-memory-utilization``, TensorRT-LLM
    ``free_gpu_memory_fraction``; 0 / empty: the preset's default)."""
    scheduler: str = ""
    """Serving kinds: how the engine filled its steps in the run when not as its preset does (``chunked``:
    prompt chunks beside the decodes, e.g. SGLang ``--enable-mixed-chunk``; ``prefill-first``; ``inflight``;
    empty: the preset's)."""
    scheduler_recv_interval: int = 0
    """Serving kinds: decode steps between the engine's polls for new requests in the run (SGLang
    ``--scheduler-recv-interval``; 0 / empty: the preset's)."""
    batch_wait_iters: int = 0
    """Serving kinds: TensorRT-LLM ``batch_wait_timeout_iters`` of the run (0 / empty: the preset's)."""
    batch_wait_ratio: float = 0.0
    """Serving kinds: TensorRT-LLM ``batch_wait_max_tokens_ratio`` of the run (0 / empty: the preset's)."""
    adp_balance_iters: int = 0
    """Serving kinds: TensorRT-LLM ``attention_dp_config.timeout_iters`` with ``enable_balance`` (0: the preset's)."""
    spec_tokens: int = 0
    """Serving kinds: draft tokens per step of the run's speculative decoding (TensorRT-LLM MTP
    ``num_nextn_predict_layers``; 0 / empty: none)."""
    spec_acceptance: float = 0.0
    """Serving kinds with ``spec_tokens``: the chance each draft token is accepted (given the ones before it)."""
    moe_backend: str = ""
    """Serving kinds: the fused-MoE kernel the run's launch picked where the engine offers several (``marlin``:
    vLLM ``VLLM_MXFP4_USE_MARLIN=1``, MXFP4 experts through Marlin; ``triton``: vLLM's Triton kernel for block-FP8
    experts, FlashInfer's and DeepGEMM's turned off; empty: the release default)."""
    cuda_graphs: str = ""
    """Serving kinds: which steps the run's launch replayed as CUDA graphs (``decode``: steps without prompt tokens
    of at most ``graph_max_tokens`` sequences, e.g. TensorRT-LLM ``cuda_graph_config``; ``tokens``: any step of at
    most ``graph_max_tokens`` tokens, e.g. TensorRT-LLM's piecewise graphs; empty: the preset's)."""
    graph_max_tokens: int = 0
    """Serving kinds: the largest step the run's launch replayed as a CUDA graph, in the unit ``cuda_graphs`` says
    (0 / empty: the preset's)."""
    op: str = ""
    value: float = math.nan
    unit: str = "s"
    source: str = ""
    gpu_name: str = ""
    driver: str = ""
    torch_version: str = ""
    clocks: str = ""
    timestamp: str = ""
    notes: str = ""
    origin: str = field(default="", compare=False, repr=False, metadata={"csv": False})
    """Where the row was read from (``path:row``); not a CSV column."""

    @property
    def value_si(self) -> float:
        """The value in seconds (times) or tokens/s (throughputs)."""
        return self.value * UNITS[self.unit]

    @property
    def stat(self) -> str:
        """The statistic a serving TTFT or TPOT row reports (its ``statistic``, else the kind's default)."""
        return self.statistic or DEFAULT_STATISTIC.get(self.kind, "")

    @property
    def closed_loop(self) -> bool:
        """A serving row measured under a closed loop of clients."""
        return self.kind in SERVING_KINDS and self.concurrency > 0

    @property
    def in_flight(self) -> int:
        """Requests the row ran at once at most: a serving row's clients, else its requests (offline or open
        loop); another kind's ``concurrency`` or ``batch``."""
        if self.kind in SERVING_KINDS:
            return self.concurrency or self.num_prompts
        return self.concurrency or self.batch

    @property
    def prompts(self) -> int:
        """Serving kinds: the requests measured (a closed loop's default: 10 x its clients)."""
        return self.num_prompts or CLOSED_LOOP_PROMPTS_PER_CLIENT * self.concurrency

    @property
    def where(self) -> str:
        """``path:row`` when read from a file, else a short description of the record."""
        if self.origin:
            return self.origin
        what = self.op or self.model or self.gpu
        return f"{self.kind} record ({what})" if what else f"{self.kind} record"

    def to_row(self) -> dict[str, object]:
        """The record as one CSV row (every column of :data:`FIELDS`)."""
        return {k: v for k, v in asdict(self).items() if k in _CSV}


RUN_SCHEDULERS = ("chunked", "prefill-first", "inflight")
"""Step policies a serving record may name (the simulator's schedulers that engines run)."""
FIELDS = [f.name for f in fields(Record) if f.metadata.get("csv", True)]
_CSV = frozenset(FIELDS)
_INT_FIELDS = {f.name for f in fields(Record) if f.type == "int"}
_FLOAT_FIELDS = {f.name for f in fields(Record) if f.type == "float"}


def parse_cell(name: str, raw: str) -> object:
    """One cell as its field's type; integers must be whole, floats finite (``value`` is checked later)."""
    if name in _INT_FIELDS:
        try:
            number = float(raw)
        except ValueError:
            raise InfercastError(f"must be an integer, got {raw!r}", field=name) from None
        return require_positive_int(name, number, minimum=_MINIMUM.get(name, 0))
    if name in _FLOAT_FIELDS:
        try:
            number = float(raw)
        except ValueError:
            raise InfercastError(f"is not a number: {raw!r}", field=name) from None
        if name != "value" and not (math.isfinite(number) and number >= 0):
            raise InfercastError(f"must be a finite number >= 0, got {raw!r}", field=name)
        return number
    return raw.strip()


def check_record(rec: Record) -> None:
    """Raise InfercastError (naming the field) when ``rec`` does not describe a measurement of its kind."""
    if rec.kind in RETIRED_KINDS:
        raise InfercastError(
            f"kind {rec.kind!r} is now {RETIRED_KINDS[rec.kind]!r} with concurrency = the clients, num_prompts, "
            "statistic mean and min_len_ratio (0.8 where empty)",
            field="kind",
        )
    if rec.kind not in KINDS:
        close = nearest(rec.kind, KINDS)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise InfercastError(f"unknown kind {rec.kind!r}; {hint}allowed: {', '.join(KINDS)}", field="kind")
    rule = RULES[rec.kind]
    if rec.unit not in rule.units:
        raise InfercastError(
            f"unit {rec.unit!r} is not allowed for {rec.kind}; allowed: {', '.join(rule.units)}", field="unit"
        )
    if not (math.isfinite(rec.value) and rec.value > 0):
        raise InfercastError(f"must be a finite number > 0, got {rec.value}", field="value")
    for name in rule.text:
        if not getattr(rec, name):
            raise InfercastError(f"is required for {rec.kind} rows", field=name)
    positive = rule.positive | (OP_RULES.get(rec.op, {}) if rec.kind == "op" else {})
    for name, minimum in positive.items():
        require_positive_int(name, getattr(rec, name), minimum=minimum)
    for name, minimum in _MINIMUM.items():
        require_positive_int(name, getattr(rec, name), minimum=minimum)
    if not 0 <= rec.min_len_ratio <= 1:
        raise InfercastError(f"must be between 0 and 1, got {rec.min_len_ratio}", field="min_len_ratio")
    if not 0 <= rec.gpu_memory_utilization <= 1:
        raise InfercastError(
            f"must be between 0 and 1 (0: the engine preset's), got {rec.gpu_memory_utilization}",
            field="gpu_memory_utilization",
        )
    if not 0 <= rec.batch_wait_ratio <= 1:
        raise InfercastError(f"must be between 0 and 1, got {rec.batch_wait_ratio}", field="batch_wait_ratio")
    if not 0 <= rec.spec_acceptance <= 1:
        raise InfercastError(f"must be between 0 and 1, got {rec.spec_acceptance}", field="spec_acceptance")
    if rec.spec_acceptance and not rec.spec_tokens:
        raise InfercastError("needs spec_tokens (the draft tokens per step) > 0", field="spec_acceptance")
    if rec.scheduler and rec.scheduler not in RUN_SCHEDULERS:
        raise unknown_choice("scheduler", rec.scheduler, list(RUN_SCHEDULERS))
    if rec.moe_backend and rec.moe_backend not in MOE_BACKENDS:
        raise unknown_choice("moe_backend", rec.moe_backend, list(MOE_BACKENDS))
    if rec.cuda_graphs and rec.cuda_graphs not in GRAPH_SCOPES:
        raise unknown_choice("cuda_graphs", rec.cuda_graphs, list(GRAPH_SCOPES))
    if rec.kind == "hbm_copy" and not (math.isfinite(rec.bytes) and rec.bytes > 0):
        raise InfercastError(f"must be a finite number > 0 for hbm_copy, got {rec.bytes}", field="bytes")
    if rec.kind in SERVING_KINDS:
        _check_serving(rec)
    if rec.kind == "launch_overhead" and rec.op not in LAUNCH_OPS:
        raise InfercastError(f"unknown launch variant {rec.op!r}; allowed: {', '.join(LAUNCH_OPS[1:])}", field="op")


def _check_serving(rec: Record) -> None:
    """The load, size and statistic of a serving row."""
    if rec.statistic not in STATISTICS or (rec.statistic and rec.kind == "serving_throughput"):
        allowed = "none for serving_throughput" if rec.kind == "serving_throughput" else "mean, median"
        raise InfercastError(f"unknown statistic {rec.statistic!r}; allowed: {allowed}", field="statistic")
    if not rec.concurrency and not rec.num_prompts:
        raise InfercastError(
            "is required unless concurrency is given (closed loop: 10 x concurrency)", field="num_prompts"
        )
    if rec.arrival not in ARRIVALS:
        raise InfercastError(f"unknown arrival {rec.arrival!r}; allowed: {', '.join(ARRIVALS[1:])}", field="arrival")
    if rec.concurrency and rec.request_rate:
        raise InfercastError(
            "give concurrency (closed loop) or request_rate (open loop), not both", field="request_rate"
        )
    if rec.arrival == "gamma" and not rec.burstiness > 0:
        raise InfercastError(f"must be > 0 for gamma arrivals, got {rec.burstiness}", field="burstiness")


def write_records(path: str | Path, records: list[Record], header_comment: str = "") -> None:
    """Write records as CSV; ``header_comment`` lines (e.g. the command that produced them) start with '#'."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as handle:
            for line in header_comment.splitlines():
                handle.write(f"# {line}\n")
            writer = csv.DictWriter(handle, fieldnames=FIELDS)
            writer.writeheader()
            for rec in records:
                writer.writerow(rec.to_row())
    except OSError as exc:
        raise InfercastError(f"cannot write {path}: {exc.strerror or exc}", field="out") from None
