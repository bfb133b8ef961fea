"""Shared CLI plumbing: JSON vs rich output, option types."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, overload

import numpy as np
import typer
from rich.console import Console

from infercast.errors import require_positive_number

if TYPE_CHECKING:
    from infercast.specs.deployment import Deployment
    from infercast.specs.engine import EngineSpec

console = Console(width=None if Console().is_terminal else 120)
err_console = Console(stderr=True)


def wrote(path: object, what: str = "") -> None:
    """'wrote PATH' (on stderr, so that --json output stays one document), for every file a command writes."""
    err_console.print(f"wrote {path}" + (f" ({what})" if what else ""), markup=False, highlight=False, soft_wrap=True)


KV_HELP = (
    "KV-cache format: bf16, fp16, fp8, int8. Default: the checkpoint's own KV quantisation when its config sets one; "
    "else 8-bit (fp8) for --precision fp8 on trtllm and nvfp4 on vllm, sglang and trtllm (their quantised checkpoints "
    "set kv_cache_quant_algo FP8, which the engine follows); else the model dtype (bf16, fp16 on chips without bf16)."
)
JSON_HELP = "Print machine-readable JSON instead of tables."

# a replica's layout, as `predict` and `memory` take it
EpOption = Annotated[int, typer.Option(help="Expert-parallel ways (MoE; must divide tp x attention-dp).")]
PpOption = Annotated[int, typer.Option(help="Pipeline stages (each tp x attention-dp GPUs; may span nodes).")]
StreamTokenOption = Annotated[
    float | None,
    typer.Option(
        "--stream-token-us",
        help="The API server's front-end: microseconds of serial work per streamed token (0: none, as with "
        "post-processing workers; default: the engine profile's, fitted for trtllm in engine_load.yaml, none for the "
        "others).",
    ),
]
AttentionDpOption = Annotated[
    int,
    typer.Option(
        "--attention-dp",
        help="Attention data parallelism (MoE, DeepSeek-style wide EP): attention replicated this many times, "
        "experts split --ep ways over all tp x attention-dp GPUs.",
    ),
]


@dataclass(frozen=True)
class ReplicaFlags:
    """One replica as a command's flags give it (``predict``, ``memory``): model, GPU, layout, number formats and
    engine (an engine a ``--launch`` adjusted is an :class:`EngineSpec`)."""

    model: str
    gpu: str
    tp: int = 1
    ep: int = 1
    pp: int = 1
    attention_dp: int = 1
    precision: str | None = None
    kv_precision: str | None = None
    engine: str | EngineSpec = "vllm"

    def deployment(self) -> Deployment:
        """The resolved deployment (a bad part is a one-line error naming its field)."""
        from infercast.specs.deployment import Deployment

        return Deployment.resolve(
            self.model,
            self.gpu,
            tp=self.tp,
            ep=self.ep,
            precision=self.precision,
            kv_precision=self.kv_precision,
            engine=self.engine,
            pp=self.pp,
            attention_dp=self.attention_dp,
        )


def _default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return str(obj)


def _clean(obj: Any) -> Any:
    """Replace non-finite floats (not valid JSON) by None."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def emit_json(data: Any) -> None:
    """Write ``data`` as JSON to stdout (plain print: no rich markup or wrapping)."""
    print(json.dumps(_clean(data), indent=2, default=_default))


@overload
def parse_int_list(field: str, text: str) -> list[int]: ...
@overload
def parse_int_list(field: str, text: None) -> None: ...
@overload
def parse_int_list(field: str, text: str | None) -> list[int] | None: ...
def parse_int_list(field: str, text: str | None) -> list[int] | None:
    """'1,8,64' or ranges 'start:stop[:step]' (inclusive) -> positive integers; None stays None.

    Anything else is a one-line error naming the option.
    """
    if text is None:
        return None
    from infercast.errors import InfercastError
    from infercast.limits import MAX_GRID_VALUES

    values: list[int] = []
    try:
        for part in (p.strip() for p in text.split(",")):
            if not part or part.count(":") > 2:  # '1,,2' or '1:2:3:4': a typo, not a list to guess at
                raise ValueError(part)
            if ":" in part:
                start, stop, *step = (_ascii_int(x) for x in part.split(":"))
                span = range(start, stop + 1, step[0] if step else 1)
                if len(values) + len(span) > MAX_GRID_VALUES:
                    raise InfercastError(
                        f"{part!r} has {len(span):,} values; the limit is {MAX_GRID_VALUES:,} per option", field=field
                    )
                values.extend(span)
            else:
                values.append(_ascii_int(part))
    except InfercastError:
        raise
    except ValueError:
        raise InfercastError(f"expected integers like 1,8,64 or 128:4096:128, got {text!r}", field=field) from None
    if not values or min(values) < 1:
        raise InfercastError(f"must be positive integers, got {text!r}", field=field)
    if max(values) > MAX_INT_OPTION:
        raise InfercastError(f"{max(values)} is too large; the limit is {MAX_INT_OPTION}", field=field)
    return values


MAX_INT_OPTION = 2**31 - 1
"""Largest value an integer list option takes (int32): every size in the models is far below it, and it keeps
products of sizes exact in int64/float64."""


def _ascii_int(text: str) -> int:
    """An integer written in ASCII digits with an optional sign ('²' or '٣' are refused, unlike ``int()``)."""
    text = text.strip()
    if not text.lstrip("+-").isascii() or not text.lstrip("+-").isdigit() or text.count("-") + text.count("+") > 1:
        raise ValueError(text)
    return int(text)


@overload
def parse_float_list(field: str, text: str) -> list[float]: ...
@overload
def parse_float_list(field: str, text: None) -> None: ...
@overload
def parse_float_list(field: str, text: str | None) -> list[float] | None: ...
def parse_float_list(field: str, text: str | None) -> list[float] | None:
    """'0.5,1,2.5' -> finite numbers > 0; None stays None. Anything else is a one-line error naming the option."""
    if text is None:
        return None
    from infercast.errors import InfercastError, require_positive_number

    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise InfercastError(f"expected numbers like 0.5,1,2.5, got {text!r}", field=field)
    values: list[float] = []
    for part in parts:
        try:
            values.append(require_positive_number(field, part))
        except InfercastError:
            raise InfercastError(f"expected numbers > 0 like 0.5,1,2.5, got {part!r}", field=field) from None
    return values


def stream_token_seconds(microseconds: float | None) -> float | None:
    """``--stream-token-us`` in seconds (None stays None), refused unless a number >= 0."""
    if microseconds is None:
        return None
    return 1e-6 * require_positive_number("stream_token_us", microseconds, allow_zero=True)


def require_torch(command: str) -> None:
    """The real engine and the harness run PyTorch: without it, one line saying how to install it."""
    from infercast.errors import InfercastError

    try:
        import torch  # noqa: F401
    except ImportError:
        raise InfercastError(
            "needs PyTorch, which is not installed: pip install 'infercast[measure]'", field=command
        ) from None
