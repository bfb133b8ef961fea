"""Feed-forward blocks of the measurement transformer: dense (gated or plain) MLPs, routed MoE, fp8 linears.

Routed experts are stored as batched weights ``[E, n, k]`` and run as one grouped GEMM
(``torch._grouped_mm``) over the token-expert assignments sorted by expert, with no host synchronisation,
so an MoE decode step can be captured in a CUDA graph. Where the grouped GEMM is unavailable for the
device/dtype (e.g. fp32 on CUDA, unaligned tiny shapes on CPU), a per-expert loop gives the same result.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from infercast.errors import InfercastError
from infercast.harness.torch_attention import LinearFactory, LinearLayer, TorchLinear, init_weight
from infercast.specs.model import ModelSpec

FP8_MAX = 448.0  # largest finite float8_e4m3fn value


def fp8_supported(device: torch.device) -> bool:
    """``torch._scaled_mm`` needs a CUDA GPU of compute capability 8.9 (Ada) or newer."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 9)


def require_fp8(device: torch.device) -> None:
    """Raise the one user error for fp8 on a device without fp8 tensor cores."""
    if not fp8_supported(device):
        where = (
            f"{torch.cuda.get_device_name(device)} has compute capability "
            f"{'.'.join(map(str, torch.cuda.get_device_capability(device)))}"
            if device.type == "cuda"
            else "this run is on the CPU"
        )
        raise InfercastError(
            f"fp8 GEMMs (torch._scaled_mm) need a CUDA GPU of compute capability >= 8.9; {where}", field="precision"
        )


class Fp8Linear(nn.Module):
    """Per-tensor-scaled float8 (e4m3) weights; activations quantised per tensor on the fly; bf16 output.

    Rows are padded to a multiple of 16, which ``torch._scaled_mm`` requires of its operands.
    """

    w_scale: Tensor  # a registered buffer (moves with the module)

    def __init__(self, k: int, n: int, bias: bool, device: torch.device, scale: float = 1.0):
        super().__init__()
        require_fp8(device)
        if k % 16 or n % 16:
            raise InfercastError(f"fp8 GEMM shapes must be multiples of 16, got {k}x{n}", field="precision")
        w = torch.randn((n, k), device=device, dtype=torch.float32) * (scale / math.sqrt(k))
        w_scale = w.abs().amax().clamp(min=1e-12) / FP8_MAX
        self.weight = nn.Parameter((w / w_scale).to(torch.float8_e4m3fn), requires_grad=False)
        self.register_buffer("w_scale", w_scale.reshape(()))
        self.bias = init_weight((n,), 0.02, device, torch.bfloat16) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        rows = x2.shape[0]
        pad = (-rows) % 16
        if pad:
            x2 = F.pad(x2, (0, 0, 0, pad))
        x_scale = x2.abs().amax().float().clamp(min=1e-12) / FP8_MAX
        xq = (x2 / x_scale).to(torch.float8_e4m3fn)
        out = torch._scaled_mm(xq, self.weight.t(), scale_a=x_scale, scale_b=self.w_scale, out_dtype=torch.bfloat16)
        out = out[:rows]
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*shape[:-1], out.shape[-1])


def linear_factory(device: torch.device, dtype: torch.dtype, fp8: bool) -> LinearFactory:
    """A constructor ``make(k, n, bias, scale=1.0)`` for the model's dense linears in the chosen format."""

    def make(k: int, n: int, bias: bool, scale: float = 1.0) -> LinearLayer:
        if fp8:
            return Fp8Linear(k, n, bias, device, scale)
        return TorchLinear(k, n, bias, device, dtype, scale)

    return make


def activation(name: str) -> Callable[[Tensor], Tensor]:
    """SiLU for silu/swish configs, tanh-approximated GELU for gelu variants."""
    if "gelu" in name:
        return lambda x: F.gelu(x, approximate="tanh")
    return F.silu


class DenseMLP(nn.Module):
    """Gated (``act(gate) * up`` with one fused gate_up GEMM) or plain (``act(up)``) MLP."""

    def __init__(self, spec: ModelSpec, width: int, make_linear: LinearFactory, out_scale: float):
        super().__init__()
        self.gated, self.width, self.act = spec.gated_ffn, width, activation(spec.activation)
        h = spec.hidden_size
        self.gate_up = make_linear(h, (2 if self.gated else 1) * width, spec.mlp_bias)
        self.down = make_linear(width, h, spec.mlp_bias, out_scale)

    def forward(self, x: Tensor) -> Tensor:
        up = self.gate_up(x)
        if self.gated:
            gate, up = up.split(self.width, dim=-1)
            return self.down(self.act(gate) * up)
        return self.down(self.act(up))


class MoEFFN(nn.Module):
    """Routed experts (softmax router, top-k, renormalised weights) plus optional shared experts."""

    def __init__(
        self, spec: ModelSpec, make_linear: LinearFactory, device: torch.device, dtype: torch.dtype, out_scale: float
    ):
        super().__init__()
        assert spec.moe is not None
        moe, h = spec.moe, spec.hidden_size
        self.num_experts, self.top_k, self.width = moe.num_experts, moe.experts_per_token, moe.expert_intermediate_size
        self.gated, self.act = spec.gated_ffn, activation(spec.activation)
        up = (2 if self.gated else 1) * self.width
        self.router = TorchLinear(h, moe.num_experts, moe.router_bias, device, dtype)
        self.w_up = init_weight((moe.num_experts, up, h), 1 / math.sqrt(h), device, dtype)
        self.w_down = init_weight((moe.num_experts, h, self.width), out_scale / math.sqrt(self.width), device, dtype)
        self.b_up = init_weight((moe.num_experts, up), 0.02, device, dtype) if moe.expert_bias else None
        self.b_down = init_weight((moe.num_experts, h), 0.02, device, dtype) if moe.expert_bias else None
        self.shared = None
        if moe.num_shared_experts:
            self.shared = DenseMLP(spec, moe.num_shared_experts * moe.shared_size, make_linear, out_scale)
        self.use_grouped = hasattr(torch, "_grouped_mm")

    def route(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Top-k expert ids ``[N, k]`` and their renormalised softmax weights (fp32)."""
        probs = self.router(x).float().softmax(dim=-1)
        weights, experts = probs.topk(self.top_k, dim=-1)
        return experts, weights / weights.sum(dim=-1, keepdim=True)

    def _grouped(self, x: Tensor, w: Tensor, offs: Tensor) -> Tensor:
        """``x[rows of group e] @ w[e]ᵀ`` for every expert ``e`` (rows sorted by expert, ``offs`` = ends)."""
        if self.use_grouped:
            try:
                return torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)
            except (RuntimeError, NotImplementedError):
                self.use_grouped = False  # unsupported here (dtype/device/alignment): loop from now on
        out = x.new_empty((x.shape[0], w.shape[1]))
        ends = offs.tolist()
        start = 0
        for e, end in enumerate(ends):
            if end > start:
                out[start:end] = x[start:end] @ w[e].t()
            start = end
        return out

    def forward(self, x: Tensor) -> Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        n = x2.shape[0]
        experts, weights = self.route(x2)
        flat = experts.reshape(-1)
        order = flat.argsort(stable=True)
        sorted_experts = flat[order]
        token = order // self.top_k
        counts = torch.zeros(self.num_experts, device=x.device, dtype=torch.int32)
        counts.scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
        offs = counts.cumsum(0, dtype=torch.int32)
        h = self._grouped(x2[token], self.w_up, offs)
        if self.b_up is not None:
            h = h + self.b_up[sorted_experts]
        if self.gated:
            gate, up = h.split(self.width, dim=-1)
            h = self.act(gate) * up
        else:
            h = self.act(h)
        y = self._grouped(h, self.w_down, offs)
        if self.b_down is not None:
            y = y + self.b_down[sorted_experts]
        y = y * weights.reshape(-1)[order, None].to(y.dtype)
        out = torch.zeros((n, shape[-1]), device=x.device, dtype=y.dtype).index_add_(0, token, y)
        if self.shared is not None:
            out = out + self.shared(x2)
        return out.reshape(shape)
