"""``select``: which GPUs meet a TTFT/TPOT target for a static batch, and at what cost — the capacity
planner's analytic screen (:mod:`infercast.plan.screen`) shown per GPU.

It answers the unloaded question (a batch run alone, no queueing, no percentiles). Traffic, tail latency and
fleet size are :func:`infercast.plan.plan`'s: every configuration ``select`` fails, ``plan`` prunes for the
same reason, and ``infercast select`` points there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from infercast.analysis.compare import split_refs
from infercast.analysis.scenario import check_context
from infercast.errors import InfercastError, require_positive_int, require_positive_number
from infercast.plan.screen import screen_gpu
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
    ttft_s: float,
    tpot_s: float,
    input_len: int,
    output_len: int,
    batch: int = 1,
    precisions: str | Sequence[str] | None = None,
    tps: int | Sequence[int] = (1, 2, 4, 8),
    ep: int = 1,
    kv_precision: str | None = None,
    engine: str = "vllm",
    all_configs: bool = False,
) -> pd.DataFrame:
    """Which GPUs meet ``TTFT <= ttft_s`` and ``TPOT <= tpot_s`` (seconds), and at what cost.

    Every GPU x precision x TP is predicted (one vectorised :func:`sweep` per GPU). For each GPU the row
    shown is its passing configuration with the smallest TP, and among those the cheapest precision per
    million output tokens; a GPU with none shows its closest miss and why it fails ("TTFT 421 ms > 200 ms",
    "does not fit: needs 146 GB per GPU, has 85.9 GB (...)", "'fp8' computes in fp8 but a100-80gb has no FP8
    tensor cores ..."). Passing GPUs come first, cheapest first. ``all_configs=True`` returns every
    configuration instead of one row per GPU.
    With no ``precisions`` each GPU uses the model's native format (fp16 on chips without bf16). ``ep``
    (expert-parallel ways; a TP it does not divide fails with the reason) and ``kv_precision`` apply to
    every configuration.
    """
    spec = get_model(model)
    hws = [get_hardware(g) for g in split_refs("gpus", gpus)] if gpus is not None else list_hardware()
    schemes = [get_scheme(p) for p in split_refs("precisions", precisions)] if precisions is not None else None
    ttft_s = require_positive_number("ttft", ttft_s)
    tpot_s = require_positive_number("tpot", tpot_s)
    input_len = require_positive_int("input_len", input_len)
    output_len = require_positive_int("output_len", output_len)
    batch = require_positive_int("batch", batch)
    tp_list = sorted({require_positive_int("tp", t) for t in ([tps] if isinstance(tps, int) else list(tps))})
    if not tp_list:
        raise InfercastError("needs at least one value", field="tps")
    ep = require_positive_int("ep", ep)
    check_context(spec, input_len, output_len)

    per_gpu: list[dict[str, object]] = []
    every: list[dict[str, object]] = []
    for hw in hws:
        configs = screen_gpu(
            spec,
            hw,
            schemes or [get_scheme(default_precision(spec, hw))],
            tp_list,
            ttft_s=ttft_s,
            tpot_s=tpot_s,
            input_len=input_len,
            output_len=output_len,
            batch=batch,
            ep=ep,
            kv_precision=kv_precision,
            engine=engine,
        )
        every.extend(configs)
        passing = [c for c in configs if c["passes"]]
        evaluated = [c for c in configs if "_miss" in c]
        if passing:
            best = min(passing, key=lambda c: (c["tp"], c["cost_per_mtok_usd"]))
        elif evaluated:
            best = min(evaluated, key=lambda c: (c["_miss"], c["tp"]))
        else:
            best = configs[0]
        per_gpu.append(best | {"configs_tried": len(configs), "configs_passing": len(passing)})

    df = pd.DataFrame(every if all_configs else per_gpu)
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
    df.attrs.update(
        model=spec.id,
        ttft_s=ttft_s,
        tpot_s=tpot_s,
        input_len=input_len,
        output_len=output_len,
        batch=batch,
        tps=tp_list,
        ep=ep,
        kv_precision=kv_precision,
        engine=engine,
    )
    return df
