"""Microbenchmarks behind the cost model's efficiencies: the model's GEMMs, attention, copy bandwidth,
peak matmul throughput and kernel launch overhead.

Each function returns :class:`Record` rows stamped by a :class:`~infercast.harness.timing.Stamp`. GEMM names
and shapes come from :func:`infercast.specs.sharding.rank_linears`, the same list the cost model prices, so a
measured ``gemm`` row lines up with its predicted operator. Sizes shrink on CPU, where only the plumbing is
tested. Each timed repeat starts with a flushed L2 cache (see :class:`~infercast.harness.timing.Timer`), so a
GEMM whose operands would fit in L2 is still timed reading them from HBM.
"""

from __future__ import annotations

from functools import partial

import torch
import torch.nn.functional as F

from infercast.harness.timing import Stamp, Timer
from infercast.harness.torch_attention import attend
from infercast.harness.torch_ffn import FP8_MAX, require_fp8
from infercast.harness.torch_model import DTYPES
from infercast.records.record import Record
from infercast.specs.model import ModelSpec
from infercast.specs.sharding import rank_linears

GPU_TOKEN_COUNTS = (1, 8, 32, 128, 512, 2048, 8192)
CPU_TOKEN_COUNTS = (1, 8, 32)


def gemm_shapes(spec: ModelSpec) -> list[tuple[str, int, int]]:
    """``(name, k, n)`` of every distinct GEMM of one layer plus the LM head (one routed expert for MoE)."""
    out: list[tuple[str, int, int]] = []
    for lin in rank_linears(spec, tp=1, ep=1):
        if lin.name == "embedding":
            continue
        shape = (lin.name, int(lin.k), int(lin.n))
        if shape not in out:
            out.append(shape)
    return out


def _gemm_fn(m: int, n: int, k: int, precision: str, device: torch.device):
    """A closure running one ``m x k @ k x n`` GEMM as the model does (``F.linear``; fp8 via _scaled_mm)."""
    if precision == "fp8":
        require_fp8(device)
        rows = m + (-m) % 16
        a = torch.randn((rows, k), device=device).to(torch.float8_e4m3fn)
        b = torch.randn((n, k), device=device).to(torch.float8_e4m3fn)
        one = torch.tensor(1.0 / FP8_MAX, device=device)
        return lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    dtype = DTYPES[precision]
    a = torch.randn((m, k), device=device, dtype=dtype)
    w = torch.randn((n, k), device=device, dtype=dtype)
    return lambda: F.linear(a, w)


def gemm_records(
    spec: ModelSpec, stamp: Stamp, timer: Timer, precision: str, token_counts: tuple[int, ...] | None = None
) -> list[Record]:
    """Time each of the model's GEMM shapes at several token counts (M)."""
    device = timer.device
    counts = token_counts or (GPU_TOKEN_COUNTS if device.type == "cuda" else CPU_TOKEN_COUNTS)
    out = []
    for name, k, n in gemm_shapes(spec):
        for m in counts:
            fn = _gemm_fn(m, n, k, precision, device)
            note = "one routed expert" if name.startswith("experts_") else ""
            if precision == "fp8" and m % 16:
                note = f"{note}; rows padded to {m + (-m) % 16} for _scaled_mm".lstrip("; ")
            out.append(stamp("gemm", timer(fn), op=name, m=m, n=n, k=k, precision=precision, notes=note))
            del fn
    return out


def peak_matmul_records(stamp: Stamp, timer: Timer, precision: str = "bf16", size: int | None = None) -> list[Record]:
    """Square GEMM (8192³ on GPU, 512³ on CPU) as the practical peak of the tensor cores."""
    device = timer.device
    size = size or (8192 if device.type == "cuda" else 512)
    fn = _gemm_fn(size, size, size, precision, device)
    secs = timer(fn)
    tflops = 2 * size**3 / secs / 1e12
    return [
        stamp(
            "gemm", secs, op="peak_matmul", m=size, n=size, k=size, precision=precision, notes=f"{tflops:.1f} TFLOP/s"
        )
    ]


def hbm_copy_records(stamp: Stamp, timer: Timer, sizes: tuple[int, ...] | None = None) -> list[Record]:
    """Device-to-device copies; ``bytes`` counts what is read plus what is written (2x the buffer)."""
    device = timer.device
    sizes = sizes or ((256 << 20, 1 << 30) if device.type == "cuda" else (16 << 20,))
    out = []
    for size in sizes:
        src = torch.empty(size, dtype=torch.uint8, device=device).random_(0, 255)
        dst = torch.empty_like(src)
        secs = timer(partial(dst.copy_, src))
        moved = 2 * size
        out.append(
            stamp(
                "hbm_copy",
                secs,
                op="d2d_copy",
                bytes=float(moved),
                precision="",
                notes=f"{moved / secs / 1e9:.0f} GB/s",
            )
        )
        del src, dst
    return out


def launch_overhead_records(stamp: Stamp, timer: Timer, launches: int = 200) -> list[Record]:
    """Time per tiny kernel (a 1-element add): eager launches and, on CUDA, launches inside a CUDA graph."""
    device = timer.device
    x = torch.zeros(1, device=device)

    def burst() -> None:
        for _ in range(launches):
            x.add_(1.0)

    out = [
        stamp(
            "launch_overhead",
            timer(burst) / launches,
            op="eager" if device.type == "cuda" else "cpu_op",
            precision="",
            notes=f"mean of {launches} back-to-back launches",
        )
    ]
    if device.type == "cuda":
        burst()
        torch.cuda.synchronize(device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            burst()
        out.append(
            stamp(
                "launch_overhead",
                timer(graph.replay) / launches,
                op="cuda_graph",
                precision="",
                notes=f"mean of {launches} kernels replayed in one CUDA graph",
            )
        )
    return out


def _attention_tensors(
    spec: ModelSpec, batch: int, q_len: int, kv_len: int, decode: bool, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """q, k, v in the model's attention layout (MLA: expanded for prefill, absorbed latent for decode)."""

    def rnd(*shape: int) -> torch.Tensor:
        return torch.randn(shape, device=device, dtype=dtype)

    if spec.mla:
        m, nq = spec.mla, spec.num_attention_heads
        scale = (m.qk_nope_head_dim + m.qk_rope_head_dim) ** -0.5
        if decode:
            kv = rnd(batch, 1, kv_len, m.kv_lora_rank + m.qk_rope_head_dim)
            return rnd(batch, nq, q_len, kv.shape[-1]), kv, kv[..., : m.kv_lora_rank], scale
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        return rnd(batch, nq, q_len, qk), rnd(batch, nq, kv_len, qk), rnd(batch, nq, kv_len, m.v_head_dim), scale
    d = spec.head_dim
    q = rnd(batch, spec.num_attention_heads, q_len, d)
    return q, rnd(batch, spec.num_kv_heads, kv_len, d), rnd(batch, spec.num_kv_heads, kv_len, d), d**-0.5


def attention_records(
    spec: ModelSpec,
    stamp: Stamp,
    timer: Timer,
    precision: str,
    prefill_lens: list[int],
    batches: list[int],
    contexts: list[int],
) -> list[Record]:
    """One layer's attention kernel: causal prefill of each length (batch 1), and decode of each batch at each
    context (full attention; sliding windows not applied)."""
    device, dtype = timer.device, DTYPES[precision]
    out = []
    for t in prefill_lens:
        q, k, v, scale = _attention_tensors(spec, 1, t, t, False, dtype, device)
        secs = timer(partial(attend, q, k, v, None, True, scale))
        out.append(
            stamp(
                "op",
                secs,
                op="attention_prefill",
                batch=1,
                input_len=t,
                layers=1,
                notes="one layer, causal, no cached prefix",
            )
        )
    for b in batches:
        for c in contexts:
            q, k, v, scale = _attention_tensors(spec, b, 1, c + 1, True, dtype, device)
            secs = timer(partial(attend, q, k, v, None, False, scale))
            out.append(
                stamp(
                    "op",
                    secs,
                    op="attention_decode",
                    batch=b,
                    context=c,
                    layers=1,
                    notes="one layer, one new token per sequence over context+1 keys",
                )
            )
    return out
