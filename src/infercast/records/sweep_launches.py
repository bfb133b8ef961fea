"""Launch settings of the dated serving sweeps' rows (``data/sweep_launches.yaml``), by the script version in effect.

The public sweeps in aiconfigurator-core's ``silicon_sample.csv`` were run by SemiAnalysis InferenceMAX, whose
per-(model, precision, GPU, engine) launch scripts set each server's step budget, sequence limit, memory fraction,
KV cache format and (SGLang) scheduler poll interval, some by the row's clients, lengths or layout. The data file
holds each script version (path @ commit (date)) with those settings as numbers or small expressions;
:func:`launch_for` gives a row the version dated on or before its measured date, evaluated for its load and layout.
"""

from __future__ import annotations

import ast
import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from infercast.errors import InfercastError
from infercast.files import load_yaml
from infercast.specs.engine import MOE_BACKENDS

DATA = Path(__file__).resolve().parent / "data" / "sweep_launches.yaml"
FIELD = "sweep_launches"
ACCEPTANCE = DATA.with_name("mtp_acceptance.yaml")
"""The per-token acceptance the MTP rows are read with (fitted by benchmarks/mtp_acceptance.py)."""
ENGINES = ("sglang", "trtllm", "vllm")
"""Engine families the file may name (the wheel's ``backend``)."""
CONFIG_MODELS = {
    "dsr1": "DeepSeek-R1",
    "gptoss": "GPT-OSS-120B",
    "70b": "Llama-3.1-70B",
    "glm5": "GLM-5",
    "qwen3_5": "Qwen3.5-397B",
    "kimik2_5": "Kimi-K2.5",
    "minimaxm2_5": "MiniMax-M2.5",
}
"""The sweeps' config-name prefixes (the ids of the wheel's database-dump rows: ``dsr1_b200_sglang_...``), as the
dated tables name those models (``model=DeepSeek-R1``)."""
EXPERT_PARALLEL = ("none", "always", "if-ep")
"""How a vLLM script lays out an MoE model on its TP GPUs: ``none`` (no ``--enable-expert-parallel``: experts split
tensor-parallel), ``always`` (the flag on every run: experts over all the GPUs), ``if-ep`` (the flag where the config
names EP > 1). Attention DP (``--data-parallel-size``) only on the rows ``dp_attention`` names."""
NUMERIC = (
    "budget",
    "max_seqs",
    "memory_fraction",
    "recv_interval",
    "batch_wait_iters",
    "batch_wait_ratio",
    "adp_balance_iters",
    "spec_tokens",
    "dp_attention",
    "graph_batch",
    "piecewise_tokens",
)
"""Settings that are numbers or expressions of the row (see the data file's header)."""
TEXT = {
    "kv_cache": ("fp8", "auto"),
    "speculative": ("mtp-config-exists", "mtp-image-match"),
    "expert_parallel": EXPERT_PARALLEL,
    "moe_backend": MOE_BACKENDS,
}
"""Settings that name one of a few values."""
OTHER = ("async_scheduling", "note")
NAMES = ("C", "ISL", "OSL", "TP", "EP", "DP")
"""What an expression may read: clients, prompt and output length, tensor / expert parallelism, attention-DP width."""
SOURCE = re.compile(r"^(?P<path>\S+) @ (?P<commit>[0-9a-f]{7,40}) \((?P<date>\d{4}-\d{2}-\d{2})\)$")


def _roundup(x: float, m: float) -> float:
    """``x`` rounded up to a whole multiple of ``m`` (the scripts' ``(x + m - 1) / m * m``)."""
    return math.ceil(x / m) * m


_FUNCTIONS: dict[str, Callable[..., Any]] = {"max": max, "min": min, "roundup": _roundup}
_OPS: dict[type, Any] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
}


@dataclass(frozen=True)
class SweepRow:
    """What a launch lookup needs of a dated sweep row: its family, measured date (YYYY-MM-DD), load and layout."""

    engine: str
    model: str
    precision: str
    gpu: str
    measured: str
    clients: int
    input_len: int
    output_len: int
    tp: int = 1
    ep: int = 1
    attention_dp: int = 1


@dataclass(frozen=True)
class Launch:
    """One row's launch settings (0: the engine's default, i.e. the preset's)."""

    source: str
    budget: int = 0
    max_seqs: int = 0
    memory_fraction: float = 0.0
    recv_interval: int = 0
    batch_wait_iters: int = 0
    batch_wait_ratio: float = 0.0
    adp_balance_iters: int = 0
    spec_tokens: int = 0
    kv_cache: str = ""
    async_scheduling: bool = False
    speculative: str = ""
    expert_parallel: str = ""
    dp_attention: bool = False
    moe_backend: str = ""
    graph_batch: int = 0
    """TensorRT-LLM ``cuda_graph_config.max_batch_size``: the largest generation batch replayed as a CUDA graph."""
    piecewise_tokens: int = 0
    """TensorRT-LLM piecewise CUDA graphs (``torch_compile_config``): the largest of ``capture_num_tokens``; 0: off."""
    note: str = ""


@dataclass(frozen=True)
class _Version:
    date: str
    source: str
    settings: dict[str, Any]
    points: Any = None
    """The rows this script ran (an expression; None: all): where an MTP config of the family ran beside it, the
    non-MTP config's search space, so that the MTP config's points do not take this script's settings."""


def _evaluate(node: ast.AST, env: dict[str, int]) -> Any:
    """An expression node over ``env`` (numbers, the row's names, arithmetic, comparisons, and/or, if-else, calls
    of max/min/roundup); anything else is refused."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, env)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left, env), _evaluate(node.right, env))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPS:
        return _OPS[type(node.ops[0])](_evaluate(node.left, env), _evaluate(node.comparators[0], env))
    if isinstance(node, ast.BoolOp):
        values = [bool(_evaluate(v, env)) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.IfExp):
        return _evaluate(node.body if _evaluate(node.test, env) else node.orelse, env)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        return _FUNCTIONS[node.func.id](*(_evaluate(a, env) for a in node.args))
    raise ValueError(f"'{ast.unparse(node)}' is not allowed")


def _compile(value: Any, where: str) -> Any:
    """A numeric setting: a number as it is, an expression parsed (and tried on a sample row) or refused."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InfercastError(f"{where} must be a number or an expression, got {value!r}", field=FIELD)
    if not isinstance(value, str):
        if value < 0:
            raise InfercastError(f"{where} must be >= 0, got {value}", field=FIELD)
        return value
    try:
        tree = ast.parse(value, mode="eval")
        _evaluate(tree, dict.fromkeys(NAMES, 8))
    except (SyntaxError, ValueError, TypeError) as exc:
        why = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise InfercastError(
            f"{where}: {value!r} is not an expression of {', '.join(NAMES)} ({why})", field=FIELD
        ) from None
    return tree


def _settings(raw: Any, where: str) -> dict[str, Any]:
    """One version's settings, checked (known keys, values of the right kind)."""
    if not isinstance(raw, dict):
        raise InfercastError(f"{where}.settings must be a mapping, got {raw!r}", field=FIELD)
    out: dict[str, Any] = {}
    for key, value in raw.items():
        at = f"{where}.settings.{key}"
        if key in NUMERIC:
            out[key] = _compile(value, at)
        elif key in TEXT:
            if value not in TEXT[key]:
                raise InfercastError(f"{at} must be one of {', '.join(TEXT[key])}, got {value!r}", field=FIELD)
            out[key] = value
        elif (key == "async_scheduling" and isinstance(value, bool)) or (key == "note" and isinstance(value, str)):
            out[key] = value
        else:
            allowed = ", ".join((*NUMERIC, *TEXT, *OTHER))
            raise InfercastError(f"{at}: unknown setting or wrong type {value!r}; settings: {allowed}", field=FIELD)
    return out


def _versions(raw: Any, where: str) -> tuple[_Version, ...]:
    """A family's script versions, oldest first, each with its source and the date it took effect."""
    if not isinstance(raw, list) or not raw:
        raise InfercastError(f"{where} must be a non-empty list of versions", field=FIELD)
    versions = []
    for i, entry in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(entry, dict) or not {"source", "settings"} <= set(entry) <= {"source", "settings", "points"}:
            raise InfercastError(f"{at} must hold 'source' and 'settings' (and optionally 'points')", field=FIELD)
        found = SOURCE.match(str(entry["source"]))
        if not found:
            raise InfercastError(
                f"{at}.source must read '<path> @ <commit> (YYYY-MM-DD)', got {entry['source']!r}", field=FIELD
            )
        points = _compile(entry["points"], f"{at}.points") if "points" in entry else None
        versions.append(_Version(found["date"], entry["source"], _settings(entry["settings"], at), points))
    if [v.date for v in versions] != sorted(v.date for v in versions):
        raise InfercastError(f"{where}: versions must be listed oldest first", field=FIELD)
    return tuple(versions)


def parse_launches(raw: Any, where: str = "sweep_launches.yaml") -> dict[tuple[str, ...], tuple[_Version, ...]]:
    """The file's families, keyed (engine, model, precision, gpu); a malformed entry refused naming it."""
    if not isinstance(raw, dict):
        raise InfercastError(f"{where} must map engines ({', '.join(ENGINES)}) to families", field=FIELD)
    families: dict[tuple[str, ...], tuple[_Version, ...]] = {}
    for engine, entries in raw.items():
        if engine not in ENGINES or not isinstance(entries, dict):
            raise InfercastError(
                f"{where}: {engine!r} must be one of {', '.join(ENGINES)}, mapping families", field=FIELD
            )
        for family, versions in entries.items():
            parts = str(family).split()
            if len(parts) != 3:
                raise InfercastError(f"{where}: {engine}.{family!r} must read '<model> <precision> <gpu>'", field=FIELD)
            families[(engine, *parts)] = _versions(versions, f"{where}: {engine}.{family}")
    return families


@cache
def launches() -> dict[tuple[str, ...], tuple[_Version, ...]]:
    """The packaged data file, read and checked once."""
    return parse_launches(load_yaml(DATA, FIELD), DATA.name)


def launch_for(row: SweepRow, table: dict[tuple[str, ...], tuple[_Version, ...]] | None = None) -> Launch | None:
    """The settings of the script version in effect on the row's measured date, for its load and layout (of
    several versions of that date, the first whose points hold the row); None where the file has no version of
    its family dated on or before then, or the row is among none of that date's points."""
    versions = (launches() if table is None else table).get((row.engine, row.model, row.precision, row.gpu), ())
    dated = [v for v in versions if v.date <= row.measured[:10]]
    if not dated:
        return None
    env = {
        "C": row.clients,
        "ISL": row.input_len,
        "OSL": row.output_len,
        "TP": row.tp,
        "EP": row.ep,
        "DP": row.attention_dp,
    }
    # versions of one date are the configs that ran then (a plain and an MTP script): the first listed whose
    # points hold the row ran it
    same_day = [v for v in dated if v.date == dated[-1].date]
    version = next((v for v in same_day if v.points is None or _evaluate(v.points, env)), None)
    if version is None:
        return None
    values = {k: _evaluate(v, env) if isinstance(v, ast.AST) else v for k, v in version.settings.items()}
    return Launch(
        source=version.source,
        budget=int(values.get("budget", 0)),
        max_seqs=int(values.get("max_seqs", 0)),
        memory_fraction=float(values.get("memory_fraction", 0.0)),
        recv_interval=int(values.get("recv_interval", 0)),
        batch_wait_iters=int(values.get("batch_wait_iters", 0)),
        batch_wait_ratio=float(values.get("batch_wait_ratio", 0.0)),
        adp_balance_iters=int(values.get("adp_balance_iters", 0)),
        spec_tokens=int(values.get("spec_tokens", 0)),
        kv_cache=values.get("kv_cache", ""),
        async_scheduling=bool(values.get("async_scheduling", False)),
        speculative=values.get("speculative", ""),
        expert_parallel=values.get("expert_parallel", ""),
        dp_attention=bool(values.get("dp_attention", False)),
        moe_backend=values.get("moe_backend", ""),
        graph_batch=int(values.get("graph_batch", 0)),
        piecewise_tokens=int(values.get("piecewise_tokens", 0)),
        note=values.get("note", ""),
    )


@cache
def mtp_acceptances() -> dict[str, float]:
    """The chance each MTP draft token of the sweeps' runs is accepted, per model (``data/mtp_acceptance.yaml``):
    fitted, not read from the runs, which do not report it."""
    raw = load_yaml(ACCEPTANCE, "mtp_acceptance")
    table = raw.get("acceptance") if isinstance(raw, dict) else None
    if not isinstance(table, dict) or not table:
        raise InfercastError(f"{ACCEPTANCE.name}: acceptance must map model ids to numbers in (0, 1)", field=FIELD)
    for model, value in table.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
            raise InfercastError(
                f"{ACCEPTANCE.name}: acceptance.{model} must be a number in (0, 1), got {value!r}", field=FIELD
            )
    return {str(m): float(v) for m, v in table.items()}


def mtp_acceptance(model: str) -> float:
    """The model's fitted MTP acceptance; a model without one takes the median of the fitted models'."""
    table = mtp_acceptances()
    return table.get(model, float(statistics.median(table.values())))
