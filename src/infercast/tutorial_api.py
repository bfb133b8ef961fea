"""Tutorial-style API: ``Models``, ``Hardware`` and ``ServingModel`` over infercast's catalogs and predictor.

Lets notebook-style code read naturally::

    solver = ServingModel()
    r = solver.solve(model=Models.Llama3_8B, hardware=Hardware.Cloud.H100, seq_len=2048, precision="fp16")
    r.ttft.to("ms"), r.itl.to("ms"), r.model_weights_size, r.feasible

Numbers come from :func:`infercast.predict` (operator-level roofline with engine overheads), returned as
pint quantities from :mod:`infercast.units`.

Model attribute names follow :func:`attribute_name`: the family word(s) of the catalog id in CamelCase,
glued to a following plain version number (dots become ``_``), then every further part joined with ``_``,
sizes upper-cased (``b`` -> ``B``, ``x`` between digits kept): ``llama-3.1-70b`` -> ``Llama3_1_70B``,
``qwen3-30b-a3b`` -> ``Qwen3_30B_A3B``, ``mixtral-8x7b`` -> ``Mixtral_8x7B``, ``gpt-oss-20b`` -> ``GptOss_20B``,
``deepseek-v3`` -> ``DeepSeek_V3``, ``phi-3-mini`` -> ``Phi3_Mini``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pint

from infercast import predict
from infercast.analysis.scenario import Prediction
from infercast.errors import InfercastError, nearest
from infercast.specs.catalog import get_hardware, get_model, model_catalog
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec
from infercast.specs.precision import SIXTEEN_BIT
from infercast.units import nbytes, quantity, seconds

__all__ = ["Accelerator", "Hardware", "Models", "ServingModel", "ServingResult", "attribute_name"]

# ----- naming -------------------------------------------------------------------------------------------

_BRANDS = {"deepseek": "DeepSeek"}
"""Family words whose CamelCase is not plain capitalisation."""

_VERSION = re.compile(r"\d+(\.\d+)*")
_WORD = re.compile(r"[a-z]+")
_LEAD = re.compile(r"([a-z]+)([\d.]*)")


def _camel(word: str) -> str:
    return _BRANDS.get(word, word.capitalize())


def _tag(token: str) -> str:
    """One non-family part of an id: ``70b`` -> ``70B``, ``8x7b`` -> ``8x7B``, ``0.6b`` -> ``0_6B``."""
    if _WORD.fullmatch(token):
        return _camel(token)
    text = re.sub(r"(?<=\d)X(?=\d)", "x", token.upper())
    return text.replace(".", "_")


def attribute_name(model_id: str) -> str:
    """The ``Models`` attribute name of a catalog id (deterministic; see the module docstring)."""
    tokens = [t for t in model_id.strip().lower().split("-") if t]
    if not tokens:
        raise InfercastError("empty model id", field="model")
    head = ""
    lead = _LEAD.fullmatch(tokens[0])
    if lead:  # family word, maybe with its version glued on: "llama", "qwen2.5"
        head = _camel(lead.group(1)) + lead.group(2).replace(".", "_")
        rest = tokens[1:]
        while rest and _WORD.fullmatch(rest[0]):  # more family words: gpt-oss
            head += _camel(rest.pop(0))
        if rest and not lead.group(2) and _VERSION.fullmatch(rest[0]):  # plain version: llama-3.1
            head += rest.pop(0).replace(".", "_")
    else:
        rest = tokens
    name = "_".join([p for p in [head, *(_tag(t) for t in rest)] if p])
    name = re.sub(r"\W", "_", name)
    return name if name[0].isalpha() else f"M_{name}"


# ----- namespaces ---------------------------------------------------------------------------------------


class _Namespace:
    """Read-only attribute namespace filled lazily from a loader; typos get close-name hints."""

    def __init__(self, title: str, loader: Callable[[], Mapping[str, Any]]):
        object.__setattr__(self, "_title", title)
        object.__setattr__(self, "_loader", loader)
        object.__setattr__(self, "_items", None)

    def _entries(self) -> dict[str, Any]:
        items = object.__getattribute__(self, "_items")
        if items is None:
            items = dict(object.__getattribute__(self, "_loader")())
            object.__setattr__(self, "_items", items)
        return items

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        items = self._entries()
        if name in items:
            return items[name]
        close = nearest(name, items)
        hint = f"did you mean {', '.join(close)}?" if close else f"available: {', '.join(sorted(items))}"
        raise AttributeError(f"{self._title} has no attribute {name!r}; {hint}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{self._title} is read-only")

    def __dir__(self) -> list[str]:
        return sorted(self._entries())

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries()))

    def __contains__(self, name: object) -> bool:
        return name in self._entries()

    def __len__(self) -> int:
        return len(self._entries())

    def names(self) -> dict[str, Any]:
        """Attribute name -> value, for every entry."""
        return dict(self._entries())

    def __repr__(self) -> str:
        return f"<{self._title}: {', '.join(sorted(self._entries()))}>"


def _model_entries() -> dict[str, ModelSpec]:
    out: dict[str, ModelSpec] = {}
    for model_id, spec in model_catalog().items():
        out.setdefault(attribute_name(model_id), spec)  # a clash keeps the first; every id works in solve()
    return out


Models = _Namespace("Models", _model_entries)
"""One attribute per built-in catalog model (values are :class:`~infercast.specs.model.ModelSpec`)."""


# ----- hardware -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ComputeView:
    """Compute ceiling of an accelerator as a quantity."""

    peak_flops: pint.Quantity
    """Dense 16-bit tensor-core peak (bf16, or fp16 on chips without bf16), FLOP/s."""


@dataclass(frozen=True)
class MemoryView:
    """Device memory of an accelerator as quantities."""

    bandwidth: pint.Quantity
    """Datasheet HBM/GDDR bandwidth, B/s."""
    capacity: pint.Quantity
    """Physical capacity, B (SI)."""


class Accelerator:
    """A catalog accelerator with pint-quantity views (``.compute.peak_flops``, ``.memory.bandwidth``...)."""

    def __init__(self, spec: HardwareSpec):
        self.spec = spec
        key = next((k for k in SIXTEEN_BIT if k in spec.peak_flops), None)
        peak = spec.peak_flops[key] if key else max(spec.peak_flops.values())
        self.compute = ComputeView(peak_flops=quantity(peak, "FLOP/s"))
        self.memory = MemoryView(
            bandwidth=quantity(spec.memory.bandwidth_bytes_s, "B/s"),
            capacity=quantity(spec.memory.capacity_bytes, "B"),
        )

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def id(self) -> str:
        return self.spec.id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Accelerator) and other.spec == self.spec

    def __hash__(self) -> int:
        return hash(self.spec.id)

    def __repr__(self) -> str:
        flops = self.compute.peak_flops.to("TFLOPs/s").magnitude
        bw = self.memory.bandwidth.to("TB/s").magnitude
        cap = self.memory.capacity.to("GB").magnitude
        return f"<Accelerator {self.spec.id}: {self.name}, {flops:.4g} TFLOPs/s, {bw:.4g} TB/s, {cap:.4g} GB>"


_CLOUD = {
    "T4": "t4",
    "L4": "l4",
    "A10G": "a10g",
    "L40S": "l40s",
    "A100": "a100-80gb",
    "A100_80GB": "a100-80gb",
    "A100_40GB": "a100-40gb",
    "H100": "h100-sxm",
    "H100_SXM": "h100-sxm",
    "H100_PCIe": "h100-pcie",
    "H200": "h200",
    "B200": "b200",
    "GB200": "gb200",
    "MI300X": "mi300x",
    "MI325X": "mi325x",
}
_CONSUMER = {"RTX4090": "rtx-4090"}


def _accelerators(table: dict[str, str]) -> Callable[[], dict[str, Accelerator]]:
    return lambda: {name: Accelerator(get_hardware(hw_id)) for name, hw_id in table.items()}


class _HardwareNamespace:
    """``Hardware.Cloud.H100``, ``Hardware.Consumer.RTX4090``."""

    Cloud = _Namespace("Hardware.Cloud", _accelerators(_CLOUD))
    Consumer = _Namespace("Hardware.Consumer", _accelerators(_CONSUMER))

    def __repr__(self) -> str:
        return "<Hardware: Cloud, Consumer>"


Hardware = _HardwareNamespace()
"""Accelerators by the short names people use, grouped as ``Cloud`` and ``Consumer``."""


# ----- serving ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServingResult:
    """What :meth:`ServingModel.solve` returns. Times and sizes are pint quantities; sizes are per GPU."""

    ttft: pint.Quantity
    """Time to first token: the prefill of ``batch_size`` prompts of ``seq_len`` tokens."""
    itl: pint.Quantity
    """Inter-token latency: the mean decode step of the batch after the prompt (with the default
    ``output_len=2`` exactly the first decode step, at context ``seq_len + 1``)."""
    kv_cache_size: pint.Quantity
    """KV cache the batch needs at context ``seq_len + output_len`` (whole paged blocks)."""
    model_weights_size: pint.Quantity
    """Weight bytes stored on one GPU (quantization scales included)."""
    memory_utilization: float
    """(weights + KV + activations + runtime reservations) / capacity; above 1 when it cannot fit."""
    feasible: bool
    """True when weights and the requested KV fit in the engine's memory budget."""
    prediction: Prediction
    """The full infercast prediction (phase reports, memory budget, advice)."""

    def __repr__(self) -> str:
        return (
            f"ServingResult(ttft={self.ttft.to('ms'):.4g~P}, itl={self.itl.to('ms'):.4g~P}, "
            f"weights={self.model_weights_size.to('GB'):.4g~P}, kv={self.kv_cache_size.to('GB'):.4g~P}, "
            f"memory_utilization={self.memory_utilization:.1%}, feasible={self.feasible})"
        )


def _model_ref(model: Any) -> ModelSpec:
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, str):
        return get_model(model)
    raise InfercastError(
        f"expected a ModelSpec, Models.<name> or catalog id, got {type(model).__name__}", field="model"
    )


def _hardware_ref(hardware: Any) -> HardwareSpec:
    if isinstance(hardware, Accelerator):
        return hardware.spec
    if isinstance(hardware, HardwareSpec):
        return hardware
    if isinstance(hardware, str):
        return get_hardware(hardware)
    raise InfercastError(
        f"expected Hardware.Cloud.<name>, a HardwareSpec or catalog id, got {type(hardware).__name__}",
        field="hardware",
    )


class ServingModel:
    """Two-phase serving analysis of one request batch: TTFT (prefill) and ITL (decode), plus memory."""

    def solve(
        self,
        model: ModelSpec | str,
        hardware: Accelerator | HardwareSpec | str,
        seq_len: int,
        batch_size: int = 1,
        precision: str = "fp16",
        output_len: int = 2,
        engine: str = "vllm",
        *,
        tp: int = 1,
        kv_precision: str | None = None,
    ) -> ServingResult:
        """Predict ``batch_size`` requests of ``seq_len`` prompt tokens on ``hardware`` (per GPU with ``tp``).

        ``itl`` is the mean batch decode step over the ``output_len - 1`` steps after the first token
        (infercast's TPOT); with the default ``output_len=2`` it is the first decode step. Configurations
        that do not fit in memory are still predicted and come back with ``feasible=False``.
        """
        if isinstance(output_len, bool) or not isinstance(output_len, int) or output_len < 2:
            raise InfercastError(
                f"must be an integer >= 2 (one decode step after the first token), got {output_len!r}",
                field="output_len",
            )
        pred = predict(
            _model_ref(model),
            _hardware_ref(hardware),
            input_len=seq_len,
            output_len=output_len,
            batch=batch_size,
            tp=tp,
            precision=precision,
            kv_precision=kv_precision,
            engine=engine,
            strict=False,
        )
        mem = pred.memory
        return ServingResult(
            ttft=seconds(pred.ttft_last_s),
            itl=seconds(pred.tpot_last_s),
            kv_cache_size=nbytes(mem.kv_cache_bytes),
            model_weights_size=nbytes(mem.weights_bytes),
            memory_utilization=mem.total_bytes / mem.capacity_bytes,
            feasible=mem.fits,
            prediction=pred,
        )
