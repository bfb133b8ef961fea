"""Measurement sweeps over the PyTorch transformer, returning :class:`Record` rows (``engine="torch"``).

* prefill step time vs prompt tokens and batch (fresh prompts, logits of the last token only);
* decode step time vs batch x context (one CUDA graph per point on CUDA);
* end-to-end TTFT and TPOT of single requests (prefill + greedy argmax, then a greedy decode loop);
* microbenchmarks (:mod:`infercast.harness.microbench`).

Large models run a layer subset (``layers=N``: the first N decoder layers, embedding and LM head included);
:func:`extrapolate_layers` turns runs at two layer counts into a per-layer cost plus a fixed cost and
predicts any depth, and :func:`compare_records` checks such a prediction against a full run. Nothing here
touches the network: weights are random, shapes come from the model spec.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

from infercast.errors import InfercastError, require_positive_int
from infercast.harness import microbench
from infercast.harness.options import DEVICE_DEFAULTS, SUITES, MeasureOptions, MeasureResult
from infercast.harness.timing import Environment, Stamp, Timer, detect_gpu_id, synchronize
from infercast.harness.torch_ffn import require_fp8
from infercast.harness.torch_model import DTYPES, DecodeGraph, TransformerModel
from infercast.memory import weight_bytes_per_gpu
from infercast.records.record import Record, write_records
from infercast.specs.catalog import get_hardware, get_model
from infercast.specs.model import ModelSpec
from infercast.specs.precision import get_scheme
from infercast.specs.truncate import truncated

__all__ = ["SUITES", "MeasureOptions", "MeasureResult", "compare_records", "extrapolate_layers", "run_measure"]

TINY_PARAMS = 50_000_000
"""Largest model (parameters, at the layers run) measured on CPU; CPU runs only test the plumbing."""
CPU_MEMORY_BYTES = 4e9
"""Memory a CPU run may give its KV caches: CPU runs only test the plumbing on models under TINY_PARAMS,
and this keeps a test run well inside a laptop's RAM."""
KV_FREE_FRACTION = 0.8
"""Share of free device memory a point's KV cache may take; the rest is for the step's activations (the
largest, a 16384-token prefill of an 8B model, needs a few GB) and the allocator's fragmentation."""
WEIGHTS_FREE_FRACTION = 0.9
"""Share of free device memory the weights may take before the run is refused up front: what is left must
hold at least the smallest KV cache and cuBLAS/attention workspaces (points that still do not fit are
skipped one by one, with a note)."""
LAYER_KINDS = ("prefill_step", "decode_step", "ttft", "tpot")
_MATCH_FIELDS = (
    "kind",
    "model",
    "gpu",
    "engine",
    "precision",
    "kv_precision",
    "tp",
    "ep",
    "batch",
    "input_len",
    "output_len",
    "context",
    "m",
    "n",
    "k",
    "op",
    "bytes",
)


def resolve_device(requested: str | None, spec: ModelSpec, layers: int) -> torch.device:
    """The device to run on; a clear error when CUDA is asked for or needed but absent."""
    if requested not in (None, "cuda", "cpu"):
        raise InfercastError(f"must be cuda or cpu, got {requested!r}", field="device")
    has_cuda = torch.cuda.is_available()
    if requested == "cuda" and not has_cuda:
        raise InfercastError(
            f"--device cuda was asked for but this machine has no CUDA GPU (torch {torch.__version__})", field="device"
        )
    device = torch.device(requested or ("cuda" if has_cuda else "cpu"))
    params = truncated(spec, layers).total_params
    if device.type == "cpu" and params > TINY_PARAMS:
        raise InfercastError(
            f"{spec.id} has {params / 1e9:.2f}B parameters at {layers} layers; measuring it needs a CUDA GPU "
            f"(CPU runs are for models under {TINY_PARAMS / 1e6:.0f}M parameters, to test the plumbing)",
            field="device",
        )
    return device


def _free_bytes(device: torch.device) -> float:
    if device.type != "cuda":
        return CPU_MEMORY_BYTES
    torch.cuda.empty_cache()
    return float(torch.cuda.mem_get_info(device)[0])


class StepSweeps:
    """Prefill, decode and request sweeps on one model (at its current ``active_layers``)."""

    def __init__(self, model: TransformerModel, timer: Timer, stamp: Stamp, use_graphs: bool, skipped: list[str]):
        self.model, self.timer, self.stamp, self.skipped = model, timer, stamp, skipped
        self.device = model.device
        self.use_graphs = use_graphs and self.device.type == "cuda"
        self.gen = torch.Generator(device=self.device).manual_seed(1234)

    def _tokens(self, batch: int, length: int) -> torch.Tensor:
        vocab = self.model.spec.vocab_size
        return torch.randint(0, vocab, (batch, length), device=self.device, generator=self.gen)

    def _first_token(self, prompt: torch.Tensor) -> torch.Tensor:
        """Prefill ``prompt`` and pick its first output token (what TTFT times)."""
        return self.model.prefill(prompt).argmax(dim=-1)

    def _allocate(self, batch: int, context: int, what: str) -> bool:
        """Allocate the KV cache for ``batch x context`` if it fits (else note the skip)."""
        self.model.free_cache()
        need = self.model.kv_bytes_per_token() * batch * context
        free = _free_bytes(self.device)
        if need > KV_FREE_FRACTION * free:
            self.skipped.append(
                f"{what}: KV cache for {batch} x {context} tokens needs {need / 1e9:.1f} GB, {free / 1e9:.1f} GB free"
            )
            return False
        self.model.allocate_cache(batch, context)
        return True

    def prefill(self, lens: list[int], batches: list[int], max_tokens: int) -> list[Record]:
        """One fresh prefill step of ``batch`` prompts of each length."""
        out = []
        for b in batches:
            fitting = [t for t in lens if b * t <= max_tokens]
            for t in sorted(set(lens) - set(fitting)):
                self.skipped.append(f"prefill batch {b} x {t}: over --max-prefill-tokens {max_tokens}")
            if not fitting or not self._allocate(b, max(fitting), f"prefill batch {b}"):
                continue
            for t in fitting:
                tokens = self._tokens(b, t)
                secs = self.timer(partial(self.model.prefill, tokens))
                out.append(self.stamp("prefill_step", secs, batch=b, input_len=t, context=0, notes="eager"))
        return out

    def _decode_fn(self, b: int, c: int) -> tuple[Callable[[], object], str]:
        if self.use_graphs:
            try:
                graph = DecodeGraph(self.model, [c] * b)
                # random tokens, one per sequence, as the eager path: the graph's buffer starts at token 0 for
                # every sequence, and identical inputs route a MoE batch like one token (k experts, not most)
                graph.reset(self._tokens(b, 1))
                return graph.replay, "cuda_graph"
            except RuntimeError as exc:  # capture unsupported for some kernel: time eagerly instead
                synchronize(self.device)
                self.skipped.append(f"decode batch {b} ctx {c}: CUDA graph capture failed ({exc}); timed eagerly")
        tokens = self._tokens(b, 1)
        return (lambda: self.model.decode(tokens, [c] * b)), "eager"

    def decode(self, batches: list[int], contexts: list[int]) -> list[Record]:
        """One decode step of ``batch`` sequences each holding ``context`` cached tokens."""
        out = []
        for b in batches:
            if not self._allocate(b, max(contexts) + 1, f"decode batch {b}"):
                continue
            for c in contexts:
                fn, how = self._decode_fn(b, c)
                out.append(self.stamp("decode_step", self.timer(fn), batch=b, context=c, notes=how))
                del fn
        return out

    def requests(self, lens: list[int], output_len: int) -> list[Record]:
        """TTFT (prefill + argmax) and TPOT (mean greedy decode step) of one request per prompt length."""
        out = []
        repeats = max(1, self.timer.repeats // 3)
        for t in lens:
            if not self._allocate(1, t + output_len, f"request {t}+{output_len}"):
                continue
            prompt = self._tokens(1, t)
            ttft = self.timer(partial(self._first_token, prompt))
            out.append(self.stamp("ttft", ttft, batch=1, input_len=t, output_len=output_len, notes="prefill+argmax"))
            if output_len < 2:
                continue
            first = self.model.prefill(prompt).argmax(dim=-1)
            loop, how = self._generation_loop(t, output_len, first)
            secs = self.timer(loop, repeats=repeats) / (output_len - 1)
            out.append(
                self.stamp(
                    "tpot",
                    secs,
                    batch=1,
                    input_len=t,
                    output_len=output_len,
                    notes=f"greedy loop of {output_len - 1} steps, {how}",
                )
            )
        return out

    def _generation_loop(self, t: int, output_len: int, first: torch.Tensor) -> tuple[Callable[[], None], str]:
        steps = output_len - 1
        if self.use_graphs:
            try:
                graph = DecodeGraph(self.model, [t], hi=t + output_len, advance=1)

                def replay_loop() -> None:
                    graph.reset(first)
                    for _ in range(steps):
                        graph.replay()

                return replay_loop, "cuda_graph"
            except RuntimeError as exc:
                synchronize(self.device)
                self.skipped.append(f"request {t}: CUDA graph capture failed ({exc}); timed eagerly")

        def eager_loop() -> None:
            tok = first
            for i in range(steps):
                tok = self.model.decode(tok, [t + i]).argmax(dim=-1)

        return eager_loop, "eager"


def _pick(value, device: torch.device, key: str):
    return DEVICE_DEFAULTS[device.type][key] if value is None else value


def _validate(opts: MeasureOptions, spec: ModelSpec) -> None:
    if opts.suite not in SUITES:
        raise InfercastError(f"must be one of {', '.join(SUITES)}, got {opts.suite!r}", field="suite")
    if opts.precision not in DTYPES:
        raise InfercastError(f"must be one of {', '.join(DTYPES)}, got {opts.precision!r}", field="precision")
    if opts.repeats is not None:
        require_positive_int("repeats", opts.repeats)
    if opts.warmup is not None:
        require_positive_int("warmup", opts.warmup, minimum=0)
    if opts.output_len is not None:
        # TTFT is timed on its own; TPOT needs a second generated token
        require_positive_int("output-len", opts.output_len, minimum=2)
    require_positive_int("max-prefill-tokens", opts.max_prefill_tokens)
    require_positive_int("seed", opts.seed, minimum=0)
    if opts.layers is not None and not 1 <= require_positive_int("layers", opts.layers) <= spec.num_layers:
        raise InfercastError(f"must be between 1 and {spec.num_layers} for {spec.id}", field="layers")
    if opts.extrapolate_from is not None:
        a, b = opts.extrapolate_from
        if opts.layers is not None:
            raise InfercastError("give either --layers or --extrapolate-from, not both", field="layers")
        if a == b or not (1 <= a <= spec.num_layers and 1 <= b <= spec.num_layers):
            raise InfercastError(f"needs two different layer counts in 1..{spec.num_layers}", field="extrapolate_from")
    for name in ("prefill_lens", "batches", "contexts"):
        values = getattr(opts, name)
        if values is not None and (not values or min(values) < 1):
            raise InfercastError("must be a non-empty list of positive integers", field=name.replace("_", "-"))


def device_label(gpu_name: str) -> tuple[str, list[str]]:
    """The ``gpu`` label of records timed on the CUDA device called ``gpu_name``: its catalog id when
    recognised, else a slug of the name and a warning (such rows cannot be predicted or calibrated until
    relabelled with a catalog id)."""
    detected = detect_gpu_id(gpu_name)
    if detected:
        return detected, []
    slug = "-".join(gpu_name.lower().replace("nvidia", "").split()) or "unknown-gpu"
    return slug, [f"device {gpu_name!r} is not in the hardware catalog; labelled {slug!r} (pass --gpu)"]


def _gpu_label(opts: MeasureOptions, env: Environment) -> tuple[str, list[str]]:
    """The records' ``gpu`` column: 'cpu' on the CPU, else --gpu (a catalog id) or the detected device."""
    asked = (opts.gpu or "").strip()
    if env.device == "cpu":
        if asked and asked.lower() != "cpu":
            raise InfercastError(
                f"{asked!r} names a GPU but this run is on the CPU, whose timings are labelled 'cpu' (they test "
                "the harness and cannot stand for a GPU); drop --gpu, or run on that GPU with --device cuda",
                field="gpu",
            )
        return "cpu", []
    if asked.lower() == "cpu":
        raise InfercastError(f"'cpu' labels CPU runs, but this run is on {env.gpu_name}", field="gpu")
    if asked:
        return get_hardware(asked).id, []
    return device_label(env.gpu_name)


def _check_out(out: Path) -> None:
    """Fail before measuring (not after) when the CSV cannot be written."""
    if out.is_dir():
        raise InfercastError(f"{out} is a folder; give a CSV file path", field="out")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InfercastError(f"cannot create {out.parent}: {exc.strerror or exc}", field="out") from None
    if not os.access(out.parent, os.W_OK):
        raise InfercastError(f"cannot write into {out.parent}", field="out")


def run_measure(opts: MeasureOptions) -> MeasureResult:
    """Build the model, run the chosen suite, write the CSV(s); returns what was measured."""
    spec = get_model(opts.model)
    _validate(opts, spec)
    depths = sorted(opts.extrapolate_from) if opts.extrapolate_from else [opts.layers or spec.num_layers]
    device = resolve_device(opts.device, spec, max(depths))
    if opts.precision == "fp8":
        require_fp8(device)
    env = Environment.detect(device)
    gpu, skipped = _gpu_label(opts, env)
    out = opts.out or Path(f"infercast-measure-{spec.id}-{gpu}-{opts.suite}.csv")
    _check_out(out)
    kv = "bf16" if opts.precision == "fp8" else opts.precision
    # records name the model as the user did: a catalog id, or the config.json path (so validate can find it)
    model_ref = spec.id if spec.id == str(opts.model).strip().lower() else str(opts.model)
    stamp = Stamp(env, gpu, model_ref, opts.precision, kv, opts.source)
    timer = Timer(
        device, _pick(opts.warmup, device, "warmup"), _pick(opts.repeats, device, "repeats"), flush_l2=opts.flush_l2
    )
    lens = _pick(opts.prefill_lens, device, "prefill_lens")
    batches = _pick(opts.batches, device, "batches")
    contexts = _pick(opts.contexts, device, "contexts")
    output_len = _pick(opts.output_len, device, "output_len")
    records: list[Record] = []
    if opts.suite in ("quick", "full"):
        _check_weights_fit(spec, max(depths), opts.precision, device)
        model = TransformerModel(spec, num_layers=max(depths), precision=opts.precision, device=device, seed=opts.seed)
        for depth in depths:
            model.active_layers = depth
            # layers = depth run (0: the whole model); extrapolation inputs always carry their depth
            stamp.defaults = {"layers": depth if opts.extrapolate_from or depth < spec.num_layers else 0}
            sweeps = StepSweeps(model, timer, stamp, opts.cuda_graphs, skipped)
            records += sweeps.prefill(lens, batches if opts.suite == "full" else [1], opts.max_prefill_tokens)
            records += sweeps.decode(batches, contexts)
            records += sweeps.requests(lens, output_len)
            synchronize(device)
        stamp.defaults = {}
        del model, sweeps  # free the weights and caches before the microbenchmarks
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if opts.suite in ("full", "micro"):
        records += microbench.gemm_records(spec, stamp, timer, opts.precision)
        records += microbench.attention_records(spec, stamp, timer, kv, lens, batches, contexts)
        records += microbench.peak_matmul_records(stamp, timer, opts.precision)
        records += microbench.hbm_copy_records(stamp, timer)
        records += microbench.launch_overhead_records(stamp, timer)
    result = MeasureResult(records, device.type, gpu, skipped=skipped, timing=timer.description)
    if opts.extrapolate_from:
        a, b = depths
        result.extrapolated = extrapolate_layers(
            [r for r in records if r.layers == a], [r for r in records if r.layers == b], spec.num_layers
        )
    header = (
        f"infercast measure: torch harness, random weights, engine=torch\ntiming: {timer.description}\n{opts.source}"
    )
    if records:
        write_records(out, records, header_comment=header)
        result.out = out
    if result.extrapolated:
        result.extrapolated_out = out.with_name(out.name.removesuffix(".csv") + ".extrapolated.csv")
        write_records(result.extrapolated_out, result.extrapolated, header_comment=header)
    return result


def _check_weights_fit(spec: ModelSpec, layers: int, precision: str, device: torch.device) -> None:
    """Refuse early (one line, no OOM traceback) when the weights alone would not fit on the GPU.

    Weight bytes are :func:`infercast.memory.weight_bytes_per_gpu` of the cut model in the run's scheme
    (fp8: fp8 linears, 16-bit embedding and LM head, as the harness builds them).
    """
    if device.type != "cuda":
        return
    need = sum(weight_bytes_per_gpu(truncated(spec, layers), get_scheme(precision)).values())
    free = _free_bytes(device)
    if need > WEIGHTS_FREE_FRACTION * free:
        raise InfercastError(
            f"{spec.id} at {layers} layers needs {need / 1e9:.1f} GB of weights, "
            f"{free / 1e9:.1f} GB free; pass --layers N to run a subset",
            field="layers",
        )


# ----- layer extrapolation ---------------------------------------------------------------------------------
def _key(rec: Record) -> tuple:
    return tuple(getattr(rec, name) for name in _MATCH_FIELDS)


def extrapolate_layers(
    records_a: Iterable[Record], records_b: Iterable[Record], full_layers: int, *, layers_label: int = 0
) -> list[Record]:
    """Predict ``full_layers``-deep times from the same points measured at two depths.

    For each point present in both lists (same kind and shape) with depths ``La != Lb``, the time is taken as
    ``fixed + layers * per_layer`` (fixed = embedding, LM head, sampling, launch), so
    ``per_layer = (tb - ta) / (Lb - La)`` and the prediction is ``ta + (full_layers - La) * per_layer``. Only
    step/request kinds are extrapolated; points whose prediction is not positive are dropped. The records
    returned carry ``layers=layers_label`` (0: the whole model) and the fit in ``notes``.
    """
    by_key = {_key(r): r for r in records_a if r.kind in LAYER_KINDS}
    out = []
    for rb in records_b:
        ra = by_key.get(_key(rb))
        if ra is None or ra.layers <= 0 or rb.layers <= 0 or ra.layers == rb.layers:
            continue
        per_layer = (rb.value_si - ra.value_si) / (rb.layers - ra.layers)
        fixed = ra.value_si - ra.layers * per_layer
        predicted = fixed + full_layers * per_layer
        if predicted <= 0:
            continue
        note = (
            f"extrapolated to {full_layers} layers from {ra.layers} and {rb.layers}: "
            f"{fixed * 1e3:.4g} ms + {per_layer * 1e3:.4g} ms/layer"
        )
        out.append(replace(rb, value=predicted, unit="s", layers=layers_label, notes=note))
    return out


def compare_records(predicted: Iterable[Record], measured: Iterable[Record]) -> list[dict[str, Any]]:
    """Match predicted to measured rows (same kind and shape; depth ignored) and give the relative error."""
    truth = {_key(r): r for r in measured}
    rows: list[dict[str, Any]] = []
    for p in predicted:
        m = truth.get(_key(p))
        if m is None:
            continue
        rows.append(
            {
                "kind": p.kind,
                "batch": p.batch,
                "input_len": p.input_len,
                "output_len": p.output_len,
                "context": p.context,
                "predicted_s": p.value_si,
                "measured_s": m.value_si,
                "error_pct": 100.0 * (p.value_si - m.value_si) / m.value_si,
            }
        )
    return rows
