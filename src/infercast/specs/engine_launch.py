"""The engine as launched: the settings a real launch decides (batch limits, token budget, chunking, KV format and
paging, memory fraction, CUDA graphs, capacity policy, async scheduling, prefix caching), each with its source.

Two ways in: the engine preset's release defaults (``specs/data/engines.yaml``, cited per value there) as
:meth:`EngineLaunch.of` reads them off a resolved :class:`~infercast.specs.deployment.Deployment`, and the user's
own launch (a ``vllm serve`` or ``python -m sglang.launch_server`` / ``trtllm-serve`` command line, or a
TensorRT-LLM ``extra_llm_api_options`` YAML file) that :func:`parse_launch` reads into a :class:`UserLaunch`,
whose values :meth:`UserLaunch.apply` writes onto the preset (so there is one engine object, resolved once)."""

from __future__ import annotations

import itertools
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from infercast.errors import InfercastError
from infercast.files import is_file, load_yaml

if TYPE_CHECKING:
    from infercast.specs.deployment import Deployment
    from infercast.specs.engine import EngineSpec

USER = "user launch"


@dataclass(frozen=True)
class Setting:
    """One launch setting: its value and where it came from."""

    value: Any
    source: str


@dataclass(frozen=True)
class EngineLaunch:
    """What a launch of ``engine`` decides, each value with its source (release default, GPU tier, checkpoint,
    user launch). Build it with :meth:`of`."""

    engine: str
    release: str
    settings: dict[str, Setting]

    @classmethod
    def of(cls, dep: Deployment, base: EngineSpec | None = None, prefix_caching: bool = True) -> EngineLaunch:
        """The settings ``dep`` runs with; ``base``: the preset before GPU tiers (to name a tier's values);
        ``prefix_caching``: False where the run turned it off (simulate --no-prefix-caching)."""
        eng = dep.engine
        src = eng.sources
        rel = f"release default ({eng.release or eng.id})"

        def cite(name: str, fallback: str = "") -> str:
            given = src.get(name, "")
            if given.startswith(USER):
                return given
            text = given or src.get("all", "") or fallback or "not verified"
            return f"{rel}: {text}"

        def tiered(name: str) -> str:
            if (
                base is not None
                and getattr(base, name) != getattr(eng, name)
                and not src.get(name, "").startswith(USER)
            ):
                return f"GPU tier ({dep.hardware.id}): {src.get(name) or src.get('all') or 'not verified'}"
            return cite(name)

        chunked = eng.scheduler != "inflight"
        s = {
            "max_num_seqs": Setting(eng.max_num_seqs, tiered("max_num_seqs")),
            "max_num_batched_tokens": Setting(eng.max_num_batched_tokens, tiered("max_num_batched_tokens")),
            "chunked_prefill": Setting(chunked, cite("scheduler")),
            "chunk_size": Setting(eng.max_num_batched_tokens if chunked else None, tiered("max_num_batched_tokens")),
            "scheduler": Setting(eng.scheduler, cite("scheduler")),
            "kv_dtype": Setting(dep.kv_format.name, _kv_source(dep)),
            "block_size": Setting(eng.block_size, cite("block_size")),
            "memory_fraction": Setting(f"{eng.kv_fraction:g} of {eng.kv_fraction_of}", cite("kv_fraction")),
            "cuda_graphs": _graphs(eng, cite),
            "capacity_policy": Setting(
                "GUARANTEED_NO_EVICT" if eng.scheduler == "inflight" else "preempt (recompute)", cite("scheduler")
            ),
            "async_scheduling": Setting(eng.overlap_scheduler, cite("overlap_scheduler", src.get("description", ""))),
            "prefix_caching": Setting(
                prefix_caching,
                cite(
                    "prefix_caching",
                    "on (vLLM V1 enable_prefix_caching, SGLang radix cache, TensorRT-LLM enable_block_reuse)",
                )
                if prefix_caching
                else "given (--no-prefix-caching)",
            ),
        }
        s.update(_family_settings(eng, cite))
        return cls(eng.id, eng.release, s)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"engine", "release", name: {"value", "source"}}``."""
        out: dict[str, Any] = {"engine": self.engine, "release": self.release}
        out.update({k: {"value": v.value, "source": v.source} for k, v in self.settings.items()})
        return out

    def lines(self) -> list[str]:
        """A compact text block: one 'name value (source)' line per setting, sources cut to 70 characters."""
        out = [f"Engine settings: {self.engine}" + (f" ({self.release})" if self.release else "")]
        for k, v in self.settings.items():
            source = v.source.replace(f"release default ({self.release}): ", "release default: ")
            source = source if len(source) <= 72 else source[:69] + "..."
            out.append(f"  {k:<22} {v.value!s:<19} {source}")
        return out


def _graphs(eng: EngineSpec, cite: Any) -> Setting:
    """Which steps replay as CUDA graphs: 'off', the scope ('tokens', 'decode') up to the launch's largest size, or
    the scope alone (up to the cost profile's ``graph_max_tokens``, the release default)."""
    if eng.graph_max_tokens is not None:
        value = "off" if eng.graph_max_tokens == 0 else f"{eng.cuda_graphs} <= {eng.graph_max_tokens}"
        return Setting(value, cite("graph_max_tokens"))
    return Setting(eng.cuda_graphs if eng.cuda_graph_bytes > 0 else "off", cite("cuda_graphs"))


def _family_settings(eng: EngineSpec, cite: Any) -> dict[str, Setting]:
    """Settings of one engine family (vLLM's MoE kernel; SGLang's request polling; TensorRT-LLM's prompt
    holding), shown for that family's presets or wherever a launch set them."""
    out: dict[str, Setting] = {}
    if eng.moe_backend:
        out["moe_backend"] = Setting(eng.moe_backend, cite("moe_backend"))
    if eng.id.startswith("sglang") or eng.recv_interval != 1:
        polls = cite("recv_interval", "1: new requests are polled every step")
        out["recv_interval"] = Setting(eng.recv_interval, polls)
    if eng.id.startswith("trtllm") or eng.adp_balance_iters or eng.batch_wait_iters:
        out["adp_balance"] = Setting(
            f"{eng.adp_balance_iters} steps" if eng.adp_balance_iters else "off", cite("adp_balance_iters", "off")
        )
        waits = eng.batch_wait_iters and eng.batch_wait_ratio
        out["batch_wait"] = Setting(
            f"{eng.batch_wait_iters} steps / {eng.batch_wait_ratio:g} of the budget" if waits else "off",
            cite("batch_wait_iters", "no batch waiting"),
        )
    return out


def _kv_source(dep: Deployment) -> str:
    src = dep.engine.sources.get("kv_dtype", "")
    if src.startswith(USER):
        return src
    return {
        "given": "given (--kv-precision)",
        "checkpoint": "checkpoint (config.json quantization_config)",
        "engine default": f"release default: {dep.engine.sources.get('fp8_kv_schemes', 'not verified')}",
    }.get(dep.kv_source, "model dtype (KV dtype 'auto')")


@dataclass(frozen=True)
class UserLaunch:
    """A parsed launch: the engine family, engine fields to override (field -> (value, flag)), the KV format,
    tensor parallelism and model it names, and warnings about what it could not read."""

    engine: str
    overrides: dict[str, tuple[Any, str]] = field(default_factory=dict)
    kv_precision: str | None = None
    tp: int | None = None
    model: str | None = None
    warnings: tuple[str, ...] = ()
    spec_tokens: int | None = None
    """Draft tokens per step of the launch's speculative decoding (None: none)."""
    spec_method: str | None = None
    """How it drafts, as the launch names it (TensorRT-LLM decoding_type, vLLM method, SGLang algorithm)."""
    ep: int | None = None
    """Expert-parallel ways the launch runs an MoE model's experts over (None: the launch does not say)."""
    attention_dp: int | None = None
    """Attention data-parallel ranks of the launch (None: the launch does not say; ``tp`` is then per rank)."""

    @property
    def drafts_with_mtp(self) -> bool:
        """Whether the drafts come from the model's own multi-token-prediction layers (MTP; SGLang calls it NEXTN)."""
        method = (self.spec_method or "").lower()
        return "mtp" in method or method == "nextn"

    def apply(self, eng: EngineSpec) -> EngineSpec:
        """``eng`` with the launch's values (GPU tiers no longer override them), sources naming the flag."""
        if not self.overrides:
            return eng
        fields = {k: v for k, (v, _) in self.overrides.items()}
        tiers = tuple(
            t.model_copy(update={k: None for k in fields if k in type(t).model_fields}) for t in eng.gpu_tiers
        )
        sources = {**eng.sources, **{k: f"{USER}: {flag}" for k, (_, flag) in self.overrides.items()}}
        if fields.get("graph_max_tokens") == 0:  # no graphs captured: none of their memory either
            fields["cuda_graph_bytes"] = 0.0
            sources["cuda_graphs"] = sources["graph_max_tokens"]
        if self.kv_precision:
            sources["kv_dtype"] = f"{USER}: kv-cache dtype {self.kv_precision}"
        return eng.model_copy(update={**fields, "gpu_tiers": tiers, "sources": sources, "id": eng.id})


def _text(flag: str, text: Any) -> str:
    return str(text)


def _int(flag: str, text: Any, minimum: int = 1) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        wanted = "an integer" if minimum == 1 else f"an integer >= {minimum}"
        raise InfercastError(f"{flag} must be {wanted}, got {text!r}", field="launch") from None
    if value < minimum:
        raise InfercastError(f"{flag} must be >= {minimum}, got {value}", field="launch")
    return value


def _count(flag: str, text: Any) -> int:
    return _int(flag, text, minimum=0)


def _largest(flag: str, text: Any) -> int:
    """The largest of a comma-separated list of sizes (vLLM ``--cuda-graph-sizes 1,2,4,...,512``)."""
    sizes = [_int(flag, part) for part in str(text).replace(" ", "").split(",") if part]
    if not sizes:
        raise InfercastError(f"{flag} must list positive integers, got {text!r}", field="launch")
    return max(sizes)


def _largest_listed(key: str, sizes: Any) -> int:
    """The largest of a YAML or JSON list of sizes (capture token counts, batch sizes); one line naming ``key``
    where it is not a non-empty list of positive integers."""
    if not (isinstance(sizes, list) and sizes):
        raise InfercastError(f"{key} must be a list of positive integers, got {sizes!r}", field="launch")
    return max(_int(key, n) for n in sizes)


def _fraction(flag: str, text: Any, zero: bool = False) -> float:
    span = "[0, 1]" if zero else "(0, 1]"
    try:
        value = float(str(text).strip())
    except ValueError:
        raise InfercastError(f"{flag} must be a number in {span}, got {text!r}", field="launch") from None
    low = value >= 0 if zero else value > 0
    if not low or value > 1:
        raise InfercastError(f"{flag} must be in {span}, got {text!r}", field="launch")
    return value


def _kv(flag: str, text: Any) -> str | None:
    name = str(text).strip().lower()
    if name == "auto":
        return None
    if name.startswith("fp8"):
        return "fp8"
    if name in ("bf16", "bfloat16", "fp16", "float16", "half", "int8"):
        return {"bfloat16": "bf16", "float16": "fp16", "half": "fp16"}.get(name, name)
    raise InfercastError(
        f"{flag} must be auto, fp8, fp8_e4m3, fp8_e5m2, bf16, fp16 or int8, got {text!r}", field="launch"
    )


def _vllm_spec(flag: str, text: Any) -> tuple[int, str | None]:
    """vLLM ``--speculative-config`` (JSON): its ``num_speculative_tokens`` (the draft tokens per step) and
    ``method``."""
    try:
        config = json.loads(str(text))
    except json.JSONDecodeError:
        config = None
    if not isinstance(config, dict) or "num_speculative_tokens" not in config:
        raise InfercastError(f"{flag} must be JSON with num_speculative_tokens, got {text!r}", field="launch")
    method = config.get("method")
    return _int(f"{flag} num_speculative_tokens", config["num_speculative_tokens"]), method and str(method)


def _vllm_compilation(flag: str, text: Any) -> dict[str, Any]:
    """vLLM ``--compilation-config`` / ``-O`` (JSON, or a bare optimisation level): read by :func:`_vllm_graphs`."""
    if str(text).isdigit():
        return {"level": int(str(text))}
    try:
        config = json.loads(str(text))
    except json.JSONDecodeError:
        config = None
    if not isinstance(config, dict):
        raise InfercastError(f"{flag} must be a JSON object, got {text!r}", field="launch")
    return config


VLLM_GRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
"""vLLM ``CompilationConfig.cudagraph_mode`` (CUDAGraphMode, vllm/config/compilation.py, 0.11+; default
FULL_AND_PIECEWISE)."""


def _vllm_graphs(found: dict[str, tuple[Any, str]], unknown: list[str]) -> None:
    """vLLM ``--compilation-config``'s CUDA-graph keys: ``cudagraph_mode`` NONE launches every step eagerly,
    FULL_DECODE_ONLY replays decode-only steps alone (mixed and prompt steps run eagerly: the 'decode' scope), the
    others replay any step up to the capture size; ``max_cudagraph_capture_size`` or the largest of
    ``cudagraph_capture_sizes`` is that size. Other keys are named as not modelled."""
    entry = found.pop("compilation", None)
    if entry is None:
        return
    config, text = entry
    for key in config:
        if key not in ("cudagraph_mode", "max_cudagraph_capture_size", "cudagraph_capture_sizes"):
            unknown.append(f"--compilation-config {key}")
    sizes = config.get("cudagraph_capture_sizes")
    if "max_cudagraph_capture_size" in config:
        size = _count("--compilation-config max_cudagraph_capture_size", config["max_cudagraph_capture_size"])
        found["graph_max_tokens"] = (size, text)
    elif sizes is not None:
        found["graph_max_tokens"] = (_largest_listed("cudagraph_capture_sizes", sizes), text)
    if "cudagraph_mode" not in config:
        return
    mode = str(config["cudagraph_mode"]).upper()
    if mode not in VLLM_GRAPH_MODES:
        raise InfercastError(
            f"cudagraph_mode must be one of {', '.join(VLLM_GRAPH_MODES)}, got {config['cudagraph_mode']!r}",
            field="launch",
        )
    if mode == "NONE":
        found["graph_max_tokens"] = (0, text)
    elif mode == "FULL_DECODE_ONLY":
        found["cuda_graphs"] = ("decode", text)


def _sglang_drafts(flag: str, text: Any) -> int:
    """SGLang ``--speculative-num-draft-tokens`` counts the step's last verified token too: drafts are one fewer."""
    return _int(flag, text, minimum=2) - 1


# flag -> (engine field or special key, converter); None: a flag with no bearing on speed, read and dropped
_VLLM: dict[str, Any] = {
    "--max-num-seqs": ("max_num_seqs", _int),
    "--max-num-batched-tokens": ("max_num_batched_tokens", _int),
    "--gpu-memory-utilization": ("kv_fraction", _fraction),
    "--block-size": ("block_size", _int),
    "--kv-cache-dtype": ("kv", _kv),
    "--tensor-parallel-size": ("tp", _int),
    "-tp": ("tp", _int),
    "--async-scheduling": ("overlap_scheduler", True),
    "--no-async-scheduling": ("overlap_scheduler", False),
    "--enable-chunked-prefill": ("scheduler", "chunked"),
    "--enable-prefix-caching": None,
    "--no-enable-prefix-caching": ("prefix_off", True),
    "--model": ("model", _text),
    "--quantization": ("quantization", _text),
    "--speculative-config": ("spec_config", _vllm_spec),
    "--max-cudagraph-capture-size": ("graph_max_tokens", _count),
    "--cuda-graph-sizes": ("graph_max_tokens", _largest),
    "--enforce-eager": ("graph_max_tokens", 0),
    "--compilation-config": ("compilation", _vllm_compilation),
    "-O": ("compilation", _vllm_compilation),
    "--enable-expert-parallel": ("ep_all", True),
    "-ep": ("ep_all", True),
    "--data-parallel-size": ("dp", _int),
    "-dp": ("dp", _int),
}
_SGLANG: dict[str, Any] = {
    "--max-running-requests": ("max_num_seqs", _int),
    "--chunked-prefill-size": ("max_num_batched_tokens", _int),
    "--max-prefill-tokens": ("prefill_cap", _int),
    "--mem-fraction-static": ("kv_fraction", _fraction),
    "--page-size": ("block_size", _int),
    "--kv-cache-dtype": ("kv", _kv),
    "--tp-size": ("tp", _int),
    "--tp": ("tp", _int),
    "--enable-mixed-chunk": ("scheduler", "chunked"),
    "--scheduler-recv-interval": ("recv_interval", _int),
    "--model-path": ("model", _text),
    "--model": ("model", _text),
    "--disable-radix-cache": ("prefix_off", True),
    "--disable-overlap-schedule": ("overlap_scheduler", False),
    "--cuda-graph-max-bs": ("graph_max_tokens", _count),
    "--cuda-graph-bs": ("graph_max_tokens", _largest),
    "--disable-cuda-graph": ("graph_max_tokens", 0),
    "--enable-piecewise-cuda-graph": ("sglang_piecewise", True),
    "--disable-piecewise-cuda-graph": ("sglang_piecewise", False),
    "--piecewise-cuda-graph-max-tokens": ("sglang_piecewise_tokens", _count),
    "--piecewise-cuda-graph-tokens": ("sglang_piecewise_tokens", _largest),
    "--quantization": ("quantization", _text),
    "--speculative-num-draft-tokens": ("spec_tokens", _sglang_drafts),
    "--speculative-num-steps": ("spec_steps", _int),
    "--speculative-algorithm": ("spec_method", _text),
    "--speculative-eagle-topk": ("spec_topk", _int),
    "--ep-size": ("ep", _int),
    "--ep": ("ep", _int),
    "--expert-parallel-size": ("ep", _int),
    "--dp-size": ("dp_of_tp", _int),
    "--dp": ("dp_of_tp", _int),
    "--data-parallel-size": ("dp_of_tp", _int),
    "--enable-dp-attention": ("dp_attention", True),
}
_TRTLLM_SERVE: dict[str, Any] = {
    "--max_batch_size": ("max_num_seqs", _int),
    "--max_num_tokens": ("max_num_batched_tokens", _int),
    "--kv_cache_free_gpu_memory_fraction": ("kv_fraction", _fraction),
    "--tp_size": ("tp", _int),
    "--ep_size": ("ep", _int),
    "--extra_llm_api_options": ("yaml", _text),
    "--config": ("yaml", _text),  # the newer name of --extra_llm_api_options (trtllm-serve, 1.3+)
}
_NO_SPEED = {
    "--host",
    "--port",
    "--served-model-name",
    "--trust-remote-code",
    "--dtype",
    "--max-model-len",
    "--seed",
    "--disable-log-requests",
    "--api-key",
    "--download-dir",
    "--tokenizer",
    "--context-length",
    "--log-level",
    "--backend",
    "--max_seq_len",
    "--enable-log-requests",
    "--uvicorn-log-level",
}
_SWITCHES = {
    "--async-scheduling",
    "--no-async-scheduling",
    "--enable-chunked-prefill",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--disable-radix-cache",
    "--disable-overlap-schedule",
    "--enforce-eager",
    "--disable-cuda-graph",
    "--enable-mixed-chunk",
    "--trust-remote-code",
    "--disable-log-requests",
    "--enable-log-requests",
    "--enable-expert-parallel",
    "-ep",
    "--enable-dp-attention",
    "--enable-piecewise-cuda-graph",
    "--disable-piecewise-cuda-graph",
}


_LIST_FLAGS = {"--cuda-graph-sizes", "--cuda-graph-bs", "--piecewise-cuda-graph-tokens"}
"""Flags that take several values (space- or comma-separated)."""


def _env_flag(name: str, text: str) -> bool:
    """A vLLM boolean environment variable (vllm/envs.py reads it as an integer: 0 or 1)."""
    if text not in ("0", "1"):
        raise InfercastError(f"{name} must be 0 or 1, got {text!r}", field="launch")
    return text == "1"


VLLM_MOE_ENV = ("VLLM_MXFP4_USE_MARLIN", "VLLM_USE_FLASHINFER_MOE_FP8", "VLLM_MOE_USE_DEEP_GEMM", "VLLM_USE_DEEP_GEMM")
"""vLLM environment variables that pick a fused-MoE kernel (``EngineSpec.moe_backend``): Marlin for MXFP4 experts
(``get_mxfp4_backend``, quantization/mxfp4.py), Triton for block-FP8 experts once FlashInfer's and DeepGEMM's are
both turned off (``select_fp8_moe_backend``, fused_moe/oracle/fp8.py)."""


def _vllm_environment(env: dict[str, str], found: dict[str, tuple[Any, str]], unknown: list[str]) -> None:
    """The MoE kernel a vLLM launch's environment picks (:data:`VLLM_MOE_ENV`); other variables go to ``unknown``."""
    flags = {name: _env_flag(name, env[name]) for name in VLLM_MOE_ENV if name in env}
    unknown += [f"{k}={v}" for k, v in env.items() if k not in flags]
    picked = []
    if flags.get("VLLM_MXFP4_USE_MARLIN"):
        picked.append(("marlin", "VLLM_MXFP4_USE_MARLIN=1"))
    deep_gemm = next((k for k in ("VLLM_MOE_USE_DEEP_GEMM", "VLLM_USE_DEEP_GEMM") if flags.get(k) is False), None)
    if flags.get("VLLM_USE_FLASHINFER_MOE_FP8") is False and deep_gemm:
        picked.append(("triton", f"VLLM_USE_FLASHINFER_MOE_FP8=0 {deep_gemm}=0"))
    named = " ".join(text for _, text in picked).split()
    defaults = {"VLLM_MXFP4_USE_MARLIN": False, "VLLM_MOE_USE_DEEP_GEMM": True, "VLLM_USE_DEEP_GEMM": True}
    unknown += [
        f"{k}={env[k]}"
        for k, on in flags.items()
        if defaults.get(k) != on and not any(word.startswith(f"{k}=") for word in named)
    ]
    if picked:
        found["moe_backend"] = picked[0]
    unknown += [text for _, text in picked[1:]]


_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def parse_launch(text: str) -> UserLaunch:
    """Read a launch: a ``vllm serve`` / ``python -m vllm.entrypoints.openai.api_server`` command line, a
    ``python -m sglang.launch_server`` one, a ``trtllm-serve`` one (each optionally after ``NAME=value``
    environment words), or the path of a TensorRT-LLM ``extra_llm_api_options`` YAML file. Unknown flags and
    variables become warnings; bad values a ``launch`` error."""
    text = str(text).strip()
    if not text:
        raise InfercastError("give a launch command line or an extra_llm_api_options YAML path", field="launch")
    if text.endswith((".yaml", ".yml")) and is_file(text):
        return _trtllm_yaml(load_yaml(text, "launch"), text)
    try:
        words = shlex.split(text.replace("\\\n", " "))
    except ValueError as exc:
        raise InfercastError(f"cannot split the command line: {exc}", field="launch") from None
    words = words[1:] if words[:1] == ["env"] else words
    env = list(itertools.takewhile(lambda w: _ENV_WORD.match(w) is not None, words))
    words = words[len(env) :]
    joined = " ".join(words[:4])
    if "sglang" in joined:
        engine, table, rest = "sglang", _SGLANG, words[words.index(next(w for w in words if "sglang" in w)) + 1 :]
    elif "trtllm-serve" in joined:
        engine, table, rest = "trtllm", _TRTLLM_SERVE, words[words.index(next(w for w in words if "trtllm" in w)) + 1 :]
    elif "vllm" in joined:
        engine, table = "vllm", _VLLM
        at = next(i for i, w in enumerate(words) if "vllm" in w)
        rest = words[at + 2 :] if at + 1 < len(words) and words[at + 1] == "serve" else words[at + 1 :]
    else:
        raise InfercastError(
            "not a vllm serve, python -m sglang.launch_server or trtllm-serve command line, nor a YAML file path",
            field="launch",
        )
    return _flags(engine, table, rest, env)


def _flags(engine: str, table: dict[str, Any], words: list[str], env: list[str] | None = None) -> UserLaunch:
    found: dict[str, tuple[Any, str]] = {}
    unknown: list[str] = []
    variables = dict(word.partition("=")[::2] for word in env or [])
    if engine == "vllm":
        _vllm_environment(variables, found, unknown)
    else:
        unknown += list(env or [])
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, inline = word.partition("=")
        if not name.startswith("-"):
            if "model" not in found:
                found["model"] = (word, word)
            i += 1
            continue
        if name in _SWITCHES or (name in table and not callable((table[name] or (None, None))[1])):
            entry = table.get(name)
            if entry is not None:
                found[entry[0]] = (entry[1], name)
            i += 1
            continue
        value = inline if eq else (words[i + 1] if i + 1 < len(words) else None)
        i += 1 if eq else 2
        while name in _LIST_FLAGS and not eq and value and i < len(words) and words[i].isdigit():
            value, i = f"{value},{words[i]}", i + 1  # a space-separated list (vLLM --cuda-graph-sizes 1 2 4)
        if name in _NO_SPEED:
            continue
        if name not in table:
            unknown.append(name)
            if not eq and value is not None and value.startswith("-"):
                i -= 1  # an unknown switch: the next word is a flag of its own
            continue
        if value is None:
            raise InfercastError(f"{name} needs a value", field="launch")
        key, convert = table[name]
        found[key] = (convert(name, value), f"{name} {value}")
    return _launch(engine, found, unknown)


SGLANG_MAX_PREFILL_TOKENS = 16384
"""SGLang ``--max-prefill-tokens`` default (python/sglang/srt/server_args.py, 0.5): tokens of one prefill batch."""


def _prefill_cap(engine: str, found: dict[str, tuple[Any, str]]) -> list[str]:
    """SGLang's prefill batch is capped by both ``--chunked-prefill-size`` and ``--max-prefill-tokens`` (default
    16384): the sglang preset's step budget is the smaller. Returns the notes to print."""
    cap = found.pop("prefill_cap", None)
    chunk = found.get("max_num_batched_tokens")
    if engine != "sglang" or (cap is None and chunk is None):
        return []
    if chunk is None:
        assert cap is not None
        return [f"launch: '{cap[1]}' caps prefill batches only below the GPU's chunk size: give --chunked-prefill-size"]
    limit = cap[0] if cap is not None else SGLANG_MAX_PREFILL_TOKENS
    if limit < chunk[0]:
        flag = cap[1] if cap is not None else f"max_prefill_tokens default {SGLANG_MAX_PREFILL_TOKENS}"
        found["max_num_batched_tokens"] = (limit, f"{chunk[1]}, {flag}")
    return []


def _launch(engine: str, found: dict[str, tuple[Any, str]], unknown: list[str]) -> UserLaunch:
    if "yaml" in found:
        path = found.pop("yaml")[0]
        inner, inner_unknown = _trtllm_yaml_found(load_yaml(path, "launch"), path)
        found = {**inner, **found}
        unknown += inner_unknown
    notes = _prefill_cap(engine, found)
    _vllm_graphs(found, unknown)
    _vllm_capture_default(engine, found)
    _sglang_piecewise(found, notes)
    kv = found.pop("kv", (None, ""))[0]
    tp, ep, attention_dp = _layout(engine, found, notes)
    model = found.pop("model", (None, ""))[0]
    steps = found.pop("spec_steps", (None, ""))[0]
    spec_tokens = found.pop("spec_tokens", (steps, ""))[0]
    method = found.pop("spec_method", None)
    if "spec_config" in found:
        (spec_tokens, named), text = found.pop("spec_config")
        method = (named, text) if named else None
    topk = found.pop("spec_topk", None)
    if topk is not None and topk[0] > 1:
        notes.append(f"launch: '{topk[1]}' drafts a tree; infercast simulates one chain of drafts")
    if method is not None and spec_tokens is None:
        notes.append(f"launch: '{method[1]}' drafts as many tokens as the engine picks: give --spec-tokens")
    notes += [f"launch: '{name}' is not modelled by infercast (the prediction runs without it)" for name in unknown]
    if "quantization" in found:
        notes.append(f"launch: '{found.pop('quantization')[1]}' sets the weight format: give it as --precision")
    if "capacity_policy" in found:
        text = found.pop("capacity_policy")[1]
        notes.append(f"launch: '{text}' is simulated as GUARANTEED_NO_EVICT (requests admitted only with room to end)")
    if "prefix_off" in found:
        notes.append(f"launch: '{found.pop('prefix_off')[1]}' is not applied: simulate --no-prefix-caching does that")
    spec_method = None if method is None else str(method[0])
    return UserLaunch(engine, found, kv, tp, model, tuple(notes), spec_tokens, spec_method, ep, attention_dp)


SGLANG_PIECEWISE_TOKENS = 4096
"""SGLang ``--piecewise-cuda-graph-max-tokens`` default (ServerArgs, python/sglang/srt/server_args.py, 0.5): the
largest step its piecewise CUDA graphs capture when ``--enable-piecewise-cuda-graph`` turns them on."""


def _sglang_piecewise(found: dict[str, tuple[Any, str]], notes: list[str]) -> None:
    """SGLang ``--enable-piecewise-cuda-graph`` (off in 0.5): steps with prompt tokens replay as graphs too, up to
    ``--piecewise-cuda-graph-max-tokens`` (or the largest ``--piecewise-cuda-graph-tokens``); decode batches keep
    their own graphs up to ``--cuda-graph-max-bs``, so the launch's graph limit is the larger of the two."""
    on = found.pop("sglang_piecewise", None)
    sizes = found.pop("sglang_piecewise_tokens", None)
    if on is None or not on[0]:
        if sizes is not None:
            notes.append(f"launch: '{sizes[1]}' sizes piecewise graphs that are off (--enable-piecewise-cuda-graph)")
        return
    tokens, text = sizes if sizes is not None else (SGLANG_PIECEWISE_TOKENS, f"{on[1]} (SGLang's default size)")
    decode = found.get("graph_max_tokens")
    if decode is not None and decode[0] == 0:
        notes.append(f"launch: '{decode[1]}' turns every CUDA graph off: '{on[1]}' has no effect")
        return
    found["cuda_graphs"] = ("tokens", on[1])
    found["graph_max_tokens"] = (max(tokens, decode[0]) if decode else tokens, text)


VLLM_CAPTURE_CAP = 512
"""vLLM's largest default CUDA-graph capture size: min(2 x max_num_seqs x (1 + draft tokens), 512), and at most
max_num_batched_tokens (VllmConfig._set_cudagraph_sizes, vllm/config/vllm.py, 0.11 and later)."""


def _vllm_capture_default(engine: str, found: dict[str, tuple[Any, str]]) -> None:
    """A vLLM launch that sets ``--max-num-seqs`` but no capture size captures up to vLLM's default for it."""
    if engine != "vllm" or "graph_max_tokens" in found or "max_num_seqs" not in found:
        return
    seqs, flag = found["max_num_seqs"]
    drafts = found["spec_config"][0][0] if "spec_config" in found else 0
    size = min(2 * seqs * (1 + drafts), VLLM_CAPTURE_CAP)
    if "max_num_batched_tokens" in found:
        size = min(size, found["max_num_batched_tokens"][0])
    found["graph_max_tokens"] = (size, f"{flag} (vLLM's capture default min(2 x max_num_seqs, 512))")


def _layout(
    engine: str, found: dict[str, tuple[Any, str]], notes: list[str]
) -> tuple[int | None, int | None, int | None]:
    """(tp per attention rank, expert-parallel ways, attention-DP ranks) of a launch, in infercast's terms (None: not
    set). vLLM: ``--data-parallel-size`` N adds N attention ranks of ``--tensor-parallel-size`` GPUs each, and
    ``--enable-expert-parallel`` spreads the experts over all N x TP GPUs (vLLM FusedMoEParallelConfig). SGLang and
    TensorRT-LLM count every GPU in their TP size: attention DP (``--enable-dp-attention --dp N``,
    ``enable_attention_dp``) splits it into N ranks of TP / N (TensorRT-LLM: TP ranks of 1); ``--ep-size`` /
    ``--ep_size`` is the expert-parallel ways."""
    tp = found.pop("tp", (None, ""))[0]
    ep = found.pop("ep", (None, ""))[0]
    every = found.pop("ep_all", None)
    dp = found.pop("dp", (None, ""))[0]
    dp_of_tp = found.pop("dp_of_tp", None)
    dp_attention = found.pop("dp_attention", None)
    if engine == "vllm":
        ranks = dp if dp and dp > 1 else None
        return tp, ((tp or 1) * (ranks or 1) if every else None), ranks
    ranks = None
    if dp_attention and engine == "trtllm" and tp is None:
        notes.append(f"launch: '{dp_attention[1]}' runs every TP GPU as an attention rank: give --attention-dp")
    elif dp_attention:
        ranks = dp_of_tp[0] if dp_of_tp else (tp if engine == "trtllm" else None)
        if ranks is None:
            raise InfercastError("--enable-dp-attention needs --dp (the attention-DP ranks)", field="launch")
        if tp is None or tp % ranks:
            raise InfercastError(
                f"attention DP of {ranks} ranks needs a TP size that {ranks} divides, got {tp}", field="launch"
            )
        tp = tp // ranks
    elif dp_of_tp and dp_of_tp[0] > 1:
        notes.append(f"launch: '{dp_of_tp[1]}' serves {dp_of_tp[0]} data-parallel replicas: give --replicas")
    return tp, ep, ranks


def _share(flag: str, text: Any) -> float:
    return _fraction(flag, text, zero=True)


_YAML_KEYS = {
    "max_batch_size": ("max_num_seqs", _int),
    "max_num_tokens": ("max_num_batched_tokens", _int),
    "tensor_parallel_size": ("tp", _int),
    "batch_wait_timeout_iters": ("batch_wait_iters", _count),
    "batch_wait_max_tokens_ratio": ("batch_wait_ratio", _share),
}


def _trtllm_yaml(data: Any, where: str) -> UserLaunch:
    """A TensorRT-LLM ``extra_llm_api_options`` mapping (llmapi LlmArgs keys) as a launch."""
    return _launch("trtllm", *_trtllm_yaml_found(data, where))


def _trtllm_yaml_found(data: Any, where: str) -> tuple[dict[str, tuple[Any, str]], list[str]]:
    """The values an ``extra_llm_api_options`` mapping sets (field -> (value, key text)) and the keys it cannot
    read."""
    if not isinstance(data, dict):
        raise InfercastError(f"{where} must be a YAML mapping of LLM API options", field="launch")
    found: dict[str, tuple[Any, str]] = {}
    unknown: list[str] = []
    for key, value in data.items():
        if key in _YAML_KEYS:
            name, convert = _YAML_KEYS[key]
            found[name] = (convert(key, value), f"{key}: {value}")
        elif key == "enable_chunked_prefill":
            found["scheduler"] = ("chunked" if _bool(key, value) else "inflight", f"{key}: {value}")
        elif key == "disable_overlap_scheduler":
            found["overlap_scheduler"] = (not _bool(key, value), f"{key}: {value}")
        elif key == "kv_cache_config" and isinstance(value, dict):
            _kv_cache_config(value, found, unknown)
        elif key == "attention_dp_config" and isinstance(value, dict):
            _attention_dp_config(value, found, unknown)
        elif key == "speculative_config" and isinstance(value, dict):
            drafts = (_trtllm_drafts(value), str(value.get("decoding_type", "")) or None)
            found["spec_config"] = (drafts, f"speculative_config: {value}")
        elif key == "enable_attention_dp":
            if _bool(key, value):
                found["dp_attention"] = (True, f"{key}: {value}")
        elif key == "moe_expert_parallel_size":
            found["ep"] = (_int(key, value), f"{key}: {value}")
        elif key == "cuda_graph_config":
            _cuda_graph_config(value, found, unknown)
        elif key == "torch_compile_config" and isinstance(value, dict):
            _torch_compile_config(value, found, unknown)
        elif key in ("prefill_cuda_graph_backend", "prefill_capture_num_tokens"):
            found[key] = (value, f"{key}: {value}")
        elif key == "moe_config" and isinstance(value, dict):
            _moe_config(value, found, unknown)
        elif key == "scheduler_config" and isinstance(value, dict):
            policy = str(value.get("capacity_scheduler_policy", "GUARANTEED_NO_EVICT")).upper()
            if policy != "GUARANTEED_NO_EVICT":
                found["capacity_policy"] = (policy, f"scheduler_config.capacity_scheduler_policy: {policy}")
        elif key in ("print_iter_log", "backend"):
            continue  # no bearing on the modelled step
        else:
            unknown.append(str(key))
    _prefill_graphs(found, unknown)
    piecewise = found.pop("piecewise", None)
    if piecewise is not None:  # prompt steps replay as (piecewise) graphs too, up to the largest captured size
        tokens, text = piecewise
        found["cuda_graphs"] = ("tokens", text)
        if tokens:  # else the generation graphs' size: the launch's, or the release default (the cost profile's)
            found["graph_max_tokens"] = (tokens, text)
    return found, unknown


def _torch_compile_config(value: dict[str, Any], found: dict[str, tuple[Any, str]], unknown: list[str]) -> None:
    """TensorRT-LLM ``torch_compile_config``: with ``enable_piecewise_cuda_graph`` steps of any kind (prompt tokens
    too) of up to the largest ``capture_num_tokens`` replay as piecewise graphs (without the list, the generation
    graphs' batch sizes: TorchCompileConfig, tensorrt_llm/llmapi/llm_args.py); other keys are not modelled."""
    on = _bool("torch_compile_config.enable_piecewise_cuda_graph", value.get("enable_piecewise_cuda_graph", False))
    sizes = value.get("capture_num_tokens")
    read = ("enable_piecewise_cuda_graph", "capture_num_tokens")
    unknown += [f"torch_compile_config.{k}" for k in value if k not in read]
    if not on:
        return
    largest = 0 if sizes is None else _largest_listed("torch_compile_config.capture_num_tokens", sizes)
    found["piecewise"] = (largest, "torch_compile_config.enable_piecewise_cuda_graph: true")


PREFILL_GRAPH_BACKENDS = ("disabled", "piecewise", "breakable")
"""TensorRT-LLM's ``prefill_cuda_graph_backend`` (PrefillCudaGraphBackend, tensorrt_llm/llmapi/llm_args.py, from
1.3.0rc2x on; it replaces ``torch_compile_config.enable_piecewise_cuda_graph``)."""


def _prefill_graphs(found: dict[str, tuple[Any, str]], unknown: list[str]) -> None:
    """TensorRT-LLM's top-level ``prefill_cuda_graph_backend``: ``piecewise`` or ``breakable`` replay steps with
    prompt tokens as graphs too, up to the largest ``prefill_capture_num_tokens`` (the newer names of
    ``torch_compile_config``'s piecewise keys, read the same way); ``disabled`` is the default. Capture sizes
    without a backend that uses them are named among the keys not modelled."""
    backend, text = found.pop("prefill_cuda_graph_backend", ("disabled", ""))
    sizes = found.pop("prefill_capture_num_tokens", (None, ""))[0]
    name = str(backend).lower()
    if name not in PREFILL_GRAPH_BACKENDS:
        raise InfercastError(
            f"prefill_cuda_graph_backend must be one of {', '.join(PREFILL_GRAPH_BACKENDS)}, got {backend!r}",
            field="launch",
        )
    if name == "disabled":
        if sizes is not None:
            unknown.append("prefill_capture_num_tokens (prefill graphs off)")
        return
    largest = 0 if sizes is None else _largest_listed("prefill_capture_num_tokens", sizes)
    found["piecewise"] = (largest, text)


def _cuda_graph_config(value: Any, found: dict[str, tuple[Any, str]], unknown: list[str]) -> None:
    """TensorRT-LLM ``cuda_graph_config``: generation batches of up to ``max_batch_size`` (or the largest of
    ``batch_sizes``) replay as graphs; ``null`` turns graphs off."""
    if value is None:
        found["graph_max_tokens"] = (0, "cuda_graph_config: null")
        return
    if not isinstance(value, dict):
        raise InfercastError(f"cuda_graph_config must be a mapping or null, got {value!r}", field="launch")
    for key, item in value.items():
        if key == "max_batch_size":
            found["graph_max_tokens"] = (_int(f"cuda_graph_config.{key}", item), f"cuda_graph_config.{key}: {item}")
        elif key == "batch_sizes" and isinstance(item, list) and item:
            largest = max(_int(f"cuda_graph_config.{key}", size) for size in item)
            found["graph_max_tokens"] = (largest, f"cuda_graph_config.{key}: {item}")
        elif key == "enable_padding" and _bool(f"cuda_graph_config.{key}", item):
            continue  # a batch pads up to the next captured size: every batch up to the largest replays, as modelled
        else:  # without padding only the captured sizes replay; infercast counts every batch up to the largest
            unknown.append(f"cuda_graph_config.{key}")


def _moe_config(value: dict[str, Any], found: dict[str, tuple[Any, str]], unknown: list[str]) -> None:
    """TensorRT-LLM ``moe_config.backend``: ``TRITON`` runs MXFP4 experts through OpenAI's Triton kernels
    (``EngineSpec.moe_backend`` 'triton'), ``TRTLLM`` through the trtllm-gen kernels ('trtllm'), ``DEEPGEMM``
    through DeepGEMM's ('deepgemm'); ``CUTLASS`` is the release default; others are named as not modelled."""
    for key, item in value.items():
        backend = str(item).upper()
        if key == "backend" and backend in ("TRITON", "TRTLLM", "DEEPGEMM"):
            found["moe_backend"] = (backend.lower(), f"moe_config.backend: {item}")
        elif key != "backend" or backend != "CUTLASS":
            unknown.append(f"moe_config.{key}: {item}")


def _kv_cache_config(value: dict[str, Any], found: dict[str, tuple[Any, str]], unknown: list[str]) -> None:
    for key, item in value.items():
        if key == "free_gpu_memory_fraction":
            found["kv_fraction"] = (_fraction(f"kv_cache_config.{key}", item), f"kv_cache_config.{key}: {item}")
        elif key == "dtype":
            found["kv"] = (_kv(f"kv_cache_config.{key}", item), f"kv_cache_config.{key}: {item}")
        elif key == "tokens_per_block":
            found["block_size"] = (_int(f"kv_cache_config.{key}", item), f"kv_cache_config.{key}: {item}")
        elif key == "enable_block_reuse" and not _bool(key, item):
            found["prefix_off"] = (True, f"kv_cache_config.{key}: {item}")
        elif key != "enable_block_reuse":
            unknown.append(f"kv_cache_config.{key}")


def _trtllm_drafts(value: dict[str, Any]) -> int:
    """Draft tokens per step of a ``speculative_config``: MTP's ``num_nextn_predict_layers`` (LLM API default 1),
    else ``max_draft_len`` (Eagle, NGram, draft-target)."""
    if str(value.get("decoding_type", "")).upper() == "MTP":
        return _int("speculative_config.num_nextn_predict_layers", value.get("num_nextn_predict_layers", 1))
    if "max_draft_len" not in value:
        raise InfercastError("speculative_config needs max_draft_len (or decoding_type: MTP)", field="launch")
    return _int("speculative_config.max_draft_len", value["max_draft_len"])


def _attention_dp_config(value: dict[str, Any], found: dict[str, tuple[Any, str]], unknown: list[str]) -> None:
    """``enable_balance`` with ``timeout_iters`` (LLM API default 50) holds prompts until every attention-DP rank
    has one; ``batching_wait_iters`` beyond 0 is named as not modelled."""
    if _bool("attention_dp_config.enable_balance", value.get("enable_balance", False)):
        iters = value.get("timeout_iters", 50)
        found["adp_balance_iters"] = (
            _count("attention_dp_config.timeout_iters", iters),
            f"attention_dp_config: {value}",
        )
    for key, item in value.items():
        if key == "batching_wait_iters" and _count(f"attention_dp_config.{key}", item) == 0:
            continue
        if key not in ("enable_balance", "timeout_iters"):
            unknown.append(f"attention_dp_config.{key}")


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise InfercastError(f"{key} must be true or false, got {value!r}", field="launch")
