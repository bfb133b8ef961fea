"""One serving replica: its queues, running batch, KV blocks, scheduler and step loop.

Step times come only from the cost layer: a compiled function of the step's named features
(:func:`infercast.cost.compiled.compile_scalar`) for steps with prefill work, and the decode table for
decode-only steps, which :mod:`infercast.sim.decode_runner` accounts a span at a time. KV blocks are owned
through :class:`~infercast.sim.blocks.BlockLedger`; the scheduler sees the replica through
:class:`~infercast.sim.scheduler.base.ReplicaView`. ``step_mode`` runs the same state machine one step at a
time; the tests check both give the same metrics.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

from infercast.cost.front_end import FrontEnd
from infercast.cost.profile import CostProfile
from infercast.cost.step import cost_model
from infercast.errors import DoesNotFitError
from infercast.memory import memory_budget
from infercast.sim.blocks import BlockLedger, BlockRule, replica_pool
from infercast.sim.config import EngineConfig
from infercast.sim.decode_cost import compiled_costs
from infercast.sim.decode_runner import count_waits, decode_gaps, decode_span, single_line, speculative_step
from infercast.sim.decode_set import DecodeSet, WindowDecodeSet
from infercast.sim.kv_cache import KVCache
from infercast.sim.recorder import Recorder, StepRecord
from infercast.sim.scheduler import Plan, engine_scheduler, make_scheduler
from infercast.sim.scheduler.base import DECODE_ONLY
from infercast.sim.speculative import SpeculativeConfig, Speculator
from infercast.sim.state import RequestTable, enter_in_visible_order
from infercast.sim.watchdog import STALL_LIMIT, SimulationStalled
from infercast.specs.deployment import Deployment

GAP_CHECK_EVERY_STEPS = 4096
"""Steps with prefill work between checks that the inter-token-gap buffers stay bounded. A check is a couple
of comparisons; every few thousand steps keeps it off the per-step cost while a buffer grows by at most a
few thousand x batch entries before the recorder folds it (decode spans are checked at occupancy samples)."""


class Replica:
    """A replica's state and step loop (see module docstring); implements
    :class:`~infercast.sim.scheduler.base.ReplicaView` for its scheduler."""

    def __init__(
        self,
        rid: int,
        deployment: Deployment,
        config: EngineConfig,
        table: RequestTable,
        recorder: Recorder,
        *,
        profile: CostProfile | None = None,
        seed: int = 0,
        step_mode: bool = False,
    ):
        dep = deployment
        eng = dep.engine
        self.rid = rid
        self.deployment = dep
        self.config = config
        self.table = table
        self.rec = recorder
        self.skip = not step_mode  # account decode spans in closed form
        self.scheduler = make_scheduler(config.scheduler or engine_scheduler(eng))
        self.reserves = self.scheduler.reserves  # sequences hold their whole request's blocks from admission
        self.max_seqs = eng.max_num_seqs if config.max_num_seqs is None else config.max_num_seqs
        self.max_batched_tokens = (
            eng.max_num_batched_tokens if config.max_num_batched_tokens is None else config.max_num_batched_tokens
        )
        rule = self._build_pool(dep, config, table)
        if eng.limits_per_dp_rank:  # each attention rank schedules its own share under the configured limits
            self.max_seqs *= dep.attention_dp
            self.max_batched_tokens *= dep.attention_dp
        self.window = dep.model.attention_window
        self._build_costs(dep, config, profile)
        self.host_bw = dep.hardware.host_link.bandwidth_bytes_s
        self.t = 0.0
        self.busy = 0.0  # seconds of steps run (per-pool busy fractions of a disaggregated run)
        self.pending: deque[int] = deque()  # handed to this replica, not yet visible to the engine
        self.waiting: deque[int] = deque()
        self.prefilling: list[int] = []
        self.inbox: deque[int] = deque()  # disaggregated decode pool: prefilled requests waiting for room
        self.decoding = self._decode_set(rule)
        self.swap_cost = 0.0  # host transfers of swapped KV, charged to the next step
        self.on_finish: Callable[[list[int], float], None] | None = None  # (requests finished, at time t)
        self.on_prefilled: Callable[[int, float], None] | None = None
        self.spec = self._speculator(config.speculative, dep, seed) if config.speculative else None
        self._steps_since_check = 0
        self.next_sample = 0.0  # when this replica records its next occupancy sample
        self.yield_on_event = False  # return from run_until after a completion or hand-off (coordinated runs)
        self._event = False

    def _build_pool(self, dep: Deployment, config: EngineConfig, table: RequestTable) -> BlockRule:
        """The KV memory: the budget left after weights and runtime memory, its block pool and ledger; returns the
        pool's block rule (how many units a token takes in each layer group)."""
        mem = memory_budget(
            dep,
            gpu_memory_utilization=config.gpu_memory_utilization,
            block_size=config.block_size,
            max_num_batched_tokens=self.max_batched_tokens,
            max_num_seqs=self.max_seqs,
        )
        if mem.num_blocks <= 0:
            raise DoesNotFitError(
                f"{dep.model.id} does not fit on {dep.tp}x {dep.hardware.id} at {dep.scheme.name}: no room for "
                "a KV cache after weights and runtime memory; raise `tp` or use a narrower `precision`",
                field="memory",
            )
        prefix_cache = config.prefix_caching and table.hashes is not None
        rule, num_blocks, self.block_bytes, state_blocks = replica_pool(mem, prefix_cache)
        num_blocks = max(1, int(num_blocks * config.kv_pool_scale))
        self.bs = mem.block_size
        self.token_bytes = self.block_bytes / self.bs * rule.step_units
        """KV bytes of one token in every layer (what a disaggregated hand-off sends per prompt token)."""
        self.state_bytes = mem.state_bytes_per_sequence
        """Fixed per-sequence bytes (linear-attention state, DeepSeek-V4's window and compressor state), sent with
        the tokens' KV by a disaggregated hand-off."""
        self.group_token_bytes = self.block_bytes / self.bs
        """KV bytes of one token in one layer group (every layer without windowed layers)."""
        hash_bs = table.hashes_block_size if table.hashes is not None else mem.block_size
        kv = KVCache(num_blocks, mem.block_size, config.prefix_caching, hash_bs)
        self.blocks = BlockLedger(kv, table, state_blocks, rule)
        return rule

    def _build_costs(self, dep: Deployment, config: EngineConfig, profile: CostProfile | None) -> None:
        """The step-cost model and its compiled fast paths, the per-request overheads and the API front-end."""
        eng = dep.engine
        model = cost_model(dep, profile)
        self.profile = model.profile
        self.request_overhead = model.profile.request_overhead_s
        self.request_jitter = model.profile.request_jitter_s
        token_s = model.profile.stream_token_s
        self.front_end = FrontEnd(token_s) if token_s > 0 else None  # None: the API server never binds
        self.stream_delay = 0.0  # how late the last step's tokens reach their clients (front-end queue)
        # a request arriving during a step joins the step after next (the engine planned the next one already)
        self.overlap = eng.overlap_scheduler if config.overlap_scheduler is None else config.overlap_scheduler
        self.last_step_start = -np.inf  # start of the last step run (of a decode span: of its last step)
        # new requests are polled every recv_interval decode steps and after any step with prompt tokens
        self.recv_interval = eng.recv_interval if config.recv_interval is None else config.recv_interval
        self.recv_count = self.recv_interval  # decode steps since the last poll (a poll is due at the start)
        # TensorRT-LLM batch waiting: prompts held while decodes run (never with attention DP, as in the engine)
        waits = eng.batch_wait_iters if config.batch_wait_iters is None else config.batch_wait_iters
        ratio = eng.batch_wait_ratio if config.batch_wait_ratio is None else config.batch_wait_ratio
        self.wait_iters = waits if ratio > 0 and dep.attention_dp == 1 else 0
        self.wait_tokens = ratio * self.max_batched_tokens  # step tokens that end the wait
        self.wait_count = 0  # steps the queued prompts were held so far
        self.holding = False  # this step's prompts are held back
        # TensorRT-LLM attention-DP balancing: prompts held until every rank has one (the ranks pooled here)
        adp = eng.adp_balance_iters if config.adp_balance_iters is None else config.adp_balance_iters
        self.adp_iters = adp if dep.attention_dp > 1 else 0
        self.adp_ranks = dep.attention_dp
        self.adp_count = 0  # steps since the balancer last released prompts (it counts every step)
        self.holds = bool(self.wait_iters or self.adp_iters)  # a rule may hold prompts back
        # no batch holds more sequences than there are requests: size the decode table by that, not by a huge
        # --max-num-seqs (whose table alone would take seconds and gigabytes)
        limit, scale = min(self.max_seqs, max(self.table.n, 1)), config.step_time_scale
        self.step_fn, self.decode_table = compiled_costs(model, limit, scale)
        self.one_line = single_line(self.decode_table)

    def _decode_set(self, rule: BlockRule) -> DecodeSet:
        """The running batch, counting blocks by ``rule`` (the window-aware set only where windows cap KV)."""
        if rule.windowed:
            return WindowDecodeSet(rule, self.window)
        batch = DecodeSet(self.bs, self.window)
        batch.rule = rule
        return batch

    def _match_ledger(self) -> None:
        """A ledger put in place after construction (``engine.simulate``: the CPU engine's own pool, which keeps
        every token) brings its block rule; the running batch, still empty, counts blocks the same way."""
        if self.decoding.rule != self.blocks.rule:
            if self.decoding.n or self.decoding.D:
                raise RuntimeError("the KV ledger's block rule was replaced while sequences were running")
            self.decoding = self._decode_set(self.blocks.rule)
        self.decoding.rule = self.blocks.rule

    # ----- what schedulers and routers read ------------------------------------------------------------------
    @property
    def kv(self) -> KVCache:
        """The KV pool's counts (read-only use; changes go through ``blocks``)."""
        return self.blocks.kv

    @property
    def num_running(self) -> int:
        return self.decoding.n

    @property
    def num_seqs(self) -> int:
        return self.decoding.n + len(self.prefilling)

    @property
    def outstanding(self) -> int:
        """Requests on this replica not yet finished (for least-outstanding routing)."""
        return len(self.pending) + len(self.waiting) + self.num_seqs

    def next_activity(self) -> float:
        """When this replica next has something to do (inf when idle with nothing pending)."""
        if self.decoding.n or self.prefilling or self.waiting:
            return self.t
        if self.pending:
            return max(self.t, float(self.table.visible[self.pending[0]]))
        return np.inf

    # ----- admission (ReplicaView) ---------------------------------------------------------------------------
    def handoff_bytes(self, tokens: int) -> float:
        """Bytes a disaggregated hand-off sends per GPU for a sequence of ``tokens``: its KV (windowed layer
        groups only the window, as the blocks count them) and its fixed state."""
        rule = self.blocks.rule
        if rule.windowed:
            units = rule.full_units * tokens + rule.window_units * min(tokens, rule.window)
            return self.group_token_bytes * float(units) + self.state_bytes
        return self.token_bytes * float(tokens) + self.state_bytes

    def enqueue(self, i: int, t: float | None = None) -> None:
        """Hand request ``i`` (sent at ``t``, default its arrival) to this replica.

        It reaches the engine after the engine's per-request overhead (API server, tokenisation: a fixed part
        and a varying one, ``request_jitter_s`` x the request's intake draw) and, with a front-end that
        binds, after the responses queued in it; requests must be enqueued in the order they are sent, and reach
        the engine in the order their overheads end.
        """
        tb = self.table
        tb.replica[i] = self.rid
        sent = tb.arrival[i] if t is None else t
        delay = self.request_overhead + self.request_jitter * tb.intake[i]
        if self.front_end is not None:  # behind the responses queued in the API server
            delay += self.front_end.backlog_at(sent)
        tb.visible[i] = sent + delay
        enter_in_visible_order(self.pending, i, tb.visible)

    def admit(self, i: int, budget: int | None, *, limit: int | None = None, reserve: bool = False) -> int | None:
        """Move the head of the waiting queue into prefill; returns the tokens scheduled now.

        Looks up the prefix cache, then allocates KV blocks for the scheduled tokens (``reserve``: for the
        whole prompt + output). Returns None, changing nothing, when blocks run short or the remaining
        prompt exceeds ``limit``.
        """
        tb, blocks = self.table, self.blocks
        if tb.swapped[i]:
            return None  # swapped-out sequences come back whole, through _swap_in
        if tb.hashes is not None and tb.computed[i] == 0:
            hits, idle = blocks.lookup_prefix(i)
            cached = hits * blocks.kv.unit_tokens
        else:
            hits = idle = cached = 0
        left = tb.target[i] - cached
        if limit is not None and left > limit:
            return None
        chunk = left if budget is None or left <= budget else budget
        if not blocks.claim(i, tb.prompt[i] + tb.output[i] if reserve else cached + chunk, hits, idle):
            return None
        self.waiting.popleft()
        tb.computed[i] = cached
        if tb.preemptions[i] == 0:
            tb.cached_tokens[i] = cached
        self.prefilling.append(i)
        return chunk

    def grow(self, i: int, budget: int | None) -> int:
        """Schedule the next chunk of a request in prefill; returns its tokens (0 if blocks run short)."""
        computed = self.table.computed[i]
        left = self.table.target[i] - computed
        chunk = left if budget is None or left <= budget else budget
        return chunk if self.blocks.extend(i, computed + chunk) else 0

    # ----- the loop ---------------------------------------------------------------------------------------------
    def run_until(self, t_limit: float = np.inf) -> None:
        """Run steps that start before ``t_limit`` (the last may end after it)."""
        visible, swapped = self.table.visible, self.table.swapped
        if self.decoding.rule is not self.blocks.rule:
            self._match_ledger()
        batch, blocks = self.decoding, self.blocks
        pending, waiting, prefilling, inbox = self.pending, self.waiting, self.prefilling, self.inbox
        rec, last_t, last_steps, stall = self.rec, -1.0, -1, 0
        while True:
            # watchdog (inline: this loop is hot): every iteration advances the clock or runs a step, apart from
            # a bounded number of same-instant admissions and preemptions
            if self.t != last_t or rec.step_count != last_steps:
                last_t, last_steps, stall = self.t, rec.step_count, 0
            else:
                stall += 1
                if stall >= STALL_LIMIT:
                    raise SimulationStalled(
                        f"replica {self.rid} made no progress in {stall:,} iterations at t={self.t:.6g} s "
                        f"({len(waiting)} waiting, {len(prefilling)} prefilling, {batch.n} decoding, {len(inbox)} in "
                        "its inbox)"
                    )
            # requests join the queue only when a step starts before the limit: a later-sent request routed at the
            # limit may still reach the engine first (its varying overhead ended sooner)
            if (self.recv_interval == 1 or self._poll(t_limit)) and pending and visible[pending[0]] <= self.t < t_limit:
                cutoff = self.t
                if self.overlap and (batch.n or prefilling or waiting):
                    # one that arrived while the last step ran waits a step more: the engine had planned this one
                    cutoff = self.last_step_start
                while pending and visible[pending[0]] <= cutoff:
                    waiting.append(pending.popleft())
            if inbox:
                self._take_inbox()
            if self.t >= t_limit:
                # the last step ended past the limit: no step starts before it (a request that reached the engine
                # meanwhile joins in the next call; idling forward to it here would be no progress: issue 37)
                return
            if not (batch.n or prefilling or waiting):
                if pending and visible[pending[0]] < t_limit:
                    self.t = max(self.t, float(visible[pending[0]]))
                    continue
                return
            if batch.n and batch.residue[(-batch.D) % batch.bs] != blocks.reserved:
                self.ensure_decode_blocks()
            if waiting and swapped[waiting[0]] and self._swap_in():
                self.ensure_decode_blocks()
            plan = DECODE_ONLY if self.holds and self._holds_prompts() else self.scheduler.plan(self)
            if plan is None:
                if waiting and not batch.n and not prefilling:
                    self._cannot_admit(waiting[0])
                if pending and visible[pending[0]] < t_limit:
                    self.t = max(self.t, float(visible[pending[0]]))
                    continue
                return
            if plan.prefill:
                self._step(plan)
                self.recv_count = self.recv_interval  # a step with prompt tokens: the next one polls
                if (
                    self.spec is None
                    and batch.n
                    and not waiting
                    and not prefilling
                    and self.t < t_limit
                    and not inbox
                    and not (self._event and self.yield_on_event)
                    and not (pending and visible[pending[0]] <= self.t)
                ):  # the next iteration would plan a decode span: start it here
                    if batch.residue[(-batch.D) % batch.bs] != blocks.reserved:
                        self.ensure_decode_blocks()
                        if waiting or not batch.n:
                            continue
                    self.recv_count = 0  # the poll before this decode step found nothing
                    decode_span(self, t_limit)
            elif self.spec is not None:
                speculative_step(self)
                count_waits(self, 1)
            else:
                decode_span(self, t_limit)
            if self._event and self.yield_on_event:
                self._event = False
                return

    def _poll(self, t_limit: float) -> bool:
        """Whether an engine polling every ``recv_interval`` decode steps takes in new requests before this step:
        when idle or due (SGLang's SchedulerRecvSkipper, which resets its counter at every poll)."""
        busy = self.decoding.n or self.prefilling or self.waiting
        if self.t < t_limit and (not busy or self.recv_count >= self.recv_interval):
            self.recv_count = 0
            return True
        return False

    def _holds_prompts(self) -> bool:
        """Whether this step holds the queued prompts back. TensorRT-LLM batch waiting
        (``PyExecutor._waiting_requests``): with decodes running, until the prompts that fit the step plus one token
        per decode reach ``wait_tokens`` or ``wait_iters`` steps held them. Attention-DP balancing
        (``_balance_adp_requests``): until as many prompts fit as there are ranks, or its count, which runs every
        step, reaches ``adp_iters``; a rank without decodes (fewer decodes than ranks here) releases them. A release
        restarts the count."""
        self.holding = False
        if not self.waiting or self.prefilling or self.table.swapped[self.waiting[0]]:
            return False  # (a swapped-out sequence comes back through swap-in, not as a prompt)
        n = self.decoding.n
        room = self.max_seqs - self.num_seqs
        count, tokens = queued_prompts(self.table, self.waiting, self.max_batched_tokens - n, room)
        if not count:
            return False
        if self.adp_iters:
            hold = n >= self.adp_ranks and count < self.adp_ranks and self.adp_count + 1 < self.adp_iters
            if not hold:
                self.adp_count = 0
        else:
            hold = n > 0 and self.wait_count < self.wait_iters and tokens + n < self.wait_tokens
            if n and not hold:
                self.wait_count = 0
        self.holding = hold
        return hold

    def _cannot_admit(self, i: int) -> None:
        tb = self.table
        need = self.blocks.count(int(tb.prompt[i] + tb.output[i]))
        raise DoesNotFitError(
            f"request {i} ({tb.prompt[i]} prompt + {tb.output[i]} output tokens) needs {need} KV blocks but the "
            f"replica has {self.kv.num_blocks} blocks of {self.bs} tokens; shorten the request or add memory",
            field="workload",
        )

    # ----- a step with prefill work ---------------------------------------------------------------------------
    def _prefill_sums(self, plan: Plan) -> tuple[int, int, float, float, float, float]:
        """A step's prefill chunks summed for the cost model: tokens, chunks that finish their prompt (and sample),
        attention pairs and KV reads, each in full and within the window."""
        tb, W = self.table, self.window
        pre_tokens = sampled = 0
        pairs = pairs_w = kv_read = kv_read_w = 0.0
        computed, target = tb.computed, tb.target
        for i, c in plan.prefill:
            c0 = computed[i]
            pre_tokens += c
            pairs += c * c0 + c * (c + 1) / 2
            kv_read += c0 + c
            if W:
                pairs_w += _window_pairs(c, c0, W)
                kv_read_w += min(c0, W - 1) + c
            if c0 + c == target[i]:
                sampled += 1
        if not W:
            pairs_w, kv_read_w = pairs, kv_read
        return pre_tokens, sampled, pairs, pairs_w, kv_read, kv_read_w

    def _step(self, plan: Plan) -> None:
        tb, W = self.table, self.window
        computed, target = tb.computed, tb.target
        pre_tokens, sampled, pairs, pairs_w, kv_read, kv_read_w = self._prefill_sums(plan)
        batch = self.decoding
        n = batch.n if plan.decode else 0
        if n:
            s = float(batch.sum_base + n * batch.D)
            sw = float(batch.window_sum()) if W else s
        else:
            s = sw = 0.0
        n_pre = len(plan.prefill)
        dt = self.step_fn(
            one=1.0,
            tokens=pre_tokens + n,
            sampled=sampled + n,
            prefill_tokens=pre_tokens,
            decode_tokens=n,
            prefill_pairs=pairs,
            prefill_pairs_win=pairs_w,
            prefill_kv=kv_read,
            prefill_kv_win=kv_read_w,
            decode_kv=s,
            decode_kv_win=sw,
            seqs=n_pre + n,
            prefill_seqs=n_pre,
        )
        dt += self.swap_cost
        self.swap_cost = 0.0
        start = self.t
        end = start + dt
        self.t = end
        self.busy += dt
        self.last_step_start = start
        if self.rec.tracing:
            self.rec.step(
                StepRecord(
                    self.rid,
                    start,
                    dt,
                    "mixed" if n else "prefill",
                    pre_tokens,
                    n,
                    prefill_ids=tuple(i for i, _ in plan.prefill),
                )
            )
        else:
            self.rec.count(1, dt, n)
        if self.front_end is not None:
            self.stream_delay = self.front_end.emit(start, end, n + sampled)
        if n:
            decode_gaps(self, end)
            batch.advance(1, self.blocks.reserved)
            self.blocks.reserved = 0
            batch.last_decode = end
            if batch.heap[0][0] <= batch.D:
                self.complete(end)
        scheduled = tb.scheduled
        for i, c in plan.prefill:
            if scheduled[i] != scheduled[i]:  # NaN: first time any of its tokens runs
                scheduled[i] = start
            done = computed[i] + c
            computed[i] = done
            if done == target[i]:
                self._prefill_done(i, end)
        if end >= self.next_sample:
            self.next_sample = self.rec.sample(
                self.rid, end, self.kv.used, batch.n, len(self.waiting), len(self.prefilling)
            )
        self._steps_since_check += 1
        if self._steps_since_check > GAP_CHECK_EVERY_STEPS:
            self._steps_since_check = 0
            self.rec.flush_check()

    def _prefill_done(self, i: int, t: float) -> None:
        tb = self.table
        self.blocks.publish(i)
        self.prefilling.remove(i)
        generated = tb.generated[i]
        if generated == 0:
            tb.first_token[i] = t + self.stream_delay  # when its client gets it
        else:
            self.rec.gaps.add(t - tb.last_token[i])
        generated += 1
        tb.generated[i] = generated
        tb.last_token[i] = t
        if generated >= tb.output[i]:
            self.blocks.release(i)
            tb.finish[i] = t + self.stream_delay
            self._event = True
            if self.on_finish:
                self.on_finish([i], t + self.stream_delay)
            return
        if self.on_prefilled is not None:  # disaggregated: the decode pool takes over
            self.blocks.release(i)
            self._event = True
            self.on_prefilled(i, t)
            return
        reserved = tb.private[i] + tb.shared[i] if self.reserves else 0
        self.decoding.join(i, tb.target[i] + 1, tb.output[i] - generated, t, reserved)

    def receive(self, i: int) -> None:
        """Disaggregated decode pool: request ``i`` arrives with its prompt KV. It joins the running batch
        as soon as a sequence slot and its blocks are free, checked now and before every step (in order of
        arrival)."""
        self.inbox.append(i)
        self._take_inbox()

    def _take_inbox(self) -> None:
        tb, inbox = self.table, self.inbox
        while inbox:
            i = inbox[0]
            ctx = int(tb.prompt[i] + tb.generated[i])
            if self.num_seqs >= self.max_seqs or not self.blocks.hold(i, ctx):
                return
            inbox.popleft()
            self.decoding.join(i, ctx, tb.output[i] - tb.generated[i], tb.last_token[i])

    # ----- speculative decoding --------------------------------------------------------------------------------
    def _speculator(self, spec: SpeculativeConfig, dep: Deployment, seed: int) -> Speculator:
        table = None
        if spec.draft_model:
            draft = Deployment.resolve(
                spec.draft_model, dep.hardware, tp=dep.tp, precision=dep.scheme.name, engine=dep.engine
            )
            table = compiled_costs(cost_model(draft, None), self.max_seqs, self.config.step_time_scale)[1]
        return Speculator(spec, seed + 7919 * self.rid, table)

    # ----- completions, preemption, swapping --------------------------------------------------------------------
    def complete(self, t: float) -> bool:
        """Finish the sequences whose last token came out in the decode steps just accounted (their clients
        get it ``stream_delay`` later, and send their next request then)."""
        done = self.decoding.remove_finished()
        if not done:
            return False
        tb = self.table
        finish, last, generated, output = tb.finish, tb.last_token, tb.generated, tb.output
        seen = t + self.stream_delay
        for i, _ in done:
            last[i] = t
            finish[i] = seen
            generated[i] = output[i]
        self.blocks.release_finished(done)
        self._event = True
        if self.on_finish:
            self.on_finish([i for i, _ in done], seen)
        return True

    def ensure_decode_blocks(self) -> None:
        """Reserve the blocks the next decode step needs (a new block for every sequence crossing a block
        boundary), preempting the most recently admitted sequences if they do not fit. Idempotent until the
        step runs: steps without decodes (prefill-first, static) keep the reservation."""
        batch, blocks = self.decoding, self.blocks
        while batch.n:
            if blocks.reserve(batch.residue[(-batch.D) % batch.bs]):
                return
            self.preempt(batch.victim())
        blocks.reserve(0)

    def preempt(self, i: int) -> None:
        """Evict running sequence ``i`` (the most recently admitted: vLLM's policy) by recompute or swap."""
        tb = self.table
        ctx, remaining, held, last = self.decoding.remove(i)
        tb.preemptions[i] += 1
        tb.generated[i] = tb.output[i] - remaining
        tb.last_token[i] = last
        self.blocks.release_held(i, held)
        if self.config.preemption == "swap":
            tb.swapped[i] = True
            tb.computed[i] = ctx  # its KV goes to host memory: nothing to recompute
            # its KV and its linear-attention state (hybrid models) cross PCIe
            self.swap_cost += (held + self.blocks.state_blocks) * self.block_bytes / self.host_bw
        else:
            tb.computed[i] = 0
            tb.target[i] = int(tb.prompt[i] + tb.generated[i])
        self.waiting.appendleft(i)

    def _swap_in(self) -> bool:
        """Bring the swapped-out head of the queue back onto the GPU (PCIe transfer time) when its blocks fit
        beside the running batch's next growth (already reserved), so it is not evicted again at once."""
        tb = self.table
        i = self.waiting[0]
        ctx = int(tb.computed[i])
        need = self.blocks.count(ctx - 1)
        # + room for its next token, and for its linear-attention state (hybrid models)
        room = need + self.blocks.rule.step_units + self.blocks.state_blocks
        if self.num_seqs >= self.max_seqs or not self.blocks.fits(room):
            return False
        self.blocks.hold(i, ctx)
        self.waiting.popleft()
        tb.swapped[i] = False
        self.swap_cost += (need + self.blocks.state_blocks) * self.block_bytes / self.host_bw
        self.decoding.join(i, ctx, tb.output[i] - tb.generated[i], tb.last_token[i])
        return True


def queued_prompts(table: RequestTable, waiting: deque[int], budget: int, room: int) -> tuple[int, int]:
    """How many queued requests a step would take whole, in order, within ``budget`` tokens and ``room`` sequence
    slots, and their prompt tokens (what TensorRT-LLM's micro-batch scheduler hands its waiting checks)."""
    count = total = 0
    for i in waiting:
        left = int(table.target[i] - table.computed[i])
        if count >= room or total + left > budget:
            break
        total += left
        count += 1
    return count, total


def _window_pairs(c: int, c0: int, w: int) -> float:
    """Σ over a chunk's queries of min(position + 1, window) (pure-Python twin of cost.batch.window_pairs)."""
    lo, hi = c0 + 1, c0 + c
    top = min(hi, w)
    n_lin = max(top - lo + 1, 0)
    return n_lin * (lo + max(top, lo - 1)) / 2 + w * max(hi - max(lo - 1, w), 0)
