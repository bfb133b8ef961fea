"""``predict``: TTFT, TPOT, ITL, end-to-end latency, static-batch throughput and memory for one scenario."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from infercast.analysis.error_bands import Confidence, deployment_confidence
from infercast.analysis.phases import (
    first_token_share_one,
    prefill_budget,
    prefill_sums,
    static_batch_phases,
)
from infercast.analysis.report import PhaseReport, advice, phase_report
from infercast.cost.front_end import static_batch_delays, with_front_end
from infercast.cost.profile import CostProfile
from infercast.cost.step import StepCostModel, cost_model
from infercast.errors import InfercastError, require_positive_int
from infercast.memory import MemoryBudget, memory_budget, require_fit
from infercast.specs.deployment import Deployment
from infercast.specs.engine import EngineSpec
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec


@dataclass(frozen=True)
class Prediction:
    """Result of :func:`predict`. Times in seconds; ``prefill``/``decode`` explain each phase."""

    model: str
    gpu: str
    tp: int
    ep: int
    precision: str
    kv_precision: str
    engine: str
    input_len: int
    output_len: int
    batch: int
    ttft_s: float
    """TTFT, mean over the batch's requests (as ``simulate --offline`` and vLLM's benchmark report it): request
    overhead (API server, tokenisation) + the share of the batch's prefill done when each request's prompt
    completes (:func:`~infercast.analysis.phases.first_token_share`) + the front-end's delay of the first
    token. The last request's is ``ttft_last_s``."""
    tpot_s: float
    """TPOT, mean over the batch's requests as vLLM's benchmark defines it, (E2E - TTFT) / (O - 1): a request
    prefilled early waits for the rest of the batch's prefill before its second token, so this exceeds the
    decode step (``itl_s``) when B > 1. The last request's is ``tpot_last_s``."""
    itl_s: float
    """The engine's mean decode step: a static batch emits one token per request per step (the simulator's ITL
    samples are its step gaps too); equals ``tpot_last_s`` unless the front-end paces the stream."""
    single_stream_tpot_s: float
    """Mean decode step of ONE request alone (batch 1): the floor TPOT approaches at low load."""
    e2e_s: float
    output_throughput_tok_s: float
    total_throughput_tok_s: float
    prefill: PhaseReport
    decode: PhaseReport
    memory: MemoryBudget
    advice: list[str] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)
    pp: int = 1
    attention_dp: int = 1
    gpus: int = 0
    """GPUs of the replica (tp x attention_dp x pp)."""
    confidence: Confidence | None = None
    """Expected error of TTFT and TPOT in this regime (cross-validated) and out-of-calibration warnings."""
    front_end_s: float = 0.0
    """How late the API server's front-end delivers the first tokens, on average (``stream_token_s`` x about
    half the batch; 0 for an engine without one)."""
    ttft_last_s: float = 0.0
    """TTFT of the batch's last request: the whole batch's prefill (+ overhead and front-end delay)."""
    tpot_last_s: float = 0.0
    """TPOT of the last request, (E2E - ``ttft_last_s``) / (O - 1): the mean decode step of the batch, or,
    where the API server's front-end cannot stream a step's tokens within the step, the front-end's pace."""

    @property
    def front_end_paced(self) -> bool:
        """The API server's front-end, not the engine's steps, sets TPOT (:func:`front_end_paces`)."""
        return front_end_paces(self.tpot_last_s, self.itl_s)

    def to_dict(self, ops: bool = False) -> dict[str, object]:
        """Plain dict (JSON-ready); ``ops=True`` adds per-operator tables to each phase."""
        mem = self.memory
        return {
            "model": self.model,
            "gpu": self.gpu,
            "tp": self.tp,
            "ep": self.ep,
            "pp": self.pp,
            "attention_dp": self.attention_dp,
            "gpus": self.gpus or self.tp,
            "precision": self.precision,
            "kv_precision": self.kv_precision,
            "engine": self.engine,
            "input_len": self.input_len,
            "output_len": self.output_len,
            "batch": self.batch,
            "ttft_s": self.ttft_s,
            "ttft_definition": TTFT_DEFINITION,
            "ttft_last_s": self.ttft_last_s,
            "request_overhead_s": self.ttft_last_s - self.prefill.time_s - self.front_end_s,
            "front_end_s": self.front_end_s,
            # one output token has no gap between tokens: undefined (null), as the simulator reports it
            "tpot_s": self.tpot_s if self.output_len > 1 else None,
            "tpot_last_s": self.tpot_last_s if self.output_len > 1 else None,
            "itl_s": self.itl_s if self.output_len > 1 else None,
            "single_stream_tpot_s": self.single_stream_tpot_s if self.output_len > 1 else None,
            "e2e_s": self.e2e_s,
            "output_throughput_tok_s": self.output_throughput_tok_s,
            "total_throughput_tok_s": self.total_throughput_tok_s,
            "prefill": self.prefill.to_dict(ops),
            "decode": self.decode.to_dict(ops),
            "memory": {
                "weights_bytes": mem.weights_bytes,
                "kv_cache_bytes": mem.kv_cache_bytes,
                "activation_bytes": mem.activation_bytes,
                "runtime_overhead_bytes": mem.runtime_overhead_bytes,
                "total_bytes": mem.total_bytes,
                "capacity_bytes": mem.capacity_bytes,
                "kv_pool_bytes": mem.kv_pool_bytes,
                "max_concurrency": mem.max_concurrency(self.input_len + self.output_len) if mem.weights_fit else 0,
                "fits": mem.fits,
                "per_gpu": True,
            },
            "advice": self.advice,
            **(self.confidence.to_dict() if self.confidence else {}),
            "provenance": self.provenance,
        }

    def __rich__(self):  # pragma: no cover - rendering exercised through the CLI tests
        from infercast.analysis.render import render_prediction

        return render_prediction(self)


TTFT_DEFINITION = "mean over the batch's requests, as simulate --offline reports it (ttft_last_s: the last request's)"
"""What a static batch's ``ttft_s`` is, in every command's JSON (predict, sweep, compare)."""


def check_context(model: ModelSpec, input_len: int, output_len: int) -> None:
    """Raise an ``input_len`` error when a request of ``input_len + output_len`` tokens exceeds the context."""
    if input_len + output_len > model.max_context:
        raise InfercastError(
            f"input_len + output_len = {input_len + output_len} exceeds the {model.max_context}-token "
            f"context of {model.id}",
            field="input_len",
        )


def as_deployment(
    model: str | ModelSpec | Deployment,
    gpu: str | HardwareSpec | None,
    *,
    tp: int = 1,
    ep: int = 1,
    precision: str | None = None,
    kv_precision: str | None = None,
    engine: str | EngineSpec = "vllm",
    pp: int = 1,
    attention_dp: int = 1,
) -> Deployment:
    """The deployment an analysis entry point was given: a :class:`Deployment` as is (its parts may not be given
    again), or one resolved from a model, a GPU and the parallelism/format/engine keywords."""
    if isinstance(model, Deployment):
        parts = {
            "gpu": gpu is None,
            "tp": tp == 1,
            "ep": ep == 1,
            "precision": precision is None,
            "kv_precision": kv_precision is None,
            "engine": engine == "vllm",
            "pp": pp == 1,
            "attention_dp": attention_dp == 1,
        }
        for name, unset in parts.items():
            if not unset:
                raise InfercastError("is part of the Deployment given; set it there", field=name)
        return model
    if gpu is None:
        raise InfercastError("needs a gpu (or a Deployment)", field="gpu")
    return Deployment.resolve(
        model,
        gpu,
        tp=tp,
        ep=ep,
        precision=precision,
        kv_precision=kv_precision,
        engine=engine,
        pp=pp,
        attention_dp=attention_dp,
    )


def front_end_paces(tpot: float, itl: float) -> bool:
    """Whether clients see tokens further apart than the engine's steps: the API server's front-end paces the
    stream (beyond rounding)."""
    return tpot > itl * (1 + 1e-9)


def _front_end_tip(tpot: float, itl: float, batch: int, token_s: float) -> list[str]:
    """Where the API server's front-end, not the GPUs, paces the stream: what it costs and what would help."""
    if not front_end_paces(tpot, itl):
        return []
    return [
        f"the API server's front-end paces the stream: {batch} streams x {1e6 * token_s:.0f} us per token = "
        f"{tpot * 1e3:.2f} ms per token each, against {itl * 1e3:.2f} ms per decode step; fewer streams per "
        "server (more replicas), post-processing workers, or a release whose server streams faster"
    ]


def predict(
    dep: Deployment,
    *,
    input_len: int,
    output_len: int,
    batch: int = 1,
    chunk_size: int | None = None,
    profile: CostProfile | None = None,
    strict: bool = True,
    stream_token_s: float | None = None,
) -> Prediction:
    """Predict one scenario on a resolved deployment: ``batch`` requests of ``input_len`` prompt tokens and
    ``output_len`` outputs (``infercast.predict`` takes a model, a GPU and the layout keywords instead).

    TTFT and TPOT are means over the batch's requests (``ttft_s``, ``tpot_s``; see :class:`Prediction`); the
    last request's TTFT is the prefill of all the batch's prompts (chunked when ``chunk_size`` is given), its
    TPOT the mean decode step as the context grows from I+1 to I+O-1, or the pace of an API-server front-end
    that cannot stream a step's tokens within it (:func:`~infercast.cost.front_end.static_batch_delays`);
    ITL the mean decode step;
    ``single_stream_tpot_s`` the same step for one request alone; throughput that of a
    static batch (B·O / E2E). With ``strict`` (default) a configuration that does not fit in memory raises
    :class:`~infercast.errors.DoesNotFitError`; otherwise it is predicted and ``memory.fits`` is False.
    ``stream_token_s``: seconds of the API server's front-end per streamed token (0: none; None: the profile's,
    TensorRT-LLM's fitted one, none for the others).
    """
    input_len = require_positive_int("input_len", input_len)
    output_len = require_positive_int("output_len", output_len)
    batch = require_positive_int("batch", batch)
    if chunk_size is not None:
        chunk_size = require_positive_int("chunk_size", chunk_size)
    check_context(dep.model, input_len, output_len)
    mem = memory_budget(dep, context=input_len + output_len, concurrency=batch)
    if strict:
        require_fit(mem)
    cm = cost_model(dep, with_front_end(profile, dep, stream_token_s))
    pre, dec, single_total = static_batch_phases(cm, input_len, output_len, batch)
    if chunk_size is not None:
        pre = prefill_sums(cm, input_len, batch, chunk_size)
    pre_report = phase_report("prefill", pre, cm)
    dec_report = phase_report("decode", dec, cm)
    share = first_token_share_one(input_len, batch, *prefill_budget(dep, chunk_size))
    times = _static_batch_times(
        cm.profile, pre_report.time_s, dec_report.time_s, single_total, output_len, batch, share
    )
    return _prediction(dep, mem, cm, (pre_report, dec_report), times, input_len, output_len, batch)


class _Times(NamedTuple):
    """A static batch's latencies (seconds): see the fields of :class:`Prediction` of the same names."""

    ttft_s: float
    tpot_s: float
    ttft_last_s: float
    tpot_last_s: float
    itl_s: float
    front_end_s: float
    single_stream_tpot_s: float
    e2e_s: float


def _static_batch_times(
    p: CostProfile, prefill_s: float, decode_s: float, single_total: float, output_len: int, batch: int, share: float
) -> _Times:
    """TTFT, TPOT, ITL and E2E of a static batch from its prefill and decode times: request overhead added, the
    API server's front-end delays where it has one, and TTFT/TPOT as means over the batch's requests (``share``:
    the mean share of the batch's prefill done when a request's prompt completes)."""
    steps = output_len - 1
    ttft = prefill_s + p.mean_request_overhead_s
    e2e = ttft + decode_s
    itl = tpot_last = decode_s / steps if steps else 0.0
    first = 0.0
    if p.stream_token_s > 0:  # the API server streams every token through one process
        first, last = (float(x) for x in static_batch_delays(p.stream_token_s, batch, decode_s, steps))
        ttft, e2e = ttft + first, e2e + last
        tpot_last = (e2e - ttft) / steps if steps else 0.0
    ttft_mean = ttft - (1.0 - share) * prefill_s  # static_batch_means, in plain floats
    tpot = (e2e - ttft_mean) / steps if steps > 0 else 0.0
    single = single_total / steps if steps else 0.0
    return _Times(ttft_mean, tpot, ttft, tpot_last, itl, first, single, e2e)


def _prediction(
    dep: Deployment,
    mem: MemoryBudget,
    cm: StepCostModel,
    reports: tuple[PhaseReport, PhaseReport],
    t: _Times,
    input_len: int,
    output_len: int,
    batch: int,
) -> Prediction:
    """The :class:`Prediction` of a scenario's phase reports and latencies, with its advice, provenance and
    expected error."""
    pre_report, dec_report = reports
    output_rate = batch * output_len / t.e2e_s
    prov = {"counts": "exact: FLOPs and bytes from the architecture and number formats", **cm.param_provenance}
    return Prediction(
        model=dep.model.id,
        gpu=dep.hardware.id,
        tp=dep.tp,
        ep=dep.ep,
        precision=dep.scheme.name,
        kv_precision=dep.kv_format.name,
        engine=dep.engine.id,
        input_len=input_len,
        output_len=output_len,
        batch=batch,
        ttft_s=t.ttft_s,
        tpot_s=t.tpot_s,
        ttft_last_s=t.ttft_last_s,
        tpot_last_s=t.tpot_last_s,
        itl_s=t.itl_s,
        front_end_s=t.front_end_s,
        single_stream_tpot_s=t.single_stream_tpot_s,
        e2e_s=t.e2e_s,
        output_throughput_tok_s=output_rate,
        total_throughput_tok_s=batch * (input_len + output_len) / t.e2e_s,
        prefill=pre_report,
        decode=dec_report,
        memory=mem,
        pp=dep.pp,
        attention_dp=dep.attention_dp,
        gpus=dep.gpus,
        advice=_front_end_tip(t.tpot_last_s, t.itl_s, batch, cm.profile.stream_token_s)
        + advice(pre_report, dec_report, cm, batch),
        provenance=prov,
        confidence=deployment_confidence(
            dep, batch, rates={"requests_per_s": batch / t.e2e_s, "output_tokens_per_s": output_rate}
        ),
    )
