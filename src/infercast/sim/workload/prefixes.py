"""Shared prompt prefixes: system prompts in front of a workload's prompts, and multi-turn conversations."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infercast.errors import InfercastError, require_fraction, require_positive_int, require_positive_number
from infercast.limits import check_rows
from infercast.sim.workload.arrivals import arrivals
from infercast.sim.workload.core import DEFAULT_HASH_BLOCK_SIZE, RngLike, Workload, _flatten, _rng, _split
from infercast.sim.workload.lengths import LengthSpec, lengths

MAX_PREFIX_TOKENS = 1 << 24
"""Longest shared system prompt (16.8M tokens): past the longest context in the catalog (Llama 4 Scout, 10M)."""
MAX_SYSTEM_PROMPTS = 2**38
"""Most distinct system prompts: block ids (prompt x blocks per prompt, at most 2^38 x 2^24 = 2^62) stay exact in
int64, and the prompt draw stays within NumPy's int64 bound (99999999999999999999 overflowed it)."""


def prefix_sizes(num_prompts: object, prompt_tokens: object, *, fields: tuple[str, str]) -> tuple[int, int]:
    """``(num_prompts, prompt_tokens)`` validated (each >= 1 and within its limit); ``fields`` names them in errors
    (the API's keywords, or the CLI's flags)."""
    count = require_positive_int(fields[0], num_prompts)
    tokens = require_positive_int(fields[1], prompt_tokens)
    for field, value, limit in ((fields[0], count, MAX_SYSTEM_PROMPTS), (fields[1], tokens, MAX_PREFIX_TOKENS)):
        if value > limit:
            raise InfercastError(f"{value} is more than the limit of {limit:,}", field=field)
    return count, tokens


def with_system_prompts(
    workload: Workload,
    num_prompts: int,
    prompt_tokens: int,
    fraction: float = 1.0,
    seed: RngLike = 0,
    *,
    hash_block_size: int | None = None,
) -> Workload:
    """Prepend one of ``num_prompts`` shared system prompts of ``prompt_tokens`` tokens to a share of requests.

    Exactly ``round(fraction * n)`` requests (chosen at random) get a prompt chosen uniformly among the K;
    their ``prompt_len`` grows by ``prompt_tokens``. Prompt *k*'s ``prompt_tokens // B`` full blocks get ids
    shared by all its users (B = the hash block size; a partial tail block is not shareable, as in vLLM).
    Block hashes the workload already had are renumbered for the shifted requests so ids stay prefix-closed.
    ``hash_block_size`` may only be chosen when the workload has no block hashes yet.
    """
    k_count, s_tokens = prefix_sizes(num_prompts, prompt_tokens, fields=("num_prompts", "prompt_tokens"))
    frac = require_fraction("fraction", fraction)
    old = workload.block_hashes
    block = workload.hash_block_size
    if hash_block_size is not None:
        hash_block_size = require_positive_int("hash_block_size", hash_block_size)
        if old is not None and hash_block_size != block:
            raise InfercastError(
                f"the workload already has {block}-token block hashes; cannot switch to {hash_block_size}",
                field="hash_block_size",
            )
        block = hash_block_size
    gen = _rng(seed)
    n = len(workload)
    chosen = np.zeros(n, dtype=bool)
    chosen[gen.permutation(n)[: round(frac * n)]] = True
    which = gen.integers(0, k_count, size=n)
    m = s_tokens // block
    check_rows("prompt_tokens", min(k_count, n) * m, 8, "system-prompt block ids (prompts used x blocks each)")
    prompt = workload.prompt_len + s_tokens * chosen
    if old is None:
        if m == 0:
            hashes = None
        else:  # all users of prompt k share one read-only array (ids k*m .. k*m+m-1): memory grows with the
            # prompts actually drawn (at most one per request), never with K itself
            used, slot = np.unique(np.where(chosen, which, -1), return_inverse=True)
            pool = np.empty(used.size, dtype=object)
            for j, k in enumerate(used.tolist()):  # (a slice assignment would broadcast rows into a 2-D block)
                row = np.arange(k * m, (k + 1) * m, dtype=np.int64) if k >= 0 else np.zeros(0, np.int64)
                row.flags.writeable = False
                pool[j] = row
            hashes = pool[slot.ravel()].tolist()
    else:
        hashes = _prepend_hashes(old, chosen, which, k_count, m)
    return workload._replace(prompt_len=prompt, block_hashes=hashes, hash_block_size=block)


def _prepend_hashes(
    old: list[np.ndarray], chosen: np.ndarray, which: np.ndarray, k_count: int, m: int
) -> list[np.ndarray]:
    """Put system-prompt ids in front of existing ids, renumbering the shifted ones per (prompt, old id)."""
    flat, counts = _flatten(old)
    base = int(flat.max()) + 1 if flat.size else 0
    owner = np.repeat(np.arange(len(old)), counts)
    moved = chosen[owner]
    mapped = flat.copy()
    if moved.any():
        # a shifted block's content depends on the system prompt and on the old block: one fresh id per pair
        _, dense = np.unique(flat[moved], return_inverse=True)
        pair = which[owner[moved]].astype(np.int64) * (int(dense.max()) + 1) + dense
        _, fresh = np.unique(pair, return_inverse=True)
        mapped[moved] = base + k_count * m + fresh
    new_counts = counts + m * chosen
    total = int(new_counts.sum())
    req = np.repeat(np.arange(len(old)), new_counts)
    pos = np.arange(total) - np.repeat(np.cumsum(new_counts) - new_counts, new_counts)
    shift = m * chosen[req]
    is_sys = pos < shift
    src = np.repeat(np.cumsum(counts) - counts, new_counts) + pos - shift
    out = np.where(is_sys, base + which[req] * m + pos, mapped[np.where(is_sys, 0, src)] if flat.size else 0)
    return _split(out.astype(np.int64), new_counts)


@dataclass(frozen=True)
class MultiTurnSpec:
    """Multi-turn conversations (:func:`multi_turn`), validated on construction.

    ``num_sessions`` sessions start following ``session_arrival`` at ``session_rate`` sessions/s (all at t=0 when
    ``session_rate`` is None; ``burstiness`` shapes gamma arrivals). Each session has ``turns`` turns (an int or
    a distribution). Turn *t*'s prompt is the system prompt (``system_prompt_tokens``, one of
    ``num_system_prompts``; 0 = none) + every earlier turn's user tokens and output + ``input_len`` new user
    tokens; it produces ``output_len`` tokens. Turn *t+1* arrives an exponential think time (mean ``think_time``
    s) after turn *t* *arrives*. A session ends before the first turn whose prompt + output would exceed
    ``max_context``. Hash ids number ``hash_block_size``-token blocks; ``seed`` drives every draw; ``name``
    names the workload (default: from the sizes).
    """

    num_sessions: int
    turns: str | int | LengthSpec
    input_len: str | int | LengthSpec
    output_len: str | int | LengthSpec
    session_rate: float | None = None
    session_arrival: str = "poisson"
    burstiness: float = 1.0
    think_time: float = 5.0
    system_prompt_tokens: int = 0
    num_system_prompts: int = 1
    max_context: int | None = None
    hash_block_size: int = DEFAULT_HASH_BLOCK_SIZE
    seed: int = 0
    name: str = ""

    def __post_init__(self) -> None:
        checked = {
            "num_sessions": require_positive_int("num_sessions", self.num_sessions),
            "hash_block_size": require_positive_int("hash_block_size", self.hash_block_size),
            "think_time": require_positive_number("think_time", self.think_time, allow_zero=True),
            "system_prompt_tokens": 0
            if self.system_prompt_tokens == 0
            else require_positive_int("system_prompt_tokens", self.system_prompt_tokens),
            "num_system_prompts": require_positive_int("num_system_prompts", self.num_system_prompts),
        }
        if self.max_context is not None:
            checked["max_context"] = require_positive_int("max_context", self.max_context)
        for name, value in checked.items():
            object.__setattr__(self, name, value)


def multi_turn(spec: MultiTurnSpec) -> Workload:
    """Multi-turn conversations whose turns share their growing context as a cached prefix (see
    :class:`MultiTurnSpec`).

    The think time is an open-loop approximation: the simulator does not wait for turn *t*'s answer before
    sending turn *t+1*. Requests of all sessions are interleaved by arrival. Hash ids number each session's
    context blocks, so consecutive turns share the earlier turn's full blocks (and sessions with the same system
    prompt share its full blocks).
    """
    s_count = spec.num_sessions
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(spec.seed).spawn(6)]
    per_session = lengths(spec.turns, s_count, streams[0], field="turns")
    starts = (
        arrivals(spec.session_arrival, s_count, rate=spec.session_rate, burstiness=spec.burstiness, rng=streams[1])
        if spec.session_rate is not None
        else np.zeros(s_count)
    )
    total = int(per_session.sum())
    sess = np.repeat(np.arange(s_count), per_session)
    first = np.cumsum(per_session) - per_session  # index of each session's first turn
    turn = np.arange(total) - first[sess]
    user = lengths(spec.input_len, total, streams[2], field="input_len")
    out = lengths(spec.output_len, total, streams[3], field="output_len")
    context_before = _within(user + out, first, sess) - (user + out)
    prompt = spec.system_prompt_tokens + context_before + user
    gaps = streams[4].exponential(spec.think_time, total) if spec.think_time > 0 else np.zeros(total)
    gaps[turn == 0] = 0.0
    arrival = starts[sess] + _within(gaps, first, sess)
    keep = np.ones(total, dtype=bool)
    if spec.max_context is not None:
        keep = _within((prompt + out > spec.max_context).astype(np.int64), first, sess) == 0
        if not keep.any():
            raise InfercastError(
                f"even the first turns exceed max_context={spec.max_context}; raise it or shorten the turns",
                field="max_context",
            )
    idx = np.flatnonzero(keep)
    blocks = prompt // spec.hash_block_size  # full blocks of each turn's prompt
    hashes = _session_hashes(spec, sess, blocks, keep, streams[5])
    order = np.argsort(arrival[idx], kind="stable")
    name = spec.name or (
        f"multi_turn({s_count} sessions, turns={spec.turns}, in={spec.input_len}, out={spec.output_len})"
    )
    return Workload(
        arrival[idx][order],
        prompt[idx][order],
        out[idx][order],
        [hashes[i] for i in order.tolist()] if bool(blocks[idx].any()) else None,
        spec.hash_block_size,
        None,
        name,
    )


def _within(x: np.ndarray, first: np.ndarray, sess: np.ndarray) -> np.ndarray:
    """Cumulative sum of ``x`` restarting at every session (``first``: each session's first index; ``sess``:
    each element's session)."""
    c = np.cumsum(x)
    return c - (c - x)[first][sess]


def _session_hashes(
    spec: MultiTurnSpec, sess: np.ndarray, blocks: np.ndarray, keep: np.ndarray, rng: np.random.Generator
) -> list[np.ndarray]:
    """Block ids of each kept turn's prompt (``blocks`` full blocks): views of its session's id sequence, the
    session's system prompt's shared ids (drawn from ``rng``) then ids unique to the session."""
    s_count, k_count = spec.num_sessions, spec.num_system_prompts
    system = rng.integers(0, k_count, size=s_count)
    m = spec.system_prompt_tokens // spec.hash_block_size
    longest = np.zeros(s_count, dtype=np.int64)
    np.maximum.at(longest, sess[keep], blocks[keep])
    longest = np.maximum(longest, m)
    own = longest - m
    own_start = k_count * m + np.cumsum(own) - own
    seq_start = np.cumsum(longest) - longest
    pos = np.arange(int(longest.sum())) - np.repeat(seq_start, longest)
    owner = np.repeat(np.arange(s_count), longest)
    buffer = np.where(pos < m, system[owner] * m + pos, own_start[owner] + pos - m).astype(np.int64)
    buffer.flags.writeable = False
    idx = np.flatnonzero(keep)
    return [buffer[s : s + b] for s, b in zip(seq_start[sess[idx]].tolist(), blocks[idx].tolist(), strict=True)]
