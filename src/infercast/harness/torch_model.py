"""A real decoder-only transformer in PyTorch, built from a :class:`ModelSpec` with random weights.

It has the model's real shapes (embedding, N decoder layers of norm/attention/norm/FFN, final norm, LM head),
so timing it measures what a serving engine's kernels must do, without downloading any weights. Weights are
drawn N(0, 1/fan_in) (residual outputs further scaled by 1/sqrt(2·layers)) so activations stay O(1) and
finite in bf16.

Serving-style API over a preallocated per-layer KV cache (``max_batch x max_context``):

* :meth:`TransformerModel.prefill` — a chunk of new tokens per sequence on top of each one's cached tokens;
* :meth:`TransformerModel.decode` — one new token per sequence, each at its own context length;
* :meth:`TransformerModel.forward` — a cache-free reference pass over whole sequences (naive softmax
  attention), which the cached paths must reproduce;
* :class:`DecodeGraph` — a decode step captured in a CUDA graph (CUDA only).

Attention sinks (gpt-oss) and logit soft-capping (Gemma 2) are not modelled: they change no GEMM or KV shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import torch
from torch import Tensor, nn

from infercast.errors import InfercastError
from infercast.harness.torch_attention import (
    GQAAttention,
    LinearFactory,
    MLAAttention,
    Norm,
    StepMeta,
    StepPlan,
    init_weight,
    make_meta,
    make_plan,
    rope_tables,
)
from infercast.harness.torch_ffn import DenseMLP, MoEFFN, linear_factory, require_fp8
from infercast.specs.model import ModelSpec
from infercast.specs.truncate import is_sliding_layer, truncated

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.bfloat16}


def truncated_spec(spec: ModelSpec, num_layers: int) -> ModelSpec:
    """``spec`` cut to its first ``num_layers`` layers: the same rule the predictor uses
    (:func:`infercast.specs.truncate.truncated`)."""
    return truncated(spec, num_layers)


class DecoderLayer(nn.Module):
    """Pre-norm block: ``x + attn(norm(x))`` then ``x + ffn(norm(x))`` (plus post-norms when the spec has 4)."""

    def __init__(
        self, spec: ModelSpec, index: int, make_linear: LinearFactory, device: torch.device, dtype: torch.dtype
    ):
        super().__init__()
        h, out_scale = spec.hidden_size, 1.0 / math.sqrt(2 * spec.num_layers)
        self.attn_norm = Norm(h, spec.norm, device, dtype)
        self.ffn_norm = Norm(h, spec.norm, device, dtype)
        post = spec.norms_per_layer >= 4
        self.post_attn_norm = Norm(h, spec.norm, device, dtype) if post else None
        self.post_ffn_norm = Norm(h, spec.norm, device, dtype) if post else None
        if spec.mla:
            self.attn: GQAAttention | MLAAttention = MLAAttention(spec, make_linear, device, dtype, out_scale)
        else:
            sliding = is_sliding_layer(spec, index)
            self.attn = GQAAttention(spec, sliding, make_linear, device, dtype, out_scale)
        dense = spec.moe is None or index < spec.moe.num_dense_layers
        if dense:
            self.ffn: DenseMLP | MoEFFN = DenseMLP(spec, spec.intermediate_size, make_linear, out_scale)
        else:
            self.ffn = MoEFFN(spec, make_linear, device, dtype, out_scale)

    def _residual(self, x: Tensor, y: Tensor, post: Norm | None) -> Tensor:
        return x + (post(y) if post is not None else y)

    def forward(self, x: Tensor, meta: StepMeta) -> Tensor:
        x = self._residual(x, self.attn(self.attn_norm(x), meta), self.post_attn_norm)
        return self._residual(x, self.ffn(self.ffn_norm(x)), self.post_ffn_norm)

    def reference(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = self._residual(x, self.attn.reference(self.attn_norm(x), cos, sin), self.post_attn_norm)
        return self._residual(x, self.ffn(self.ffn_norm(x)), self.post_ffn_norm)


class TransformerModel(nn.Module):
    """The decoder of ``spec`` (first ``num_layers`` layers) with random weights on ``device``."""

    def __init__(
        self,
        spec: ModelSpec,
        *,
        num_layers: int | None = None,
        precision: str = "bf16",
        device: str | torch.device = "cpu",
        seed: int = 0,
    ):
        super().__init__()
        if precision not in DTYPES:
            raise InfercastError(f"unknown precision {precision!r}; allowed: {', '.join(DTYPES)}", field="precision")
        device = torch.device(device)
        n = spec.num_layers if num_layers is None else num_layers
        if not 1 <= n <= spec.num_layers:
            raise InfercastError(f"must be between 1 and {spec.num_layers} for {spec.id}, got {n}", field="layers")
        unsupported = [
            what
            for what, present in (
                ("DeepSeek sparse attention", spec.sparse_attention),
                ("linear attention (gated DeltaNet)", spec.linear_attention),
                ("DeepSeek-V4 compressed attention", spec.compressed_attention),
                ("chunked local attention", spec.num_sliding_layers and spec.local_attention == "chunked"),
                ("gated attention output", spec.attn_output_gate),
            )
            if present
        ]
        if unsupported:
            raise InfercastError(
                f"the torch harness does not implement {', '.join(unsupported)} of {spec.id}; it would time a "
                "different model",
                field="model",
            )
        fp8 = precision == "fp8"
        if fp8:
            require_fp8(device)
        if fp8 and spec.moe:
            raise InfercastError(
                "fp8 routed experts are not implemented in the torch harness; use bf16", field="precision"
            )
        self.spec, self.precision, self.device = spec, precision, device
        self.dtype = DTYPES[precision]
        self.num_layers = n
        self.active_layers = n
        self.rot_dim = spec.mla.qk_rope_head_dim if spec.mla else spec.head_dim
        self.window = spec.sliding_window if spec.num_sliding_layers else None
        self.max_batch = self.max_context = 0
        torch.manual_seed(seed)
        make_linear = linear_factory(device, self.dtype, fp8)
        h = spec.hidden_size
        self.embed = init_weight((spec.vocab_size, h), 1.0, device, self.dtype)
        self.layers = nn.ModuleList(DecoderLayer(spec, i, make_linear, device, self.dtype) for i in range(n))
        self.final_norm = Norm(h, spec.norm, device, self.dtype)
        self.lm_head = (
            self.embed if spec.tie_word_embeddings else init_weight((spec.vocab_size, h), 1.0, device, self.dtype)
        )
        self.lm_scale = 1.0 / math.sqrt(h)

    @property
    def decoders(self) -> Sequence[DecoderLayer]:
        """The decoder layers, typed (to a type checker a ModuleList holds plain Modules)."""
        return cast("Sequence[DecoderLayer]", self.layers)

    # ----- cache ------------------------------------------------------------------------------------------
    def allocate_cache(self, max_batch: int, max_context: int) -> None:
        """(Re)allocate every layer's KV cache for ``max_batch`` sequences of up to ``max_context`` tokens."""
        self.free_cache()
        for layer in self.decoders:
            layer.attn.allocate(max_batch, max_context)
        self.max_batch, self.max_context = max_batch, max_context

    def free_cache(self) -> None:
        """Drop the KV caches (so a differently sized one can be allocated)."""
        for layer in self.decoders:
            if isinstance(layer.attn, MLAAttention):
                layer.attn.cache = None
            else:
                layer.attn.k_cache = layer.attn.v_cache = None
        self.max_batch = self.max_context = 0

    def kv_bytes_per_token(self, layers: int | None = None) -> float:
        """Cache bytes one token takes over ``layers`` layers (default: all built layers).

        The harness caches every layer at full context (no sliding-window trimming) in the activation dtype
        (bf16 for fp8 runs), which is :meth:`ModelSpec.kv_bytes_per_token` of the cut model.
        """
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        return truncated(self.spec, layers or self.num_layers).kv_bytes_per_token(itemsize)

    # ----- forward passes ---------------------------------------------------------------------------------
    def _logits(self, x: Tensor) -> Tensor:
        return torch.nn.functional.linear(self.final_norm(x), self.lm_head) * self.lm_scale

    def plan(
        self, cached_lens: Sequence[int], num_tokens: int, *, hi: int | None = None, force_mask: bool = False
    ) -> StepPlan:
        """Host-side plan of a step (see :func:`make_plan`) for this model's sliding window."""
        return make_plan(cached_lens, num_tokens, self.window, hi=hi, force_mask=force_mask)

    def step(
        self, tokens: Tensor, cached_lens: Tensor, plan: StepPlan, slot: int = 0, all_logits: bool = False
    ) -> Tensor:
        """One forward step over the cache: ``tokens`` ``[B, T]`` after ``cached_lens`` ``[B]`` (device tensor).

        Uses no host synchronisation, so it can be captured in a CUDA graph. Returns the logits of the last
        new token of each sequence ``[B, V]`` (what a server samples from), or of all ``[B, T, V]``.
        """
        b = tokens.shape[0]
        if slot + b > self.max_batch or plan.hi > self.max_context:
            raise InfercastError(
                f"step needs {b} rows from {slot} and {plan.hi} tokens; the cache holds "
                f"{self.max_batch} x {self.max_context} (allocate_cache first)",
                field="cache",
            )
        meta = make_meta(plan, cached_lens, slot, self.rot_dim)
        x = torch.nn.functional.embedding(tokens, self.embed)
        for layer in self.decoders[: self.active_layers]:
            x = layer(x, meta)
        return self._logits(x if all_logits else x[:, -1])

    def prefill(
        self, tokens: Tensor, cached_lens: Sequence[int] | None = None, slot: int = 0, all_logits: bool = False
    ) -> Tensor:
        """Process a chunk ``tokens`` ``[B, T]`` on top of ``cached_lens`` tokens already cached per sequence."""
        lens = [0] * tokens.shape[0] if cached_lens is None else list(cached_lens)
        plan = self.plan(lens, tokens.shape[1])
        return self.step(tokens, torch.tensor(lens, device=self.device), plan, slot, all_logits)

    def decode(self, tokens: Tensor, context_lens: Sequence[int], slot: int = 0) -> Tensor:
        """One decode step: ``tokens`` ``[B]`` (or ``[B, 1]``), sequence ``i`` having ``context_lens[i]`` cached."""
        tokens = tokens.reshape(-1, 1)
        lens = list(context_lens)
        return self.step(tokens, torch.tensor(lens, device=self.device), self.plan(lens, 1), slot)

    def forward(self, tokens: Tensor) -> Tensor:
        """Cache-free reference: logits ``[B, T, V]`` of whole sequences, with naive masked softmax attention."""
        pos = torch.arange(tokens.shape[1], device=tokens.device)[None].expand(tokens.shape[0], -1)
        cos, sin = rope_tables(pos, self.rot_dim)
        x = torch.nn.functional.embedding(tokens, self.embed)
        for layer in self.decoders[: self.active_layers]:
            x = layer.reference(x, cos, sin)
        return self._logits(x)


class DecodeGraph:
    """A greedy decode step captured in a CUDA graph for a fixed batch and attended length.

    Each replay runs the model on the static token buffer at the static context lengths, then writes the
    argmax token back into the buffer and advances the contexts by ``advance`` (1 for a generation loop,
    0 to time the same step repeatedly). With ``advance=1`` the plan attends ``[0, hi)`` under an explicit
    mask, so one graph serves every step until the context reaches ``hi``.
    """

    def __init__(
        self,
        model: TransformerModel,
        context_lens: Sequence[int],
        *,
        hi: int | None = None,
        advance: int = 0,
        slot: int = 0,
        warmup: int = 2,
    ):
        if model.device.type != "cuda":
            raise InfercastError("CUDA graphs need a CUDA device", field="device")
        lens = list(context_lens)
        self.model, self.advance, self.slot = model, advance, slot
        self.plan = model.plan(lens, 1, hi=hi, force_mask=advance > 0)
        self.tokens = torch.zeros((len(lens), 1), device=model.device, dtype=torch.long)
        self.context = torch.tensor(lens, device=model.device, dtype=torch.long)
        self._start = self.context.clone()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                self._body()
        torch.cuda.current_stream().wait_stream(stream)
        self.reset()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.logits = self._body()
        self.reset()

    def _body(self) -> Tensor:
        logits = self.model.step(self.tokens, self.context, self.plan, self.slot)
        self.tokens.copy_(logits.argmax(dim=-1, keepdim=True))
        if self.advance:
            self.context.add_(self.advance)
        return logits

    def reset(self, tokens: Tensor | None = None) -> None:
        """Restore the starting context lengths (and optionally set the input tokens)."""
        self.context.copy_(self._start)
        if tokens is not None:
            self.tokens.copy_(tokens.reshape(-1, 1))

    def replay(self) -> Tensor:
        """Run one captured step; returns the (static) logits buffer."""
        self.graph.replay()
        return self.logits
