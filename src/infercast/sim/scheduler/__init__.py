"""Schedulers: one small class each, the same interface (:class:`~infercast.sim.scheduler.base.Scheduler`).

Names say the policy, not an engine: ``static`` (request-level batches), ``prefill-first`` (continuous
batching, whole prompts first, decodes wait: vLLM V0, SGLang without mixed chunks), ``chunked`` (chunked
prefill, decodes first: vLLM V1), ``inflight`` (whole prompts beside the decodes, never split, KV reserved for
prompt + output at admission: TensorRT-LLM).
An engine preset names its own in ``scheduler`` (:func:`engine_scheduler`).
"""

from __future__ import annotations

from infercast.errors import unknown_choice
from infercast.sim.scheduler.base import Plan, ReplicaView, Scheduler
from infercast.sim.scheduler.chunked import ChunkedPrefillScheduler
from infercast.sim.scheduler.inflight import InflightScheduler
from infercast.sim.scheduler.prefill_first import PrefillFirstScheduler
from infercast.sim.scheduler.static import StaticScheduler
from infercast.specs.engine import EngineSpec

SCHEDULERS: dict[str, type] = {
    "static": StaticScheduler,
    "prefill-first": PrefillFirstScheduler,
    "chunked": ChunkedPrefillScheduler,
    "inflight": InflightScheduler,
}
ALIASES = {"vllm": "prefill-first", "sarathi": "chunked", "prefill_first": "prefill-first"}
"""Earlier names, still accepted (see CHANGELOG.md)."""


def scheduler_name(name: object, *, extra: tuple[str, ...] = ()) -> str:
    """The canonical name of a scheduler (aliases resolved); ``extra``: further names the caller accepts."""
    key = name.strip().lower() if isinstance(name, str) else None
    key = ALIASES.get(key, key) if key is not None else None
    if key not in SCHEDULERS and key not in extra:
        raise unknown_choice("scheduler", str(name), [*SCHEDULERS, *extra])
    return key


def engine_scheduler(engine: EngineSpec) -> str:
    """The scheduler an engine preset runs by default (its ``scheduler`` in engines.yaml)."""
    return engine.scheduler


def make_scheduler(name: str) -> Scheduler:
    """A scheduler by name: static, prefill-first, chunked, inflight (or an alias)."""
    return SCHEDULERS[scheduler_name(name)]()


__all__ = [
    "ALIASES",
    "SCHEDULERS",
    "Plan",
    "ReplicaView",
    "Scheduler",
    "engine_scheduler",
    "make_scheduler",
    "scheduler_name",
]
