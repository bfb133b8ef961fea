"""Attention for the measurement transformer: step plans, masks, rotary embeddings, GQA and MLA blocks.

Every forward step over the KV cache is described by a host-side :class:`StepPlan` (static sizes and which
masks are needed) and a device-side :class:`StepMeta` (positions, rotary tables, masks) that is computed from
device tensors only, so a whole step can be captured in a CUDA graph. Attention itself is
``torch.nn.functional.scaled_dot_product_attention``; no flash-attn dependency.

Grouped-query attention with a mask runs with the query heads of one KV group stacked as extra query rows
(``[B, n_kv, g*T, D]`` against ``[B, n_kv, S, D]``), so K/V are never repeated in memory and every SDPA
backend applies (the same layout decode kernels such as FlashMLA use).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from infercast.specs.model import ModelSpec

ROPE_THETA = 500_000.0


class LinearLayer(Protocol):
    """What the model asks of a dense linear (:class:`TorchLinear` or the fp8 one): a call and its weight."""

    @property
    def weight(self) -> Tensor: ...

    def __call__(self, x: Tensor) -> Tensor: ...


LinearFactory = Callable[..., LinearLayer]
"""``make(k, n, bias, scale=1.0)``: builds one of the model's dense linears in the chosen number format."""


@dataclass(frozen=True)
class StepPlan:
    """Static description of one forward step over the cache (fixed for a captured CUDA graph).

    Keys ``[0, hi)`` are attended by full-attention layers and ``[sliding_lo, hi)`` by sliding-window layers.
    A ``*_causal`` flag means "no mask, SDPA's causal flag" (fresh uniform prefill); ``*_masked`` means an
    explicit boolean mask; neither means every key in range is visible (uniform decode).
    """

    num_tokens: int
    hi: int
    full_causal: bool
    full_masked: bool
    window: int | None = None
    sliding_lo: int = 0
    sliding_causal: bool = False
    sliding_masked: bool = False


def make_plan(
    cached_lens: Sequence[int],
    num_tokens: int,
    window: int | None = None,
    *,
    hi: int | None = None,
    force_mask: bool = False,
) -> StepPlan:
    """Plan a step of ``num_tokens`` new tokens per sequence on top of ``cached_lens`` cached tokens.

    ``hi`` may be raised above the longest sequence (a decode graph reused while the context grows) and
    ``force_mask`` makes every mask explicit; both keep the plan valid for later, longer contexts.
    """
    lens = [int(c) for c in cached_lens]
    if not lens or min(lens) < 0 or num_tokens < 1:
        raise ValueError("need at least one sequence, non-negative cached lengths and >= 1 new token")
    needed = max(lens) + num_tokens
    hi = needed if hi is None else hi
    if hi < needed:
        raise ValueError(f"hi={hi} is shorter than the longest sequence ({needed})")
    uniform = min(lens) == max(lens) and hi == needed and not force_mask
    fresh = uniform and lens[0] == 0 and num_tokens > 1
    full_causal = fresh
    full_masked = not (uniform and (num_tokens == 1 or fresh))
    if window is None or window >= hi:
        return StepPlan(num_tokens, hi, full_causal, full_masked, window, 0, full_causal, full_masked)
    lo = max(0, min(lens) - window + 1)
    sliding_masked = not (uniform and num_tokens == 1)
    return StepPlan(num_tokens, hi, full_causal, full_masked, window, lo, False, sliding_masked)


@dataclass
class StepMeta:
    """Device tensors of one step, shared by all layers: positions, rotary tables, masks."""

    plan: StepPlan
    slot: int
    positions: Tensor  # [B, T] absolute positions of the new tokens
    cos: Tensor  # [B, T, 1, rot/2]
    sin: Tensor
    full_mask: Tensor | None  # [B, 1, T, hi] bool
    sliding_mask: Tensor | None  # [B, 1, T, hi - sliding_lo] bool


def rope_tables(positions: Tensor, rot_dim: int, theta: float = ROPE_THETA) -> tuple[Tensor, Tensor]:
    """cos/sin of shape ``[..., 1, rot_dim/2]`` for ``positions`` (computed in fp32, no precomputed table)."""
    inv_freq = 1.0 / theta ** (torch.arange(0, rot_dim, 2, device=positions.device, dtype=torch.float32) / rot_dim)
    freqs = positions.to(torch.float32)[..., None] * inv_freq
    return freqs.cos()[..., None, :], freqs.sin()[..., None, :]


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate ``x`` ``[B, T, H, D]`` by position (non-interleaved halves, as in HF Llama)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    return out.to(x.dtype)


def visible(q_pos: Tensor, k_pos: Tensor, window: int | None) -> Tensor:
    """Boolean ``[B, 1, T, S]``: key position visible to query position (causal, within the window)."""
    q = q_pos[:, None, :, None]
    k = k_pos[None, None, None, :]
    ok = k <= q
    if window is not None:
        ok = ok & (k > q - window)
    return ok


def make_meta(plan: StepPlan, cached_lens: Tensor, slot: int, rot_dim: int) -> StepMeta:
    """Device metadata for ``plan``; uses only device ops on ``cached_lens`` so it can run inside a graph."""
    dev = cached_lens.device
    positions = cached_lens.to(torch.long)[:, None] + torch.arange(plan.num_tokens, device=dev)[None, :]
    cos, sin = rope_tables(positions, rot_dim)
    full_mask = sliding_mask = None
    if plan.full_masked:
        full_mask = visible(positions, torch.arange(plan.hi, device=dev), None)
    if plan.sliding_masked:
        sliding_mask = visible(positions, torch.arange(plan.sliding_lo, plan.hi, device=dev), plan.window)
    return StepMeta(plan, slot, positions, cos, sin, full_mask, sliding_mask)


def write_cache(cache: Tensor, new: Tensor, positions: Tensor) -> None:
    """Store ``new`` ``[B, T, H, D]`` into ``cache`` ``[B, H, S, D]`` (a contiguous block of cache rows) at
    each sequence's ``positions`` ``[B, T]``.

    One ``index_copy_`` over the flattened cache: no host synchronisation, so it is safe in a CUDA graph.
    """
    b, h, s, d = cache.shape
    dev = cache.device
    base = (torch.arange(b, device=dev)[:, None] * h + torch.arange(h, device=dev)[None, :]) * s
    index = (base[:, :, None] + positions[:, None, :]).reshape(-1)
    cache.view(-1, d).index_copy_(0, index, new.permute(0, 2, 1, 3).reshape(-1, d).to(cache.dtype))


def attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, scale: float) -> Tensor:
    """SDPA of ``q`` ``[B, Hq, T, D]`` over ``k``/``v`` ``[B, Hkv, S, D(v)]``; returns ``[B, Hq, T, Dv]``."""
    b, hq, t, d = q.shape
    hkv, s = k.shape[1], k.shape[2]
    g = hq // hkv
    if causal:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=g > 1)
    if g == 1:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    qg = q.reshape(b, hkv, g * t, d)
    if mask is not None and t > 1:
        mask = mask[:, :, None].expand(b, 1, g, t, s).reshape(b, 1, g * t, s)
    out = F.scaled_dot_product_attention(qg, k, v, attn_mask=mask, scale=scale)
    return out.reshape(b, hq, t, v.shape[-1])


def reference_attention(q: Tensor, k: Tensor, v: Tensor, window: int | None, scale: float) -> Tensor:
    """Plain softmax attention over the sequence itself (no cache, no SDPA), for equivalence tests."""
    hq, hkv, t = q.shape[1], k.shape[1], q.shape[2]
    k = k.repeat_interleave(hq // hkv, dim=1)
    v = v.repeat_interleave(hq // hkv, dim=1)
    pos = torch.arange(t, device=q.device)
    mask = visible(pos[None], pos, window)
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale
    scores = scores.masked_fill(~mask, float("-inf"))
    return (scores.softmax(-1) @ v.float()).to(q.dtype)


def init_weight(shape: tuple[int, ...], std: float, device: torch.device, dtype: torch.dtype) -> nn.Parameter:
    """A random weight drawn from N(0, std²) directly on ``device`` (no default init to overwrite)."""
    w = torch.empty(shape, device=device, dtype=dtype)
    w.normal_(0.0, std)
    return nn.Parameter(w, requires_grad=False)


class TorchLinear(nn.Module):
    """``y = x Wᵀ + b`` with random N(0, scale²/k) weights so activations keep unit scale."""

    def __init__(self, k: int, n: int, bias: bool, device: torch.device, dtype: torch.dtype, scale: float = 1.0):
        super().__init__()
        self.weight = init_weight((n, k), scale / math.sqrt(k), device, dtype)
        self.bias = init_weight((n,), 0.02, device, dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)


class Norm(nn.Module):
    """RMSNorm (or LayerNorm) with random-around-one weights."""

    def __init__(self, dim: int, kind: str, device: torch.device, dtype: torch.dtype, eps: float = 1e-6):
        super().__init__()
        self.kind, self.eps = kind, eps
        self.weight = nn.Parameter(1.0 + 0.02 * torch.randn(dim, device=device, dtype=dtype), requires_grad=False)
        self.bias = init_weight((dim,), 0.02, device, dtype) if kind == "layernorm" else None

    def forward(self, x: Tensor) -> Tensor:
        if self.kind == "layernorm":
            return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class GQAAttention(nn.Module):
    """Multi-head / grouped-query / multi-query attention with a preallocated ``[B, H_kv, S, D]`` cache."""

    def __init__(
        self,
        spec: ModelSpec,
        sliding: bool,
        make_linear: LinearFactory,
        device: torch.device,
        dtype: torch.dtype,
        out_scale: float,
    ):
        super().__init__()
        h, d = spec.hidden_size, spec.head_dim
        self.nq, self.nkv, self.d = spec.num_attention_heads, spec.num_kv_heads, d
        self.window = spec.sliding_window if sliding else None
        self.qkv = make_linear(h, (self.nq + 2 * self.nkv) * d, spec.qkv_bias)
        self.o = make_linear(self.nq * d, h, spec.o_bias, out_scale)
        self.q_norm = Norm(d, "rmsnorm", device, dtype) if spec.qk_norm else None
        self.k_norm = Norm(d, "rmsnorm", device, dtype) if spec.qk_norm else None
        self.scale = 1.0 / math.sqrt(d)
        self.k_cache: Tensor | None = None
        self.v_cache: Tensor | None = None

    def allocate(self, batch: int, context: int) -> None:
        """Preallocate the K and V caches for ``batch`` sequences of up to ``context`` tokens."""
        ref = self.qkv.weight
        dtype = torch.bfloat16 if ref.dtype == torch.float8_e4m3fn else ref.dtype
        shape = (batch, self.nkv, context, self.d)
        self.k_cache = torch.zeros(shape, device=ref.device, dtype=dtype)
        self.v_cache = torch.zeros(shape, device=ref.device, dtype=dtype)

    def _project(self, x: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split([self.nq * self.d, self.nkv * self.d, self.nkv * self.d], dim=-1)
        q, k, v = q.view(b, t, self.nq, self.d), k.view(b, t, self.nkv, self.d), v.view(b, t, self.nkv, self.d)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def forward(self, x: Tensor, meta: StepMeta) -> Tensor:
        """Attend the new tokens over the cache (after writing their K/V into it)."""
        assert self.k_cache is not None and self.v_cache is not None, "allocate() the KV cache first"
        b, t, _ = x.shape
        q, k, v = self._project(x, meta.cos, meta.sin)
        rows = slice(meta.slot, meta.slot + b)
        kc, vc = self.k_cache[rows], self.v_cache[rows]
        write_cache(kc, k, meta.positions)
        write_cache(vc, v, meta.positions)
        plan = meta.plan
        if self.window is None:
            lo, mask, causal = 0, meta.full_mask, plan.full_causal
        else:
            lo, mask, causal = plan.sliding_lo, meta.sliding_mask, plan.sliding_causal
        out = attend(q.transpose(1, 2), kc[:, :, lo : plan.hi], vc[:, :, lo : plan.hi], mask, causal, self.scale)
        return self.o(out.transpose(1, 2).reshape(b, t, self.nq * self.d))

    def reference(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """Attention over ``x`` alone with a naive softmax (no cache), for equivalence tests."""
        b, t, _ = x.shape
        q, k, v = self._project(x, cos, sin)
        out = reference_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), self.window, self.scale)
        return self.o(out.transpose(1, 2).reshape(b, t, self.nq * self.d))


class MLAAttention(nn.Module):
    """DeepSeek multi-head latent attention caching one ``kv_lora_rank + rope`` latent per token.

    Prefill up-projects the cached latent into per-head K/V (``kv_b_proj``); a decode step (one new token)
    uses the absorbed form: queries are mapped into the latent space and attend the latent cache directly as
    multi-query attention, and the result is mapped out through the value half of ``kv_b_proj``.
    """

    def __init__(
        self, spec: ModelSpec, make_linear: LinearFactory, device: torch.device, dtype: torch.dtype, out_scale: float
    ):
        super().__init__()
        assert spec.mla is not None
        m, h = spec.mla, spec.hidden_size
        self.nq, self.rank, self.rope = spec.num_attention_heads, m.kv_lora_rank, m.qk_rope_head_dim
        self.nope, self.vdim = m.qk_nope_head_dim, m.v_head_dim
        qk = self.nope + self.rope
        self.q_a: LinearLayer | None = None
        self.q_a_norm: Norm | None = None
        if m.q_lora_rank:
            self.q_a = make_linear(h, m.q_lora_rank, False)
            self.q_a_norm = Norm(m.q_lora_rank, "rmsnorm", device, dtype)
            self.q_b = make_linear(m.q_lora_rank, self.nq * qk, False)
        else:
            self.q_b = make_linear(h, self.nq * qk, False)
        self.kv_a = make_linear(h, self.rank + self.rope, False)
        self.kv_a_norm = Norm(self.rank, "rmsnorm", device, dtype)
        # kv_b stays in the activation dtype: the absorbed decode path reads its weight directly.
        self.kv_b = TorchLinear(self.rank, self.nq * (self.nope + self.vdim), False, device, dtype)
        self.o = make_linear(self.nq * self.vdim, h, False, out_scale)
        self.scale = 1.0 / math.sqrt(qk)
        self.cache: Tensor | None = None

    def allocate(self, batch: int, context: int) -> None:
        """Preallocate the latent cache ``[batch, 1, context, kv_lora_rank + rope]``."""
        w = self.kv_b.weight
        self.cache = torch.zeros((batch, 1, context, self.rank + self.rope), device=w.device, dtype=w.dtype)

    def _project(self, x: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries ``[B, T, H, nope]`` and ``[B, T, H, rope]``, and the new latents ``[B, T, 1, rank+rope]``."""
        b, t, _ = x.shape
        q_in = self.q_a_norm(self.q_a(x)) if self.q_a is not None and self.q_a_norm is not None else x
        q = self.q_b(q_in).view(b, t, self.nq, self.nope + self.rope)
        q_nope, q_pe = q.split([self.nope, self.rope], dim=-1)
        kv = self.kv_a(x)
        latent = self.kv_a_norm(kv[..., : self.rank])
        k_pe = apply_rope(kv[..., self.rank :].view(b, t, 1, self.rope), cos, sin)
        new = torch.cat((latent.view(b, t, 1, self.rank), k_pe), dim=-1)
        return q_nope, apply_rope(q_pe, cos, sin), new

    def _expand(self, latents: Tensor) -> tuple[Tensor, Tensor]:
        """Per-head K ``[B, H, S, nope+rope]`` and V ``[B, H, S, v]`` from latents ``[B, S, rank+rope]``."""
        b, s, _ = latents.shape
        kv = self.kv_b(latents[..., : self.rank]).view(b, s, self.nq, self.nope + self.vdim)
        k_nope, v = kv.split([self.nope, self.vdim], dim=-1)
        k_pe = latents[..., self.rank :][:, :, None, :].expand(b, s, self.nq, self.rope)
        return torch.cat((k_nope, k_pe), dim=-1).transpose(1, 2), v.transpose(1, 2)

    def forward(self, x: Tensor, meta: StepMeta) -> Tensor:
        """Write the new latents, then attend (absorbed MQA form for one-token steps, expanded otherwise)."""
        assert self.cache is not None, "allocate() the KV cache first"
        b, t, _ = x.shape
        q_nope, q_pe, new = self._project(x, meta.cos, meta.sin)
        cache = self.cache[meta.slot : meta.slot + b]
        write_cache(cache, new, meta.positions)
        plan = meta.plan
        latents = cache[:, 0, : plan.hi]
        if t == 1:
            w = self.kv_b.weight.view(self.nq, self.nope + self.vdim, self.rank)
            q_lat = torch.einsum("bthn,hnr->bhtr", q_nope, w[:, : self.nope])
            q_abs = torch.cat((q_lat, q_pe.transpose(1, 2)), dim=-1)
            kv = latents[:, None]
            o_lat = attend(q_abs, kv, kv[..., : self.rank], meta.full_mask, False, self.scale)
            out = torch.einsum("bhtr,hvr->bthv", o_lat, w[:, self.nope :])
        else:
            k, v = self._expand(latents)
            q = torch.cat((q_nope, q_pe), dim=-1).transpose(1, 2)
            out = attend(q, k, v, meta.full_mask, plan.full_causal, self.scale).transpose(1, 2)
        return self.o(out.reshape(b, t, self.nq * self.vdim))

    def reference(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """Expanded-form attention over ``x`` alone (no cache), for equivalence tests."""
        b, t, _ = x.shape
        q_nope, q_pe, new = self._project(x, cos, sin)
        k, v = self._expand(new[:, :, 0])
        q = torch.cat((q_nope, q_pe), dim=-1).transpose(1, 2)
        out = reference_attention(q, k, v, None, self.scale).transpose(1, 2)
        return self.o(out.reshape(b, t, self.nq * self.vdim))
