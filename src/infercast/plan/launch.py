"""Ready-to-run launch commands for a chosen unit: vLLM, SGLang or TensorRT-LLM flags for TP/EP/PP and attention
data parallelism, max running
requests, chunk budget, memory fraction and number formats (flag names from each engine's server docs:
``vllm serve --help``, ``python -m sglang.launch_server --help``, ``trtllm-serve --help``)."""

from __future__ import annotations

import re

from infercast.plan.candidates import Candidate
from infercast.specs.catalog import get_hardware
from infercast.specs.engine import get_engine
from infercast.specs.model import ModelSpec

_HF = re.compile(r"huggingface\.co/([^/\s]+/[^/\s]+)")
_FP8 = {"fp8"}
"""Schemes the engines quantise on load; others (int4, nvfp4, ...) need a pre-quantised checkpoint."""


def hf_repo(model: ModelSpec) -> str:
    """The Hugging Face repo the catalog cites for ``model`` (its id when none is cited)."""
    match = _HF.search(model.source or "")
    return match.group(1) if match else model.id


def _role_flags(engine: str, role: str | None) -> list[str]:
    if role is None:
        return []
    if engine.split("-")[0] == "vllm":  # vllm and its later-release presets (vllm-0.14)
        return ["--kv-transfer-config", '\'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\'']
    if engine == "sglang":
        return ["--disaggregation-mode", role]
    return []


def engine_command(model: ModelSpec, c: Candidate, tp: int, role: str | None = None) -> str:
    """One server process of ``c`` (``role``: prefill / decode for a disaggregated unit)."""
    eng = get_engine(c.engine).for_hardware(get_hardware(c.gpu), tp)
    repo = hf_repo(model)
    seqs = c.max_num_seqs or eng.max_num_seqs
    chunk = c.max_num_batched_tokens or eng.max_num_batched_tokens
    quant = c.precision in _FP8
    kv_fp8 = (c.kv_precision or "") == "fp8"
    if c.engine == "sglang":
        args = [
            "python -m sglang.launch_server",
            "--model-path",
            repo,
            "--tp-size",
            str(tp),
            "--max-running-requests",
            str(seqs),
            "--chunked-prefill-size",
            str(chunk),
            "--mem-fraction-static",
            f"{eng.kv_fraction:g}",
        ]
        args += ["--ep-size", str(c.ep)] if c.ep > 1 else []
        args += ["--dp-size", str(c.attention_dp), "--enable-dp-attention"] if c.attention_dp > 1 else []
        args += ["--pp-size", str(c.pp)] if c.pp > 1 else []
        args += ["--quantization", "fp8"] if quant else []
        args += ["--kv-cache-dtype", "fp8_e4m3"] if kv_fp8 else []
    elif c.engine == "trtllm":
        args = [
            "trtllm-serve",
            repo,
            "--tp_size",
            str(tp),
            "--max_batch_size",
            str(seqs),
            "--max_num_tokens",
            str(chunk),
            "--kv_cache_free_gpu_memory_fraction",
            f"{eng.kv_fraction:g}",
        ]
        args += ["--ep_size", str(c.ep)] if c.ep > 1 else []
        args += ["--pp_size", str(c.pp)] if c.pp > 1 else []
        # attention DP has no trtllm-serve flag: it is `enable_attention_dp: true` in the --extra_llm_api_options YAML
        args += ["--extra_llm_api_options", "attention_dp.yaml"] if c.attention_dp > 1 else []
    else:
        args = [
            "vllm serve",
            repo,
            "--tensor-parallel-size",
            str(tp),
            "--max-num-seqs",
            str(seqs),
            "--max-num-batched-tokens",
            str(chunk),
            "--gpu-memory-utilization",
            f"{eng.kv_fraction:g}",
            "--enable-chunked-prefill",
        ]
        args += ["--enable-expert-parallel"] if c.ep > 1 else []
        args += ["--data-parallel-size", str(c.attention_dp)] if c.attention_dp > 1 else []
        args += ["--pipeline-parallel-size", str(c.pp)] if c.pp > 1 else []
        args += ["--quantization", "fp8"] if quant else []
        args += ["--kv-cache-dtype", "fp8"] if kv_fp8 else []
    return " ".join(args + _role_flags(c.engine, role))


def launch_commands(model: ModelSpec, c: Candidate, replicas: int) -> list[str]:
    """Comment lines and commands that start ``replicas`` units of ``c``."""
    lines = [f"# {replicas} x [{c.label}] ({replicas * c.gpus} GPUs); one command per server process"]
    if c.precision not in _FP8 | {"bf16", "fp16", "fp32"}:
        lines.append(f"# {c.precision}: serve a checkpoint already quantised to this format")
    if c.engine == "trtllm" and (c.precision in _FP8 or c.kv_precision == "fp8"):
        lines.append("# TensorRT-LLM: fp8 weights/KV come from an fp8-quantised checkpoint (ModelOpt)")
    if c.disaggregated:
        lines.append(
            f"# prefill pool: {c.prefill * replicas} instance(s); decode pool: {c.decode * replicas}; "
            "route requests through the engine's disaggregation proxy"
        )
        lines.append(engine_command(model, c, c.tp, "prefill"))
        lines.append(engine_command(model, c, c.decode_tp or c.tp, "decode"))
    else:
        lines.append(engine_command(model, c, c.tp))
        if replicas > 1:
            lines.append(f"# behind a load balancer (round robin) over the {replicas} replicas")
    return lines
