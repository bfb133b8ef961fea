"""The configurations a plan considers: one serving unit each (a replica, or a prefill:decode group).

A :class:`Candidate` is what one deploys and then replicates: GPU, number format, TP/EP (and, for an
aggregated replica, pipeline stages and attention data parallelism), KV format, engine and its knobs (max
running requests, chunk budget), and either one aggregated replica or a disaggregated group of ``prefill``
instances (TP ``tp``) feeding ``decode`` instances (TP ``decode_tp``).
:class:`CandidateSpace` is the grid; :meth:`CandidateSpace.enumerate` its cartesian product.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from infercast.errors import InfercastError, require_positive_int
from infercast.specs.engine import get_engine
from infercast.specs.precision import get_kv_format


@dataclass(frozen=True)
class Candidate:
    """One deployable unit; ``prefill``/``decode`` > 0 makes it disaggregated."""

    gpu: str
    precision: str | None
    """Number format (None: the model's native one, filled in by the planner)."""
    tp: int
    ep: int = 1
    kv_precision: str | None = None
    engine: str = "vllm"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    prefill: int = 0
    """Prefill instances of a disaggregated group (0: aggregated)."""
    decode: int = 0
    decode_tp: int | None = None
    pp: int = 1
    """Pipeline stages of an aggregated replica (each ``tp x attention_dp`` GPUs)."""
    attention_dp: int = 1
    """Attention data parallelism of an aggregated replica (MoE wide EP: ``ep`` spans ``tp x attention_dp``)."""
    stream_token_s: float | None = None
    """The API server's front-end, seconds per streamed token (None: the engine profile's; 0: none). A plan sets
    it for every candidate (its title says so), so the label leaves it out."""

    @property
    def disaggregated(self) -> bool:
        return self.prefill > 0

    @property
    def mode(self) -> str:
        return "disagg" if self.disaggregated else "agg"

    @property
    def gpus(self) -> int:
        """GPUs in one unit."""
        if self.disaggregated:
            return self.prefill * self.tp + self.decode * (self.decode_tp or self.tp)
        return self.tp * self.attention_dp * self.pp

    @property
    def label(self) -> str:
        """Short readable id: ``h100-sxm fp8 tp4 seqs256 chunk8192`` or ``h100-sxm fp8 1xtp4:2xtp2``."""
        parts = [self.gpu, self.precision or "native"]
        if self.kv_precision:
            parts.append(f"kv-{self.kv_precision}")
        if self.disaggregated:
            parts.append(f"P{self.prefill}xtp{self.tp}:D{self.decode}xtp{self.decode_tp or self.tp}")
        else:
            parts.append(f"tp{self.tp}")
        if self.attention_dp > 1:
            parts.append(f"adp{self.attention_dp}")
        if self.ep > 1:
            parts.append(f"ep{self.ep}")
        if self.pp > 1:
            parts.append(f"pp{self.pp}")
        if self.engine != "vllm":
            parts.append(self.engine)
        if self.max_num_seqs is not None:
            parts.append(f"seqs{self.max_num_seqs}")
        if self.max_num_batched_tokens is not None:
            parts.append(f"chunk{self.max_num_batched_tokens}")
        return " ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "mode": self.mode, "gpus": self.gpus, "label": self.label}


def _listed(name: str, values: object) -> list:
    """A list, tuple or set of values as a list; anything else is an error naming ``name``."""
    if not isinstance(values, list | tuple | set | frozenset):
        raise InfercastError(f"expected a value or a list of values, got {values!r:.80}", field=name)
    return list(values)


def _ints(name: str, values: int | Sequence[int] | None, default: Sequence[int | None]) -> list:
    if values is None:
        return list(default)
    items = [values] if isinstance(values, int | str) else _listed(name, values)
    if not items:
        raise InfercastError("needs at least one value", field=name)
    return sorted({require_positive_int(name, v) for v in items})


def _names(name: str, values: str | Sequence[str | None] | None, default: Sequence[str | None]) -> list:
    if values is None:
        return list(default)
    items = [values] if isinstance(values, str) else _listed(name, values)
    out: list[str | None] = []
    for item in items:
        if isinstance(item, str):
            out.extend(p.strip().lower() for p in item.split(",") if p.strip())
        elif item is None:
            out.append(None)
        else:
            raise InfercastError(f"expected names, got {item!r}", field=name)
    if not out:
        raise InfercastError("needs at least one value", field=name)
    return list(dict.fromkeys(out))


def parse_ratios(values: str | Sequence[str | tuple[int, int]] | None) -> list[tuple[int, int]]:
    """``"1:1,1:2,2:1"`` or ``[(1, 2)]`` -> prefill:decode instance counts."""
    if values is None:
        return []
    items = values.replace(",", " ").split() if isinstance(values, str) else _listed("ratios", values)
    out: list[tuple[int, int]] = []
    for item in items:
        try:
            p, d = item.split(":") if isinstance(item, str) else item
            pair = (int(p), int(d))
        except (TypeError, ValueError):
            raise InfercastError(f"expected prefill:decode counts like 1:2, got {item!r}", field="ratios") from None
        if min(pair) < 1:
            raise InfercastError(f"counts must be >= 1, got {item!r}", field="ratios")
        out.append(pair)
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class CandidateSpace:
    """The grid of candidates. ``None`` knobs mean the engine's default; ``ratios`` (prefill:decode
    instance counts) add disaggregated groups for every prefill TP in ``tps`` x decode TP in ``decode_tps``;
    ``pps`` / ``attention_dps`` apply to aggregated replicas (disaggregated pools are sized by TP only);
    ``aggregated=False`` (``replace(space, aggregated=False)``) keeps the disaggregated groups only."""

    gpus: tuple[str, ...]
    precisions: tuple[str | None, ...] = (None,)
    tps: tuple[int, ...] = (1, 2, 4, 8)
    eps: tuple[int, ...] = (1,)
    kv_precisions: tuple[str | None, ...] = (None,)
    engines: tuple[str, ...] = ("vllm",)
    max_num_seqs: tuple[int | None, ...] = (None,)
    max_num_batched_tokens: tuple[int | None, ...] = (None,)
    aggregated: bool = True
    ratios: tuple[tuple[int, int], ...] = ()
    decode_tps: tuple[int, ...] | None = None
    pps: tuple[int, ...] = (1,)
    attention_dps: tuple[int, ...] = (1,)
    extra: tuple[Candidate, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.aggregated and not self.ratios:
            raise InfercastError(
                "with aggregated serving off, give prefill:decode ratios (`disagg` 1:1,1:2)", field="ratios"
            )

    @classmethod
    def build(
        cls,
        gpus: str | Sequence[str],
        *,
        precisions: str | Sequence[str | None] | None = None,
        tps: int | Sequence[int] | None = None,
        eps: int | Sequence[int] | None = None,
        kv_precisions: str | Sequence[str | None] | None = None,
        engines: str | Sequence[str] | None = None,
        max_num_seqs: int | Sequence[int] | None = None,
        max_num_batched_tokens: int | Sequence[int] | None = None,
        ratios: str | Sequence[str | tuple[int, int]] | None = None,
        decode_tps: int | Sequence[int] | None = None,
        pps: int | Sequence[int] | None = None,
        attention_dps: int | Sequence[int] | None = None,
    ) -> CandidateSpace:
        """Validated grid from names, comma-separated strings or sequences (aggregated replicas included)."""
        space = cls(
            gpus=tuple(_names("gpus", gpus, ())),
            precisions=tuple(_names("precisions", precisions, (None,))),
            tps=tuple(_ints("tps", tps, (1, 2, 4, 8))),
            eps=tuple(_ints("eps", eps, (1,))),
            kv_precisions=tuple(_names("kv_precisions", kv_precisions, (None,))),
            engines=tuple(_names("engines", engines, ("vllm",))),
            max_num_seqs=tuple(_ints("max_num_seqs", max_num_seqs, (None,))),
            max_num_batched_tokens=tuple(_ints("max_num_batched_tokens", max_num_batched_tokens, (None,))),
            ratios=tuple(parse_ratios(ratios)),
            decode_tps=tuple(_ints("decode_tps", decode_tps, ())) if decode_tps is not None else None,
            pps=tuple(_ints("pps", pps, (1,))),
            attention_dps=tuple(_ints("attention_dps", attention_dps, (1,))),
        )
        if not space.gpus:
            raise InfercastError("needs at least one GPU", field="gpus")
        for engine in space.engines:  # refused now, not pruned silently later
            get_engine(engine)
        for kv in space.kv_precisions:
            if kv is not None:
                get_kv_format(kv)
        return space

    def enumerate(self) -> list[Candidate]:
        """Every candidate of the grid, aggregated ones first (deterministic order)."""
        out: list[Candidate] = []
        base = itertools.product(self.gpus, self.precisions, self.kv_precisions, self.engines, self.eps)
        for gpu, prec, kv, engine, ep in base:
            if self.aggregated:
                layouts = itertools.product(
                    self.tps, self.attention_dps, self.pps, self.max_num_seqs, self.max_num_batched_tokens
                )
                for tp, dp, pp, seqs, chunk in layouts:
                    out.append(Candidate(gpu, prec, tp, ep, kv, engine, seqs, chunk, pp=pp, attention_dp=dp))
            for (p, d), tp, dtp in itertools.product(self.ratios, self.tps, self.decode_tps or self.tps):
                out.append(Candidate(gpu, prec, tp, ep, kv, engine, None, None, p, d, dtp))
        out.extend(self.extra)
        return out
