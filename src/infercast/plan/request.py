"""What a plan is asked, as typed parts: the search space, the traffic, the SLOs, prices, the daily load, and how
the searches run (:class:`PlanRequest`). :func:`plan_request` is the one place where the keywords of
``infercast.plan(model, gpus, slo=..., rate=..., ...)`` become a request; the CLI builds one from its flags.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from infercast.errors import InfercastError, nearest, require_positive_number
from infercast.plan.candidates import CandidateSpace
from infercast.plan.costing import gpu_prices
from infercast.plan.daily import LoadProfile, load_profile
from infercast.plan.executor import Progress
from infercast.plan.slo import SLOSet
from infercast.plan.traffic import Traffic
from infercast.specs.catalog import get_model
from infercast.specs.model import ModelSpec


@dataclass(frozen=True)
class Execution:
    """Where the searches run: ``executor`` local (processes on ``workers`` cores), serial, or ray
    (``ray_address`` or a local instance); none of these changes the answer. ``verify``: re-simulate the chosen
    fleet at the target rate; ``exhaustive``: search every candidate (no cost bound); ``progress`` is told
    (phase, done, total) as tasks finish."""

    executor: str = "local"
    workers: int | None = None
    ray_address: str | None = None
    verify: bool = True
    exhaustive: bool = False
    progress: Progress | None = field(default=None, compare=False)


@dataclass(frozen=True)
class DailyLoad:
    """A day's load: the fleet is sized for its peak and the chosen unit replayed through an autoscaler whose new
    units serve ``scale_up_delay_s`` after they are ordered."""

    profile: LoadProfile
    scale_up_delay_s: float = 300.0


@dataclass(frozen=True)
class PlanRequest:
    """Everything a plan needs. ``prices``: $/GPU-hour overrides (None: the catalog's); ``stream_token_s``: every
    candidate's API-server front-end, seconds per streamed token (0: none; None: each engine profile's). With a
    ``daily`` load the traffic's rate is the one the fleet is sized for (:func:`target_load`: its peak)."""

    model: str | ModelSpec
    space: CandidateSpace
    traffic: Traffic
    slo: SLOSet
    prices: Mapping[str, float] | None = None
    stream_token_s: float | None = None
    daily: DailyLoad | None = None
    execution: Execution = Execution()

    def __post_init__(self) -> None:
        if self.stream_token_s is not None:
            stream = require_positive_number("stream_token_s", self.stream_token_s, allow_zero=True)
            object.__setattr__(self, "stream_token_s", stream)


_DEFAULTS: dict[str, Any] = {
    # the search space (CandidateSpace.build; ``disagg`` is its ``ratios``)
    "precisions": None,
    "tps": None,
    "eps": None,
    "kv_precisions": None,
    "engines": None,
    "max_num_seqs": None,
    "max_num_batched_tokens": None,
    "aggregated": True,
    "disagg": None,
    "decode_tps": None,
    "pps": None,
    "attention_dps": None,
    "stream_token_s": None,
    # the traffic
    "rate": None,
    "input_len": None,
    "output_len": None,
    "trace": None,
    "num_requests": None,
    "arrival": None,
    "burstiness": 1.0,
    "seed": 0,
    "daily": None,
    "scale_up_delay_s": 300.0,
    # the objectives and prices
    "attainment": None,
    "prices": None,
    # where it runs
    "executor": "local",
    "workers": None,
    "ray_address": None,
    "verify": True,
    "exhaustive": False,
    "progress": None,
}
"""The keywords of ``infercast.plan`` beyond model, gpus and slo, with their defaults."""
KEYWORDS = tuple(_DEFAULTS)


def target_load(
    rate: float | None, daily: str | LoadProfile | None, scale_up_delay_s: float = 300.0
) -> tuple[float | None, DailyLoad | None]:
    """The target rate (validated; a daily load's peak when none is given) and the daily load, if any."""
    if rate is not None:
        rate = require_positive_number("rate", rate)
    if daily is None:
        return rate, None
    profile = daily if isinstance(daily, LoadProfile) else load_profile(daily, peak=rate)
    return (profile.peak if rate is None else rate), DailyLoad(profile, scale_up_delay_s)


def slo_set(slo: str | Sequence[str] | SLOSet, attainment: float | None = None) -> SLOSet:
    """``slo`` as an :class:`SLOSet`; ``attainment`` (when given) replaces its attainment target."""
    if not isinstance(slo, SLOSet):
        return SLOSet.parse(slo, attainment)
    return slo if attainment is None else SLOSet(slo.terms, attainment)


def plan_request(
    model: str | ModelSpec, gpus: str | Sequence[str], *, slo: str | Sequence[str] | SLOSet, **options: Any
) -> PlanRequest:
    """The request the keywords of ``infercast.plan`` describe (:data:`KEYWORDS`); a keyword it does not take
    is an error naming it."""
    for name in options:
        if name not in _DEFAULTS:
            close = nearest(name, KEYWORDS)
            hint = f"did you mean {', '.join(close)}?" if close else f"allowed: {', '.join(KEYWORDS)}"
            raise InfercastError(f"plan takes no such keyword; {hint}", field=name, allowed=KEYWORDS)
    o = {**_DEFAULTS, **options}
    spec = get_model(model)
    rate, daily = target_load(o["rate"], o["daily"], o["scale_up_delay_s"])
    slos = slo_set(slo, o["attainment"])
    lengths = {k: o[k] for k in ("input_len", "output_len", "trace", "arrival", "burstiness", "seed")}
    probes = {} if o["num_requests"] is None else {"num_requests": o["num_requests"]}
    traffic = Traffic(rate=rate, **lengths, **probes)
    space = CandidateSpace.build(
        gpus,
        precisions=o["precisions"],
        tps=o["tps"],
        eps=o["eps"],
        kv_precisions=o["kv_precisions"],
        engines=o["engines"],
        max_num_seqs=o["max_num_seqs"],
        max_num_batched_tokens=o["max_num_batched_tokens"],
        ratios=o["disagg"],
        decode_tps=o["decode_tps"],
        pps=o["pps"],
        attention_dps=o["attention_dps"],
    )
    if not o["aggregated"]:
        space = replace(space, aggregated=False)
    prices = gpu_prices(list(space.gpus), o["prices"])
    run = Execution(o["executor"], o["workers"], o["ray_address"], o["verify"], o["exhaustive"], o["progress"])
    return PlanRequest(spec, space, traffic, slos, prices, o["stream_token_s"], daily, run)
