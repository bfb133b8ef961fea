"""Text labels shared by the summary table, the plots and the Perfetto trace."""

from __future__ import annotations

from typing import Any

from infercast.sim.metrics import slo_text
from infercast.specs.engine import engine_label

__all__ = ["deployment_label", "run_label", "slo_text"]


def deployment_label(config: dict[str, Any], *, pools: bool = True) -> str:
    """``model on gpu`` with ``tpN`` / ``epN`` / ``attention-dpN`` / ``ppN`` where above 1 and, with ``pools``,
    ``× N replicas`` (or the prefill and decode pools of a disaggregated run), from a
    :class:`~infercast.sim.api.SimulationResult`'s ``config``."""
    label = f"{config.get('model', '?')} on {config.get('gpu', '?')}"
    for key, short in (("tp", "tp"), ("ep", "ep"), ("attention_dp", "attention-dp"), ("pp", "pp")):
        if config.get(key, 1) != 1:
            label += f" {short}{config[key]}"
    if not pools:
        return label
    if "prefill_instances" in config:
        label += f" × ({config['prefill_instances']} prefill + {config['decode_instances']} decode)"
    elif config.get("replicas", 1) != 1:
        label += f" × {config['replicas']} replicas"
    return label


def run_label(config: dict[str, Any]) -> str:
    """:func:`deployment_label` · engine · scheduler · workload, for titles and captions."""
    parts = [
        deployment_label(config),
        engine_label(config["engine"]) if config.get("engine") else "",
        config.get("scheduler", ""),
        config.get("workload", ""),
    ]
    return " · ".join(str(p) for p in parts if p)
