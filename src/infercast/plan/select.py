"""``select``: which GPUs meet a TTFT/TPOT target for a static batch, and at what cost — the capacity
planner's analytic screen (:mod:`infercast.plan.screen`) shown per GPU.

It answers the unloaded question (a batch run alone, no queueing, no percentiles). Traffic, tail latency and
fleet size are :func:`infercast.plan.plan`'s: every configuration ``select`` fails, ``plan`` prunes for the
same reason, and ``infercast select`` points there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from infercast.analysis.compare import split_refs
from infercast.analysis.scenario import check_context
from infercast.errors import InfercastError, require_positive_int
from infercast.plan.screen import ScreenLayout, ScreenQuery, screen_gpu
from infercast.specs.catalog import get_hardware, get_model, list_hardware
from infercast.specs.deployment import default_precision
from infercast.specs.hardware import HardwareSpec
from infercast.specs.model import ModelSpec
from infercast.specs.precision import get_scheme

_SELECT_COLUMNS = [
    "gpu",
    "passes",
    "precision",
    "tp",
    "ep",
    "kv_precision",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "output_throughput_tok_s",
    "fits",
    "cost_per_mtok_usd",
    "reason",
    "configs_tried",
    "configs_passing",
]


def select(
    model: str | ModelSpec,
    gpus: str | Sequence[str | HardwareSpec] | None = None,
    *,
    query: ScreenQuery,
    precisions: str | Sequence[str] | None = None,
    tps: int | Sequence[int] = (1, 2, 4, 8),
    layout: ScreenLayout = ScreenLayout(),
    all_configs: bool = False,
) -> pd.DataFrame:
    """Which GPUs meet ``query`` (TTFT <= ``ttft_s`` and TPOT <= ``tpot_s`` for a static batch), and at what cost.

    Every GPU x precision x TP is predicted (one vectorised :func:`sweep` per GPU). For each GPU the row
    shown is its passing configuration with the smallest TP, and among those the cheapest precision per
    million output tokens; a GPU with none shows its closest miss and why it fails ("TTFT 421 ms > 200 ms",
    "does not fit: needs 146 GB per GPU, has 85.9 GB (...)", "'fp8' computes in fp8 but a100-80gb has no FP8
    tensor cores ..."). Passing GPUs come first, cheapest first. ``all_configs=True`` returns every
    configuration instead of one row per GPU.
    With no ``precisions`` each GPU uses the model's native format (fp16 on chips without bf16). ``layout``
    (expert-parallel ways: a TP they do not divide fails with the reason; KV format; engine) applies to every
    configuration.
    """
    spec = get_model(model)
    hws = [get_hardware(g) for g in split_refs("gpus", gpus)] if gpus is not None else list_hardware()
    schemes = [get_scheme(p) for p in split_refs("precisions", precisions)] if precisions is not None else None
    query = query.checked()
    tp_list = sorted({require_positive_int("tp", t) for t in ([tps] if isinstance(tps, int) else list(tps))})
    if not tp_list:
        raise InfercastError("needs at least one value", field="tps")
    layout = replace(layout, ep=require_positive_int("ep", layout.ep))
    check_context(spec, query.input_len, query.output_len)
    per_gpu: list[dict[str, object]] = []
    every: list[dict[str, object]] = []
    for hw in hws:
        configs = screen_gpu(spec, hw, schemes or [get_scheme(default_precision(spec, hw))], tp_list, query, layout)
        every.extend(configs)
        per_gpu.append(_best(configs))
    df = _ranked(pd.DataFrame(every if all_configs else per_gpu), all_configs)
    df.attrs.update(
        model=spec.id,
        ttft_s=query.ttft_s,
        tpot_s=query.tpot_s,
        input_len=query.input_len,
        output_len=query.output_len,
        batch=query.batch,
        tps=tp_list,
        ep=layout.ep,
        kv_precision=layout.kv_precision,
        engine=layout.engine,
    )
    return df


def _best(configs: list[dict[str, object]]) -> dict[str, object]:
    """A GPU's row: its passing configuration with the smallest TP (cheapest among those), else its closest miss."""
    passing = [c for c in configs if c["passes"]]
    evaluated = [c for c in configs if "_miss" in c]
    if passing:
        best = min(passing, key=lambda c: (c["tp"], c["cost_per_mtok_usd"]))
    elif evaluated:
        best = min(evaluated, key=lambda c: (c["_miss"], c["tp"]))
    else:
        best = configs[0]
    return best | {"configs_tried": len(configs), "configs_passing": len(passing)}


def _ranked(df: pd.DataFrame, all_configs: bool) -> pd.DataFrame:
    """Passing rows first, cheapest first, then the closest misses; the columns ``select`` shows."""
    df = df.reindex(columns=[*_SELECT_COLUMNS, "_miss"])
    df["_passing_cost"] = np.where(df["passes"].astype(bool), df["cost_per_mtok_usd"].fillna(np.inf), np.inf)
    df = df.sort_values(["_passing_cost", "_miss", "tp"], na_position="last", kind="stable")
    df = df.drop(columns=["_miss", "_passing_cost"]).reset_index(drop=True)
    df["tp"] = df["tp"].astype("Int64")  # None where the precision cannot run at all
    if not all_configs:
        df["configs_tried"] = df["configs_tried"].astype(int)
        df["configs_passing"] = df["configs_passing"].astype(int)
    else:
        df = df.drop(columns=["configs_tried", "configs_passing"])
    df["passes"] = df["passes"].astype(bool)
    df["reason"] = df["reason"].fillna("")
    return df
