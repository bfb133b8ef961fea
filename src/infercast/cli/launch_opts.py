"""``--launch``: read the user's engine launch (vLLM / SGLang command line, TensorRT-LLM YAML) for a command, and the
"Engine settings" block every engine-taking command prints (:class:`infercast.specs.engine_launch.EngineLaunch`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from infercast.cli.common import console, err_console
from infercast.errors import InfercastError
from infercast.specs.engine import EngineSpec, get_engine
from infercast.specs.engine_launch import EngineLaunch, UserLaunch, parse_launch

if TYPE_CHECKING:
    from infercast.records.bench_results import RunFacts
    from infercast.records.record import Record
    from infercast.specs.deployment import Deployment

LAUNCH_HELP = (
    "Your engine launch: a 'vllm serve MODEL --max-num-seqs 256 ...' or 'python -m sglang.launch_server ...' or "
    "'trtllm-serve ...' line (quoted), or a TensorRT-LLM extra_llm_api_options YAML path. Its batch limit, token "
    "budget, memory fraction, block size, KV dtype, CUDA-graph sizes, MoE kernel (vLLM's VLLM_* variables before "
    "the command, TensorRT-LLM's moe_config backend), TP, EP and attention DP replace the engine's release "
    "defaults (simulate also runs its speculative drafts); flags and variables infercast does not model are named "
    "in a warning."
)
LaunchOption = Annotated[str | None, typer.Option("--launch", help=LAUNCH_HELP)]


def apply_launch(
    launch: str | None,
    engine: str,
    tp: int,
    kv_precision: str | None,
    flags: dict[str, tuple[Any, str]] | None = None,
    layout: tuple[int, int] = (1, 1),
) -> tuple[str | EngineSpec, int, str | None, tuple[int, int]]:
    """(engine, tp, kv_precision, (ep, attention_dp)) for a command given ``--launch``, ``flags`` (engine fields
    the command's own options set: field -> (value, flag text)) and its --ep / --attention-dp ``layout``.
    ``--engine`` of the launch's family (vllm-0.14 for a vllm line) is kept, else the launch's engine; an explicit
    --tp / --ep / --attention-dp / --kv-precision wins over the launch's."""
    if launch is None and not flags:
        return engine, tp, kv_precision, layout
    parsed = parse_launch(launch) if launch is not None else UserLaunch(engine=engine)
    for warning in parsed.warnings:
        err_console.print(f"warning: {escape(warning)}")
    name = engine if engine.split("-")[0] == parsed.engine.split("-")[0] else parsed.engine
    if launch is not None and name != engine and engine != "vllm":
        raise InfercastError(f"--engine {engine} but the launch is {parsed.engine}'s", field="engine")
    given = {k: v for k, v in (flags or {}).items() if v[0] is not None}
    user = UserLaunch(parsed.engine, {**parsed.overrides, **given}, None if kv_precision else parsed.kv_precision)
    spec = user.apply(get_engine(name))
    if tp == 1 and parsed.tp:
        tp = parsed.tp
    ep, attention_dp = layout
    ep = parsed.ep if ep == 1 and parsed.ep else ep
    attention_dp = parsed.attention_dp if attention_dp == 1 and parsed.attention_dp else attention_dp
    return spec, tp, kv_precision or parsed.kv_precision, (ep, attention_dp)


def launch_drafts(launch: str | None) -> tuple[int, bool] | None:
    """The launch's speculative decoding: draft tokens per step and whether they come from the model's MTP layers
    (None: no launch, or no drafting in it)."""
    parsed = None if launch is None else parse_launch(launch)
    if parsed is None or parsed.spec_tokens is None:
        return None
    return parsed.spec_tokens, parsed.drafts_with_mtp


def engine_settings(dep: Deployment, prefix_caching: bool = True) -> EngineLaunch:
    """The settings ``dep`` runs with, sources named (GPU tiers against the catalog preset of the same id)."""
    try:
        base = get_engine(dep.engine.id)
    except InfercastError:
        base = None
    return EngineLaunch.of(dep, base, prefix_caching)


def print_settings(dep: Deployment, prefix_caching: bool = True) -> None:
    """The compact 'Engine settings' block."""
    console.print(escape("\n".join(engine_settings(dep, prefix_caching).lines())), highlight=False)


def launch_knobs(launch: str, command: str = "plan", limits: bool = True) -> dict[str, Any]:
    """A grid (``plan``, ``sweep``) fixed to a launch: its engine, TP, KV format and, with ``limits``, batch limit
    and token budget. The grids take no memory fraction or block size: a launch that sets them is told so."""
    parsed = parse_launch(launch)
    for warning in parsed.warnings:
        err_console.print(f"warning: {escape(warning)}")
    taken = ("max_num_seqs", "max_num_batched_tokens") if limits else ()
    dropped = [f for f in parsed.overrides if f not in taken]
    if dropped:
        err_console.print(f"warning: launch: {command} runs with the engine's own {', '.join(dropped)}")
    knobs: dict[str, Any] = {"engines": [parsed.engine]}
    for key in taken:
        if key in parsed.overrides:
            knobs[key] = [parsed.overrides[key][0]]
    if parsed.tp:
        knobs["tps"] = [parsed.tp]
    if parsed.kv_precision:
        knobs["kv_precisions"] = [parsed.kv_precision]
    return knobs


SERVING_KNOBS = {
    "max_num_seqs": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "gpu_memory_utilization": "kv_fraction",
    "scheduler": "scheduler",
    "moe_backend": "moe_backend",
}
"""Launch settings a serving record carries: record field -> engine field (the rest of a launch sets the record's
engine, TP and KV format)."""


def read_validate_launch(launch: str, facts: RunFacts) -> tuple[UserLaunch, RunFacts]:
    """``validate --launch``: the parsed launch (its warnings printed) and the run facts it completes: the model,
    engine and TP a benchmark file does not record (the launch's TP, else the engine's default of 1)."""
    from dataclasses import replace

    parsed = parse_launch(launch)
    for warning in parsed.warnings:
        err_console.print(f"warning: {escape(warning)}")
    dropped = [f for f in parsed.overrides if f not in SERVING_KNOBS.values()]
    if dropped:
        err_console.print(f"warning: launch: validate runs with the engine's own {', '.join(dropped)}")
    from infercast.specs.catalog import model_id_for_repo

    model = facts.model or (model_id_for_repo(parsed.model) if parsed.model else None) or ""
    filled = replace(facts, model=model, engine=facts.engine or parsed.engine, tp=facts.tp or parsed.tp or 1)
    return parsed, filled


def launched_records(records: list[Record], parsed: UserLaunch) -> list[Record]:
    """The serving records read as runs of a launch: its engine family, TP, expert and attention data
    parallelism, KV format, batch limit, token budget and memory fraction fill what each record leaves at the
    preset's default (1, 0 or empty); what a record states itself wins. Other kinds are kept as they are."""
    from dataclasses import replace

    out = []
    for rec in records:
        if not rec.kind.startswith("serving_"):
            out.append(rec)
            continue
        same_family = rec.engine.split("-")[0] == parsed.engine.split("-")[0]
        knobs = {
            k: parsed.overrides[e][0] for k, e in SERVING_KNOBS.items() if e in parsed.overrides and not getattr(rec, k)
        }
        out.append(
            replace(
                rec,
                engine=rec.engine if same_family else parsed.engine,
                tp=parsed.tp if parsed.tp and rec.tp == 1 else rec.tp,
                ep=parsed.ep if parsed.ep and rec.ep == 1 else rec.ep,
                attention_dp=parsed.attention_dp if parsed.attention_dp and rec.attention_dp == 1 else rec.attention_dp,
                kv_precision=rec.kv_precision or parsed.kv_precision or "",
                **knobs,
            )
        )
    return out


def record_settings(records: list[Record], limit: int = 3) -> tuple[list[EngineLaunch], int]:
    """The engine settings of the serving records' first ``limit`` distinct deployments (each with the record's
    own batch limit, token budget, memory fraction and step policy as user-launch values), and how many distinct
    deployments there are. A record whose deployment cannot be resolved is left out (validate lists it)."""
    from dataclasses import replace

    from infercast.calibrate.predict import deployment_of

    seen: dict[tuple, EngineLaunch | None] = {}
    for rec in records:
        if not rec.kind.startswith("serving_"):
            continue
        key = (rec.model, rec.gpu, rec.engine, rec.tp, rec.ep, rec.precision, rec.kv_precision)
        key += tuple(getattr(rec, k) for k in SERVING_KNOBS)
        if key in seen:
            continue
        seen[key] = None
        if sum(v is not None for v in seen.values()) == limit:
            continue
        overrides = {e: (getattr(rec, k), f"the run's {k}") for k, e in SERVING_KNOBS.items() if getattr(rec, k)}
        try:
            dep = deployment_of(rec)
        except InfercastError:
            continue
        seen[key] = engine_settings(replace(dep, engine=UserLaunch(dep.engine.id, overrides).apply(dep.engine)))
    return [v for v in seen.values() if v is not None], len(seen)
