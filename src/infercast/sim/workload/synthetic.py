"""Synthetic workloads: sampled lengths, an arrival process or closed-loop clients, optional shared prefixes."""

from __future__ import annotations

from typing import Any

import numpy as np

from infercast.errors import InfercastError, require_positive_int, require_positive_number, unknown_choice
from infercast.sim.workload.arrivals import ARRIVAL_KINDS, arrivals
from infercast.sim.workload.core import DEFAULT_HASH_BLOCK_SIZE, Workload
from infercast.sim.workload.lengths import LengthLike, LengthSpec, lengths
from infercast.sim.workload.prefixes import with_system_prompts

PrefixSpec = int | tuple[int, int] | tuple[int, int, float] | dict[str, Any]


def _streams(seed: int) -> list[np.random.Generator]:
    """The independent random streams of ``seed``: input lengths, output lengths, arrivals, prefixes."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4)]


def synthetic(
    num_requests: int,
    input_len: LengthLike,
    output_len: LengthLike,
    arrival: str = "poisson",
    rate: float | None = None,
    burstiness: float = 1.0,
    concurrency: int | None = None,
    seed: int = 0,
    prefix: PrefixSpec | None = None,
    *,
    hash_block_size: int = DEFAULT_HASH_BLOCK_SIZE,
    name: str = "",
) -> Workload:
    """A synthetic workload.

    ``input_len`` / ``output_len``: ints, distribution specs (:class:`LengthSpec`) or arrays of
    ``num_requests`` exact lengths (e.g. a trace's, to re-time it). Open loop: ``arrival``
    and ``rate`` (see :func:`arrivals`). Closed loop: ``concurrency=N`` clients each sending the next request
    when the previous one finishes (no ``rate``; arrivals are zeros). ``prefix``: shared system prompts added
    in front of the prompts (lengths grow, like vLLM's ``--random-prefix-len``): ``P`` tokens shared by all,
    ``(num_prompts, P)`` or ``(num_prompts, P, fraction)``, or a dict of :func:`with_system_prompts` keywords.
    The input lengths, output lengths, arrivals and prefixes use independent random streams of ``seed``.
    """
    n = require_positive_int("num_requests", num_requests)
    if not isinstance(arrival, str) or arrival.lower() not in ARRIVAL_KINDS:
        raise unknown_choice("arrival", str(arrival), ARRIVAL_KINDS)
    arrival = arrival.lower()
    streams = _streams(seed)
    prompt = lengths(input_len, n, streams[0], field="input_len")
    output = lengths(output_len, n, streams[1], field="output_len")
    if concurrency is not None:
        concurrency = require_positive_int("concurrency", concurrency)
        if rate is not None and arrival != "offline":
            raise InfercastError("give either rate (open loop) or concurrency (closed loop), not both", field="rate")
        require_positive_number("burstiness", burstiness, allow_inf=True)
        times = np.zeros(n)
    else:
        times = arrivals(arrival, n, rate=rate, burstiness=burstiness, rng=streams[2])
    if not name:
        process = arrival
        if arrival in ("poisson", "gamma") and burstiness != 1:
            process = f"gamma(burstiness={burstiness:g})"
        load = f"concurrency={concurrency}" if concurrency else (process if rate is None else f"{process}@{rate:g}/s")
        described = [
            f"{len(x)} given" if not isinstance(x, str | int | LengthSpec) else x for x in (input_len, output_len)
        ]
        name = f"synthetic(in={described[0]}, out={described[1]}, {load})"
    work = Workload(times, prompt, output, None, hash_block_size, concurrency, name)
    if prefix is not None:
        work = _apply_prefix(work, prefix, streams[3])
    return work


def _apply_prefix(work: Workload, prefix: PrefixSpec, rng: np.random.Generator) -> Workload:
    if isinstance(prefix, dict):
        kwargs = dict(prefix)
    elif isinstance(prefix, tuple | list):
        if len(prefix) not in (2, 3):
            raise InfercastError(
                f"expected tokens, (num_prompts, tokens) or (num_prompts, tokens, fraction), got {prefix!r}",
                field="prefix",
            )
        kwargs = dict(zip(("num_prompts", "prompt_tokens", "fraction"), prefix, strict=False))
    else:
        kwargs = {"num_prompts": 1, "prompt_tokens": prefix}
    kwargs.setdefault("num_prompts", 1)
    if "prompt_tokens" not in kwargs:
        raise InfercastError("needs prompt_tokens", field="prefix")
    kwargs.setdefault("seed", rng)
    try:
        return with_system_prompts(work, **kwargs)
    except TypeError as exc:
        raise InfercastError(f"bad prefix options {prefix!r} ({exc})", field="prefix") from None


def retime(
    work: Workload,
    *,
    rate: float | None = None,
    arrival: str | None = None,
    burstiness: float = 1.0,
    concurrency: int | None = None,
    offline: bool = False,
    seed: int = 0,
) -> Workload:
    """The same requests (lengths, block hashes, order) under a new arrival process.

    Exactly one of ``rate`` (open loop: ``arrival`` kind, default poisson, gamma when ``burstiness`` != 1;
    see :func:`arrivals`), ``concurrency`` (closed loop of N clients) or ``offline`` (everything at t=0).
    The arrival times come from the stream :func:`synthetic` uses for arrivals, so retiming
    ``synthetic(..., arrival="offline", seed=s)`` at a rate gives ``synthetic(..., rate=r, seed=s)``.
    """
    if sum((rate is not None, concurrency is not None, bool(offline))) != 1:
        raise InfercastError("choose exactly one of rate, concurrency, offline", field="rate")
    n = len(work)
    closed = None
    if offline:
        times, load = np.zeros(n), "offline"
    elif concurrency is not None:
        closed = require_positive_int("concurrency", concurrency)
        times, load = np.zeros(n), f"concurrency={closed}"
    else:
        kind = arrival or ("gamma" if burstiness != 1 else "poisson")
        times = arrivals(kind, n, rate=rate, burstiness=burstiness, rng=_streams(seed)[2])
        load = f"{kind}@{rate:g}/s" + (f" burstiness={burstiness:g}" if burstiness != 1 else "")
    name = f"{work.name}, {load}" if work.name else load
    return work._replace(arrival=times, closed_loop=closed, name=name)
