"""Schedulers: one small class each, the same interface (:class:`~infercast.sim.scheduler.base.Scheduler`)."""

from __future__ import annotations

from infercast.errors import unknown_choice
from infercast.sim.scheduler.base import Plan, Scheduler
from infercast.sim.scheduler.sarathi import ChunkedPrefillScheduler
from infercast.sim.scheduler.static import StaticScheduler
from infercast.sim.scheduler.vllm import PrefillFirstScheduler

SCHEDULERS: dict[str, type] = {
    "static": StaticScheduler,
    "vllm": PrefillFirstScheduler,
    "sarathi": ChunkedPrefillScheduler,
}


def make_scheduler(name: str) -> Scheduler:
    """A scheduler by name: static, vllm (prefill-first), sarathi (chunked prefill)."""
    key = name.strip().lower() if isinstance(name, str) else None
    if key not in SCHEDULERS:
        raise unknown_choice("scheduler", str(name), [*SCHEDULERS, "disagg"])
    return SCHEDULERS[key]()


__all__ = ["SCHEDULERS", "Plan", "Scheduler", "make_scheduler"]
