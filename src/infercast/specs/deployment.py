"""A resolved, validated serving configuration: model x hardware x number formats x parallelism x engine."""

from __future__ import annotations

from dataclasses import dataclass

from infercast.errors import InfercastError, require_positive_int
from infercast.specs.catalog import get_hardware, get_model, is_builtin
from infercast.specs.engine import EngineSpec, get_engine
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec
from infercast.specs.precision import SCHEMES, NumberFormat, PrecisionScheme, get_kv_format, get_scheme


@dataclass(frozen=True)
class Deployment:
    """One replica: ``tp`` GPUs of one kind serving one model (experts split ``ep`` ways)."""

    model: ModelSpec
    hardware: HardwareSpec
    scheme: PrecisionScheme
    kv_format: NumberFormat
    tp: int
    ep: int
    engine: EngineSpec
    compute_key: str
    """Hardware peak key the GEMMs run at (e.g. 'bf16' for W4A16 on Hopper)."""
    pp: int = 1
    """Pipeline stages: each holds 1/pp of the layers on its own tp x attention_dp GPUs."""
    attention_dp: int = 1
    """Attention data parallelism (DeepSeek-style wide EP): attention and dense layers replicated this many times,
    each copy ``tp``-way and serving 1/attention_dp of the sequences; experts split ``ep``-way over all
    ``tp * attention_dp`` GPUs of a stage."""
    kv_source: str = "given"
    """Where the KV-cache format came from: 'given' (--kv-precision), 'checkpoint' (the model config's
    quantization_config), 'engine default' (the engine's 8-bit default for quantised checkpoints) or 'model dtype'."""

    @property
    def gpus_per_stage(self) -> int:
        return self.tp * self.attention_dp

    @property
    def gpus(self) -> int:
        """GPUs of the whole replica (all stages)."""
        return self.gpus_per_stage * self.pp

    @property
    def nodes(self) -> int:
        """Scale-up domains (nodes, or NVL72 racks) the replica spans."""
        return -(-self.gpus // self.hardware.max_gpus_per_node)

    @classmethod
    def resolve(
        cls,
        model: str | ModelSpec,
        gpu: str | HardwareSpec,
        *,
        tp: int = 1,
        ep: int = 1,
        precision: str | None = None,
        kv_precision: str | None = None,
        engine: str | EngineSpec = "vllm",
        pp: int = 1,
        attention_dp: int = 1,
    ) -> Deployment:
        """Look up and validate every part; raises InfercastError naming the bad field. Calls naming a built-in
        model and GPU by id with plain arguments return one shared object per distinct call (catalog entries
        never change), so the caches keyed on a deployment's parts hit without re-validating."""
        key = (model, gpu, tp, ep, precision, kv_precision, engine, pp, attention_dp)
        plain = all(type(a) in _PLAIN_ARGS for a in key)
        if plain and (hit := _RESOLVED.get(key)) is not None:
            return hit
        dep = cls._resolve(
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
        if plain and is_builtin(model, gpu):
            if len(_RESOLVED) >= _RESOLVED_LIMIT:
                _RESOLVED.clear()
            _RESOLVED[key] = dep
        return dep

    @classmethod
    def _resolve(
        cls,
        model: str | ModelSpec,
        gpu: str | HardwareSpec,
        *,
        tp: int,
        ep: int,
        precision: str | None,
        kv_precision: str | None,
        engine: str | EngineSpec,
        pp: int,
        attention_dp: int,
    ) -> Deployment:
        model_spec = get_model(model)
        hw = get_hardware(gpu)
        tp = require_positive_int("tp", tp)
        eng = get_engine(engine).for_hardware(hw, tp)
        ep = require_positive_int("ep", ep)
        pp = require_positive_int("pp", pp)
        dp = require_positive_int("attention_dp", attention_dp)
        if dp == 1:
            if ep > tp and model_spec.moe:
                raise InfercastError(
                    f"ep={ep} needs {ep} GPUs per stage but tp x attention_dp = {tp}: give --tp {ep}, or "
                    f"--attention-dp {ep // tp if ep % tp == 0 else ep} for wide EP with attention data parallelism",
                    field="ep",
                )
            model_spec.check_parallelism(tp, ep)
        else:
            check_attention_dp(model_spec, tp, ep, dp)
        if pp > model_spec.num_layers:
            raise InfercastError(
                f"pp={pp} exceeds the {model_spec.num_layers} layers of {model_spec.id}; allowed: 1-"
                f"{model_spec.num_layers}",
                field="pp",
            )
        check_tp_on_hardware(hw, tp)
        check_layout_on_hardware(hw, tp * dp, pp)
        for value, lookup in ((precision, get_scheme), (kv_precision, get_kv_format)):
            if value is not None and not value:
                lookup(value)  # '' is refused with the allowed names, not read as "the default"
        scheme = get_scheme(precision) if precision else _default_scheme(model_spec, hw)
        key = scheme.compute_key(hw)
        kv_name, kv_source = (kv_precision, "given") if kv_precision else kv_default(model_spec, scheme, hw, eng)
        kv = get_kv_format(kv_name)
        return cls(model_spec, hw, scheme, kv, tp, ep, eng, key, pp, dp, kv_source)

    @property
    def attention_key(self) -> str:
        """Attention runs in 16 bits (bf16, or fp16 on chips without bf16)."""
        return "bf16" if "bf16" in self.hardware.peak_flops else "fp16"

    @property
    def layout(self) -> str:
        """``tp4``, or with the other dimensions above 1 ``tp1-dp8-ep8-pp2``."""
        par = f"tp{self.tp}" + (f"-dp{self.attention_dp}" if self.attention_dp > 1 else "")
        return par + (f"-ep{self.ep}" if self.ep > 1 else "") + (f"-pp{self.pp}" if self.pp > 1 else "")

    @property
    def label(self) -> str:
        return (
            f"{self.model.id} on {self.gpus}x {self.hardware.id} {self.scheme.name}/kv-{self.kv_format.name} "
            f"{self.layout}"
        )


def default_precision(model: ModelSpec, hw: HardwareSpec) -> str:
    """The scheme used when none is given: the model's native one, with bf16 replaced by fp16 on chips that
    have no bf16 (T4, V100), as engines do there. Every entry point (predict, memory, sweep, compare,
    simulate) resolves through :meth:`Deployment.resolve`, so they all agree."""
    return _default_scheme(model, hw).name


def _default_scheme(model: ModelSpec, hw: HardwareSpec) -> PrecisionScheme:
    scheme = get_scheme(model.default_precision)
    if scheme.compute == "bf16" and "bf16" not in hw.peak_flops and "fp16" in hw.peak_flops:
        return SCHEMES["fp16"]
    return scheme


def check_tp_on_hardware(hw: HardwareSpec, tp: int) -> None:
    """Raise a ``tp`` error when ``tp`` GPUs of ``hw`` cannot form one tensor-parallel group: no link to run
    collectives over, or more GPUs than one scale-up domain without a scale-out network (or not whole nodes)."""
    if tp > 1 and hw.collective_bandwidth_bytes_s <= 0:
        raise InfercastError(
            f"{hw.id} has no link for tensor-parallel collectives (interconnect and host_link bandwidth are 0); "
            "use tp=1 or give a link bandwidth in its spec",
            field="tp",
        )
    node = hw.max_gpus_per_node
    if tp > node:
        if hw.scale_out is None:
            raise InfercastError(
                f"tp={tp} exceeds the {node} GPUs of one {hw.id} node (max_gpus_per_node) and {hw.id} has no "
                f"scale_out network in its spec; allowed: 1-{node}",
                field="tp",
            )
        if tp % node:
            raise InfercastError(
                f"tp={tp} across nodes must be a multiple of the {node} GPUs per {hw.id} node (max_gpus_per_node)",
                field="tp",
            )


def check_layout_on_hardware(hw: HardwareSpec, gpus_per_stage: int, pp: int) -> None:
    """A stage larger than one node, or stages on several nodes, needs the scale-out network."""
    node = hw.max_gpus_per_node
    if gpus_per_stage * pp > node and hw.scale_out is None:
        raise InfercastError(
            f"{gpus_per_stage * pp} GPUs (tp x attention_dp x pp) exceed the {node} GPUs of one {hw.id} node and "
            f"{hw.id} has no scale_out network in its spec; allowed: at most {node} GPUs",
            field="pp" if pp > 1 else "attention_dp",
        )
    if gpus_per_stage > node and gpus_per_stage % node:
        raise InfercastError(
            f"tp x attention_dp = {gpus_per_stage} across nodes must be a multiple of the {node} GPUs per node",
            field="attention_dp",
        )


def check_attention_dp(model: ModelSpec, tp: int, ep: int, dp: int) -> None:
    """Attention DP splits attention ``tp``-way inside each of ``dp`` groups and the experts over all of them."""
    if not model.moe:
        raise InfercastError(
            f"{model.id} is dense: attention data parallelism pairs with expert parallelism (MoE models); "
            "use replicas for a dense model",
            field="attention_dp",
        )
    model.check_parallelism(tp, 1)
    world = tp * dp
    if world % ep:
        raise InfercastError(f"ep={ep} must divide tp x attention_dp = {world}", field="ep")
    if model.moe.num_experts % ep:
        raise InfercastError(f"ep={ep} does not divide the {model.moe.num_experts} experts of {model.id}", field="ep")
    if model.moe.expert_intermediate_size % (world // ep):
        raise InfercastError(
            f"expert FFN width {model.moe.expert_intermediate_size} is not divisible by "
            f"tp x attention_dp / ep = {world // ep}",
            field="ep",
        )


def kv_default(model: ModelSpec, scheme: PrecisionScheme, hw: HardwareSpec, engine: EngineSpec) -> tuple[str, str]:
    """The KV-cache format a launch without ``--kv-precision`` runs, and why: the checkpoint's own KV quantisation
    (served in the checkpoint's precision), else the engine's 8-bit default for checkpoints of this weight scheme
    (:attr:`EngineSpec.fp8_kv_schemes`: TensorRT-LLM follows ModelOpt FP8/NVFP4 checkpoints' kv_cache_quant_algo
    FP8), else the activation dtype ('auto'; fp16 on chips without bf16, as engines do on T4 and V100)."""
    if model.kv_cache_precision and scheme.name == model.default_precision:
        return model.kv_cache_precision, "checkpoint"
    if scheme.name in engine.fp8_kv_schemes:
        return "fp8", "engine default"
    if scheme.kv_default == "bf16" and "bf16" not in hw.peak_flops:
        return "fp16", "model dtype"
    return scheme.kv_default, "model dtype"


_PLAIN_ARGS = (str, int, type(None))
_RESOLVED: dict[tuple, Deployment] = {}
"""Deployments resolved from built-in ids and plain arguments (see :meth:`Deployment.resolve`)."""
_RESOLVED_LIMIT = 4096
