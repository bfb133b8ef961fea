"""The serving engine: requests, paged KV blocks, and the step loop driven by the simulator's schedulers.

:class:`Engine` exposes to a scheduler exactly what the simulator's replica does (the waiting queue, the
requests in prefill, the running count, the limits, ``admit`` and ``grow``), so one scheduler class decides
both a simulated and a real run. Each step then runs for real: the chosen prefill chunks and the running
decodes go through the model in one ragged batch (:mod:`infercast.harness.engine.paged`), tokens are sampled greedily,
and timestamps come from a clock (:mod:`infercast.harness.engine.clock`): the wall clock, or the simulator's cost
model for a run whose decisions must equal the simulator's.

Block accounting follows :class:`~infercast.sim.replica.Replica` rule for rule: a decode step first gets a
block for every running sequence that crosses a block boundary (preempting the most recently joined
sequence, by recompute, when they do not fit); prompts get blocks as their chunks are scheduled (schedulers
that reserve, static and inflight: prompt + output at admission); full prompt blocks are published to the
prefix cache when the prompt is done.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from infercast.cost.batch import window_kv, window_pairs
from infercast.errors import DoesNotFitError, InfercastError, require_positive_int
from infercast.harness.engine.block_pool import BlockPool, chain_hashes
from infercast.harness.engine.clock import Clock
from infercast.harness.engine.paged import PagedKV, PagedRunner, SeqChunk
from infercast.harness.torch_model import TransformerModel
from infercast.sim.scheduler import Plan, make_scheduler

NAN = float("nan")


@dataclass(eq=False)
class Sequence:
    """One request inside the engine."""

    id: int
    prompt: list[int]
    output_len: int
    hashes: list[int]
    visible: float  # when it reached the engine
    generated: list[int] = field(default_factory=list)
    table: list[int] = field(default_factory=list)
    matched: int = 0  # blocks at the head of ``table`` found in the prefix cache at admission
    pins: list[int] = field(default_factory=list)  # cached copies of its blocks it references (see publish)
    computed: int = 0  # tokens of the current prefill whose KV is written
    target: int = 0  # tokens the current prefill must hold (prompt, + generated tokens after a preemption)
    first_token: float = NAN
    last_token: float = NAN
    finish: float = NAN
    scheduled: float = NAN
    preemptions: int = 0
    cached_tokens: int = 0
    joined: int = -1  # order in which it joined the running batch (victim choice)
    logits: list[torch.Tensor] | None = None

    def __post_init__(self) -> None:
        self.target = len(self.prompt)

    def tokens(self, start: int, stop: int) -> list[int]:
        """Tokens ``start .. stop-1`` of prompt + generated output."""
        p = len(self.prompt)
        if stop <= p:
            return self.prompt[start:stop]
        return (self.prompt + self.generated)[start:stop]


@dataclass(frozen=True)
class StepLog:
    """What one step ran, how long it took, and its cost-model features (:data:`infercast.cost.batch.FEATURES`)."""

    start: float
    end: float
    prefill: tuple[tuple[int, int], ...]
    decodes: int
    features: dict[str, float]


class Engine:
    """A model, its block pool and paged cache, a scheduler, and the step loop (see module docstring)."""

    def __init__(
        self,
        model: TransformerModel,
        *,
        scheduler: str = "chunked",
        num_blocks: int,
        block_size: int = 16,
        max_num_seqs: int = 64,
        max_num_batched_tokens: int = 512,
        prefix_caching: bool = True,
        record_logits: bool = False,
    ):
        self.model = model
        self.scheduler = make_scheduler(scheduler)
        self.reserves = self.scheduler.reserves
        self.max_seqs = require_positive_int("max_num_seqs", max_num_seqs)
        self.max_batched_tokens = require_positive_int("max_num_batched_tokens", max_num_batched_tokens)
        self.bs = require_positive_int("block_size", block_size)
        self.pool = BlockPool(require_positive_int("num_blocks", num_blocks), self.bs, prefix_caching)
        self.kv = PagedKV(model, num_blocks, self.bs)
        self.runner = PagedRunner(model, self.kv)
        self.window = model.window
        self.record_logits = record_logits
        self.seqs: dict[int, Sequence] = {}
        self.waiting: deque[int] = deque()
        self.prefilling: list[int] = []
        self.running: list[Sequence] = []
        self.steps: list[StepLog] = []
        self.gaps: list[float] = []
        self.on_finish: Callable[[Sequence, float], None] | None = None
        self.on_token: Callable[[Sequence, int, float], None] | None = None  # (sequence, token, time): streaming
        self._joins = 0

    # ----- what schedulers read (infercast.sim.scheduler.ReplicaView) ---------------------------------------
    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_seqs(self) -> int:
        return len(self.running) + len(self.prefilling)

    # ----- what schedulers call ----------------------------------------------------------------------------
    def admit(self, i: int, budget: int | None, *, limit: int | None = None, reserve: bool = False) -> int | None:
        """Move the head of the waiting queue into prefill; returns the tokens scheduled now (None: nothing
        changed, because blocks run short or the remaining prompt exceeds ``limit``)."""
        seq, pool = self.seqs[i], self.pool
        matched = pool.lookup(seq.hashes, seq.target) if seq.computed == 0 else []
        cached = len(matched) * self.bs
        left = seq.target - cached
        if limit is not None and left > limit:
            return None
        chunk = left if budget is None or left <= budget else budget
        length = len(seq.prompt) + seq.output_len if reserve else cached + chunk
        need = max(-(-length // self.bs) - len(matched), 0)
        if need > pool.available - sum(1 for b in matched if pool.refs[b] == 0):
            return None  # refused: the cache's LRU order and statistics are left alone, as in the simulator
        pool.take(matched, seq.target)
        fresh = pool.allocate(need)
        if fresh is None:
            raise RuntimeError("block accounting error: an admission that fitted could not allocate")
        self.waiting.popleft()
        seq.table = matched + fresh
        seq.matched = len(matched)
        seq.computed = cached
        if seq.preemptions == 0:
            seq.cached_tokens = cached
        self.prefilling.append(i)
        return chunk

    def grow(self, i: int, budget: int | None) -> int:
        """Schedule the next chunk of a request in prefill; returns its tokens (0 if blocks run short)."""
        seq = self.seqs[i]
        left = seq.target - seq.computed
        chunk = left if budget is None or left <= budget else budget
        need = -(-(seq.computed + chunk) // self.bs) - len(seq.table)
        if need > 0:
            fresh = self.pool.allocate(need)
            if fresh is None:
                return 0
            seq.table.extend(fresh)
        return chunk

    # ----- requests -----------------------------------------------------------------------------------------
    def add_request(
        self, i: int, prompt: list[int], output_len: int, visible: float, cacheable_tokens: int | None = None
    ) -> None:
        """Queue request ``i`` (it reached the engine at ``visible``). Its full prompt blocks are hashed for the
        prefix cache; ``cacheable_tokens`` limits that to the blocks within the first so many tokens (a replayed
        workload declares which prefixes may be shared; the simulator caches exactly those)."""
        if output_len < 1 or not prompt:
            raise InfercastError("requests need a prompt and at least one output token", field="workload")
        limit = None if cacheable_tokens is None else cacheable_tokens // self.bs
        hashes = chain_hashes(prompt, self.bs, limit) if self.pool.prefix_caching else []
        self.seqs[i] = Sequence(
            i, list(prompt), int(output_len), hashes, visible, logits=[] if self.record_logits else None
        )
        self.waiting.append(i)

    @property
    def idle(self) -> bool:
        return not (self.running or self.prefilling or self.waiting)

    # ----- one step -------------------------------------------------------------------------------------------
    def step(self, clock: Clock) -> bool:
        """Plan and run one step; False when there is nothing to run now. The step's time runs from before
        planning to after sampling: block bookkeeping and scheduling are part of what a step costs."""
        start = clock.now()
        if self.running:
            self._ensure_decode_blocks()
        plan = self.scheduler.plan(self)
        if plan is None:
            if self.waiting and not self.running and not self.prefilling:
                self._cannot_admit(self.seqs[self.waiting[0]])
            return False
        self._execute(plan, clock, start)
        return True

    def _features(self, plan: Plan, decodes: list[Sequence]) -> dict[str, float]:
        """The step's cost-model features, computed as the simulator computes them."""
        w = self.window
        pre = pairs = pairs_w = kv = kv_w = 0.0
        sampled = 0
        for i, c in plan.prefill:
            seq = self.seqs[i]
            c0 = seq.computed
            pre += c
            pairs += c * c0 + c * (c + 1) / 2
            kv += c0 + c
            if w:
                pairs_w += float(window_pairs(c, c0, w))
                kv_w += float(window_kv(c, c0, w))
            if c0 + c == seq.target:
                sampled += 1
        if not w:
            pairs_w, kv_w = pairs, kv
        n = len(decodes)
        ctx = [len(s.prompt) + len(s.generated) for s in decodes]
        s = float(sum(ctx))
        sw = float(sum(min(x, w) for x in ctx)) if w else s
        n_pre = len(plan.prefill)
        return {
            "one": 1.0,
            "tokens": pre + n,
            "sampled": float(sampled + n),
            "prefill_tokens": pre,
            "decode_tokens": float(n),
            "prefill_pairs": pairs,
            "prefill_pairs_win": pairs_w,
            "prefill_kv": kv,
            "prefill_kv_win": kv_w,
            "decode_kv": s,
            "decode_kv_win": sw,
            "seqs": float(n_pre + n),
            "prefill_seqs": float(n_pre),
        }

    def _execute(self, plan: Plan, clock: Clock, start: float) -> None:
        decodes = list(self.running) if plan.decode else []
        x = self._features(plan, decodes)
        chunks = []
        for i, c in plan.prefill:
            seq = self.seqs[i]
            stop = seq.computed + c
            chunks.append(SeqChunk(seq.tokens(seq.computed, stop), seq.computed, seq.table, stop == seq.target))
        dec = [SeqChunk([s.generated[-1]], len(s.prompt) + len(s.generated) - 1, s.table, True) for s in decodes]
        logits = self.runner.step(chunks, dec)
        new = logits.argmax(dim=-1).tolist()
        end = clock.finish_step(start, x)
        self.steps.append(StepLog(start, end, tuple(plan.prefill), len(decodes), x))
        rows = [self.seqs[i] for (i, _), ch in zip(plan.prefill, chunks, strict=True) if ch.sample]
        row_of = {id(s): r for r, s in enumerate(rows)}
        base = len(rows)
        for r, seq in enumerate(decodes):
            if seq.logits is not None:
                seq.logits.append(logits[base + r].detach().clone())
            self.gaps.append(end - seq.last_token)
            seq.generated.append(new[base + r])
            if self.on_token is not None:
                self.on_token(seq, new[base + r], end)
            seq.last_token = end
            if len(seq.generated) >= seq.output_len:
                self.running.remove(seq)
                self._finish(seq, end)
        for i, c in plan.prefill:
            seq = self.seqs[i]
            if math.isnan(seq.scheduled):
                seq.scheduled = start
            seq.computed += c
            if seq.computed == seq.target:
                r = row_of[id(seq)]
                if seq.logits is not None:
                    seq.logits.append(logits[r].detach().clone())
                self._prefill_done(seq, new[r], end)

    def _prefill_done(self, seq: Sequence, token: int, t: float) -> None:
        seq.pins = self.pool.publish(seq.table, seq.hashes, seq.matched)
        self.prefilling.remove(seq.id)
        if seq.generated:
            self.gaps.append(t - seq.last_token)
        else:
            seq.first_token = t
        seq.generated.append(token)
        if self.on_token is not None:  # after a recompute preemption this is the next new token too
            self.on_token(seq, token, t)
        seq.last_token = t
        if len(seq.generated) >= seq.output_len:
            self._finish(seq, t)
            return
        seq.joined = self._joins
        self._joins += 1
        self.running.append(seq)

    def _drop_blocks(self, seq: Sequence) -> None:
        self.pool.release(seq.pins)
        self.pool.release(seq.table)
        seq.table, seq.pins = [], []

    def _finish(self, seq: Sequence, t: float) -> None:
        self._drop_blocks(seq)
        seq.finish = t
        if self.on_finish is not None:
            self.on_finish(seq, t)

    def _ensure_decode_blocks(self) -> None:
        """Give every running sequence the block its next token needs, preempting the most recently joined
        ones (recompute) while they do not fit."""
        while self.running:
            short = [s for s in self.running if -(-(len(s.prompt) + len(s.generated)) // self.bs) > len(s.table)]
            if len(short) <= self.pool.available:
                for s in short:
                    s.table.extend(self.pool.allocate(1) or [])
                return
            self._preempt(max(self.running, key=lambda s: s.joined))

    def _preempt(self, seq: Sequence) -> None:
        """Recompute preemption: drop its KV; it re-enters the queue at the front with prompt + output so far."""
        self.running.remove(seq)
        self._drop_blocks(seq)
        seq.matched = 0
        seq.preemptions += 1
        seq.computed = 0
        seq.target = len(seq.prompt) + len(seq.generated)
        self.waiting.appendleft(seq.id)

    def _cannot_admit(self, seq: Sequence) -> None:
        need = -(-(len(seq.prompt) + seq.output_len) // self.bs)
        raise DoesNotFitError(
            f"request {seq.id} ({len(seq.prompt)} prompt + {seq.output_len} output tokens) needs {need} KV blocks "
            f"but the engine has {self.pool.num_blocks} blocks of {self.bs} tokens; shorten it or add blocks",
            field="workload",
        )

    # ----- checks -----------------------------------------------------------------------------------------------
    def check_blocks(self) -> None:
        """Raise unless every block is referenced exactly by the live block tables, free, or cached."""
        self.pool.check([s.table + s.pins for s in self.seqs.values() if s.table or s.pins])

    def tables(self) -> dict[str, np.ndarray]:
        """Per-request arrays (request id order) for the metrics."""
        ids = sorted(self.seqs)
        get = self.seqs.__getitem__
        return {
            "visible": np.array([get(i).visible for i in ids]),
            "first_token": np.array([get(i).first_token for i in ids]),
            "finish": np.array([get(i).finish for i in ids]),
            "scheduled": np.array([get(i).scheduled for i in ids]),
            "prompt": np.array([len(get(i).prompt) for i in ids]),
            "output": np.array([get(i).output_len for i in ids]),
            "preemptions": np.array([get(i).preemptions for i in ids]),
            "cached_tokens": np.array([get(i).cached_tokens for i in ids]),
        }
