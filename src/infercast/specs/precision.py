"""Number formats and the named quantization schemes users know.

Weights, activations (the format GEMMs compute in) and the KV cache are separate choices: W4A16
streams 4-bit weights but multiplies at the 16-bit tensor-core rate; W8A8-fp8 multiplies at the fp8
rate, which only chips with fp8 units have.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from infercast.errors import InfercastError, unknown_choice

if TYPE_CHECKING:
    from infercast.specs.hardware import HardwareSpec


@dataclass(frozen=True)
class NumberFormat:
    """An element format, with any block scales counted into its storage cost."""

    name: str
    bits: float
    """Payload bits per element."""
    block_size: int | None = None
    """Elements sharing one scale (and zero point); None for per-tensor/per-channel scales (negligible)."""
    scale_bits: float = 0.0
    """Bits of scale + zero point stored per block."""
    description: str = ""

    @property
    def bytes_per_element(self) -> float:
        """Storage bytes per element including block scales."""
        overhead = self.scale_bits / self.block_size if self.block_size else 0.0
        return (self.bits + overhead) / 8.0


# Sources for block layouts:
# - AWQ/GPTQ int4: group size 128, one fp16 scale and one 4-bit zero point per group
#   (AutoAWQ/GPTQ packed format; vLLM awq/gptq loaders).
# - NVFP4: 16-element blocks with an FP8 (E4M3) scale (NVIDIA Blackwell NVFP4 format, TensorRT Model Optimizer).
# - MXFP4: 32-element blocks with an 8-bit E8M0 shared exponent (OCP Microscaling Formats spec v1.0).
# - INT4 group 32 (Kimi K2-Thinking / K2.5 native INT4): compressed-tensors pack-quantized, symmetric, group_size
#   32, one bf16 scale per group (Kimi-K2.5 config.json quantization_config; ROCm/ATOM recipes/Kimi-K2.5.md).
FORMATS: dict[str, NumberFormat] = {
    f.name: f
    for f in [
        NumberFormat("fp32", 32, description="IEEE single precision"),
        NumberFormat("bf16", 16, description="bfloat16"),
        NumberFormat("fp16", 16, description="IEEE half precision"),
        NumberFormat("fp8", 8, description="FP8 E4M3 with per-tensor/channel (or 128x128 block) scales"),
        NumberFormat("int8", 8, description="INT8 with per-channel/per-token scales"),
        NumberFormat(
            "int4", 4, block_size=128, scale_bits=16 + 4, description="INT4, group 128, fp16 scale + 4-bit zero"
        ),
        NumberFormat("int4-g32", 4, block_size=32, scale_bits=16, description="INT4 symmetric, group 32, bf16 scale"),
        NumberFormat("nvfp4", 4, block_size=16, scale_bits=8, description="NVFP4: E2M1, 16-element blocks, E4M3 scale"),
        NumberFormat("mxfp4", 4, block_size=32, scale_bits=8, description="MXFP4: E2M1, 32-element blocks, E8M0 scale"),
    ]
}

LOGIT_BYTES = FORMATS["fp32"].bytes_per_element
"""Bytes per sampler logit: vLLM, SGLang and TensorRT-LLM upcast the LM-head output to float32 before sampling."""

KV_FORMATS = ("bf16", "fp16", "fp8", "int8", "fp32")
"""Formats the KV cache may be stored in (engines support fp8/int8 KV with per-tensor or per-token scales)."""

SIXTEEN_BIT = ("bf16", "fp16")


@dataclass(frozen=True)
class PrecisionScheme:
    """A named quantization recipe: which format each tensor class uses and which peak GEMMs run at."""

    name: str
    description: str
    weights: str
    """Format of dense linear-layer weights (attention projections, dense FFN, shared experts)."""
    expert_weights: str
    """Format of routed MoE expert weights."""
    compute: str
    """Tensor-core rate GEMMs run at: bf16, fp16, fp8, int8, fp4, or 'w16' (16-bit, bf16 or fp16 as the chip has)."""
    embeddings: str = "bf16"
    """Embedding table and LM head: kept in 16 bits by AWQ/GPTQ/fp8 recipes (vLLM, TensorRT-LLM Model Optimizer)."""
    activations: str = "bf16"
    """Format of activation tensors moved between kernels."""
    kv_default: str = "bf16"

    @property
    def weight_format(self) -> NumberFormat:
        return FORMATS[self.weights]

    @property
    def expert_weight_format(self) -> NumberFormat:
        return FORMATS[self.expert_weights]

    @property
    def embedding_format(self) -> NumberFormat:
        return FORMATS[self.embeddings]

    @property
    def activation_format(self) -> NumberFormat:
        return FORMATS[self.activations]

    @property
    def weight_only(self) -> bool:
        """True when weights are narrower than the compute format (dequantized in the kernel)."""
        return self.compute == "w16" and self.weights not in SIXTEEN_BIT

    def compute_key(self, hardware: HardwareSpec) -> str:
        """The peak-throughput key of ``hardware`` that this scheme's GEMMs run at, or a clear error."""
        if self.compute == "w16":
            for key in SIXTEEN_BIT:
                if key in hardware.peak_flops:
                    return key
            raise InfercastError(f"{hardware.id} has no 16-bit tensor-core rate in its spec", field="precision")
        if self.compute in hardware.peak_flops:
            return self.compute
        runnable = schemes_for(hardware)
        reason = {
            "fp8": "has no FP8 tensor cores (Hopper, Ada and newer do)",
            "fp4": "has no FP4 tensor cores (Blackwell does)",
            "bf16": "has no BF16 tensor cores (use fp16)",
            "int8": "has no INT8 tensor-core rate",
        }.get(self.compute, f"has no {self.compute} rate")
        raise InfercastError(
            f"{self.name!r} computes in {self.compute} but {hardware.id} {reason}; "
            f"runnable there: {', '.join(runnable)}",
            field="precision",
            allowed=runnable,
        )


SCHEMES: dict[str, PrecisionScheme] = {
    s.name: s
    for s in [
        PrecisionScheme(
            "fp32",
            "FP32 weights and compute on CUDA cores (reference and CPU test runs)",
            "fp32",
            "fp32",
            "fp32",
            embeddings="fp32",
            activations="fp32",
            kv_default="fp32",
        ),
        PrecisionScheme("bf16", "BF16 weights and compute", "bf16", "bf16", "bf16"),
        PrecisionScheme(
            "fp16",
            "FP16 weights and compute",
            "fp16",
            "fp16",
            "fp16",
            embeddings="fp16",
            activations="fp16",
            kv_default="fp16",
        ),
        PrecisionScheme("fp8", "W8A8 FP8: FP8 weights and FP8 GEMMs", "fp8", "fp8", "fp8"),
        PrecisionScheme("int8", "W8A8 INT8 (SmoothQuant-style): INT8 weights and INT8 GEMMs", "int8", "int8", "int8"),
        PrecisionScheme("w8a16", "INT8 weight-only: INT8 weights, 16-bit GEMMs", "int8", "int8", "w16"),
        PrecisionScheme("int4", "W4A16 (AWQ/GPTQ, group 128): INT4 weights, 16-bit GEMMs", "int4", "int4", "w16"),
        PrecisionScheme("nvfp4", "W4A4 NVFP4: FP4 weights and FP4 GEMMs (Blackwell)", "nvfp4", "nvfp4", "fp4"),
        PrecisionScheme(
            "mxfp4", "MXFP4 weight-only: MXFP4 weights for all linear layers, 16-bit GEMMs", "mxfp4", "mxfp4", "w16"
        ),
        PrecisionScheme(
            "mxfp4-moe",
            "gpt-oss release format: MXFP4 routed experts, BF16 attention, 16-bit GEMMs",
            "bf16",
            "mxfp4",
            "w16",
        ),
        PrecisionScheme(
            "int4-moe",
            "Kimi K2.5 release format: INT4 (group 32) routed experts, BF16 attention/shared/dense, 16-bit GEMMs",
            "bf16",
            "int4-g32",
            "w16",
        ),
    ]
}

ALIASES: dict[str, str] = {
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "w8a8": "int8",
    "w8a8-int8": "int8",
    "w8a8-fp8": "fp8",
    "w4a16": "int4",
    "awq": "int4",
    "gptq": "int4",
    "fp4": "nvfp4",
    "w4a4": "nvfp4",
}


def get_scheme(name: str) -> PrecisionScheme:
    """Look up a precision scheme by name or alias (case-insensitive)."""
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in SCHEMES:
        raise unknown_choice("precision", str(name), list(SCHEMES) + list(ALIASES))
    return SCHEMES[key]


def get_kv_format(name: str) -> NumberFormat:
    """Look up a KV-cache format (bf16, fp16, fp8, int8, fp32)."""
    key = str(name).strip().lower()
    key = {"float16": "fp16", "bfloat16": "bf16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}.get(key, key)
    if key not in KV_FORMATS:
        raise unknown_choice("kv_precision", str(name), KV_FORMATS)
    return FORMATS[key]


def schemes_for(hardware: HardwareSpec) -> list[str]:
    """Names of the schemes whose GEMMs the chip can run."""
    out = []
    for scheme in SCHEMES.values():
        if scheme.compute == "w16":
            ok = any(k in hardware.peak_flops for k in SIXTEEN_BIT)
        else:
            ok = scheme.compute in hardware.peak_flops
        if ok:
            out.append(scheme.name)
    return out
