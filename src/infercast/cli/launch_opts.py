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
    from infercast.specs.deployment import Deployment

LAUNCH_HELP = (
    "Your engine launch: a 'vllm serve MODEL --max-num-seqs 256 ...' or 'python -m sglang.launch_server ...' or "
    "'trtllm-serve ...' line (quoted), or a TensorRT-LLM extra_llm_api_options YAML path. Its batch limit, token "
    "budget, memory fraction, block size, KV dtype and TP replace the engine's release defaults; flags infercast "
    "does not model are named in a warning."
)
LaunchOption = Annotated[str | None, typer.Option("--launch", help=LAUNCH_HELP)]


def apply_launch(
    launch: str | None, engine: str, tp: int, kv_precision: str | None, flags: dict[str, tuple[Any, str]] | None = None
) -> tuple[str | EngineSpec, int, str | None]:
    """(engine, tp, kv_precision) for a command given ``--launch`` and ``flags`` (engine fields the command's own
    options set: field -> (value, flag text)). ``--engine`` of the launch's family (vllm-0.14 for a vllm line)
    is kept, else the launch's engine; an explicit --tp / --kv-precision wins over the launch's."""
    if launch is None and not flags:
        return engine, tp, kv_precision
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
    return spec, tp, kv_precision or parsed.kv_precision


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
