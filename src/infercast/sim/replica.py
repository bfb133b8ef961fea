"""One serving replica: queues, KV cache, scheduler and the step loop.

Step times come only from the cost layer: a compiled scalar function of ``StepCostModel`` for steps with
prefill work, and its decode table for decode-only steps. Between events (arrival, completion, block
boundary, window crossing, time limit) a decode batch evolves deterministically, so a whole run of decode
steps is accounted in O(1): closed-form sums of the step times (:mod:`infercast.sim.decode_cost`) and
incremental batch state (:mod:`infercast.sim.decode_set`). ``skip=False`` runs the same state machine one
step at a time; the tests check both give the same metrics.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from infercast.analysis.scenario import cost_model
from infercast.cost.batch import FEATURES
from infercast.cost.profile import CostProfile
from infercast.errors import (
    DoesNotFitError,
    InfercastError,
    require_fraction,
    require_positive_int,
    unknown_choice,
)
from infercast.memory import memory_budget
from infercast.sim.decode_cost import DecodeRun, compiled_costs, steps_to_reach
from infercast.sim.decode_set import DecodeSet
from infercast.sim.kv_cache import KVCache
from infercast.sim.recorder import Recorder, StepRecord
from infercast.sim.scheduler import SCHEDULERS, Plan, make_scheduler
from infercast.sim.speculative import SpeculativeConfig, Speculator
from infercast.sim.state import RequestTable
from infercast.specs.deployment import Deployment

NEVER = 1 << 60
PREEMPTION_MODES = ("recompute", "swap")
GAP_CHECK_EVERY_STEPS = 4096
"""Steps with prefill work between checks that the inter-token-gap buffers stay bounded. A check is a couple
of comparisons; every few thousand steps keeps it off the per-step cost while a buffer grows by at most a
few thousand x batch entries before the recorder folds it (decode runs are checked at occupancy samples)."""

STEP_FEATURES = ("one", "tokens", "sampled", "prefill_tokens", "decode_tokens", "prefill_pairs",
                 "prefill_pairs_win", "prefill_kv", "prefill_kv_win", "decode_kv", "decode_kv_win", "seqs",
                 "prefill_seqs")  # fmt: skip
"""The order in which this module writes a step's features into the tuples it passes to the compiled step
function (``_step``, ``_speculative_step``): positional, for speed, so it must be cost.batch.FEATURES."""
if tuple(FEATURES) != STEP_FEATURES:
    raise ImportError(
        "infercast.sim.replica builds step-feature tuples in the order "
        f"{STEP_FEATURES}, but infercast.cost.batch.FEATURES is {tuple(FEATURES)}: update Replica._step and "
        "Replica._speculative_step"
    )


@dataclass(frozen=True)
class ReplicaConfig:
    """How a replica is deployed and scheduled."""

    deployment: Deployment
    scheduler: str = "sarathi"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    gpu_memory_utilization: float | None = None
    prefix_caching: bool = True
    preemption: str = "recompute"  # recompute | swap
    profile: CostProfile | None = None
    speculative: SpeculativeConfig | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.deployment, Deployment):
            raise InfercastError(f"must be a Deployment, got {type(self.deployment).__name__}", field="deployment")
        if not isinstance(self.scheduler, str) or self.scheduler.strip().lower() not in SCHEDULERS:
            raise unknown_choice("scheduler", str(self.scheduler), SCHEDULERS)
        for name in ("max_num_seqs", "max_num_batched_tokens", "block_size"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, require_positive_int(name, value))
        if self.gpu_memory_utilization is not None:
            value = require_fraction("gpu_memory_utilization", self.gpu_memory_utilization)
            object.__setattr__(self, "gpu_memory_utilization", value)
        if not isinstance(self.prefix_caching, bool):
            raise InfercastError(f"must be True or False, got {self.prefix_caching!r}", field="prefix_caching")
        if self.preemption not in PREEMPTION_MODES:
            raise unknown_choice("preemption", str(self.preemption), PREEMPTION_MODES)
        if self.speculative is not None and not isinstance(self.speculative, SpeculativeConfig):
            raise InfercastError(
                f"must be a SpeculativeConfig or None, got {type(self.speculative).__name__}", field="speculative"
            )
        object.__setattr__(self, "seed", require_positive_int("seed", self.seed, minimum=0))


class Replica:
    """A replica's state and step loop (see module docstring)."""

    def __init__(self, rid: int, config: ReplicaConfig, table: RequestTable, recorder: Recorder, *, skip: bool = True):
        dep = config.deployment
        eng = dep.engine
        self.rid = rid
        self.config = config
        self.table = table
        self.rec = recorder
        self.skip = skip
        self.scheduler = make_scheduler(config.scheduler)
        self.static = self.scheduler.name == "static"  # sequences hold their whole request's blocks from admission
        self.max_seqs = eng.max_num_seqs if config.max_num_seqs is None else config.max_num_seqs
        self.max_batched_tokens = (
            eng.max_num_batched_tokens if config.max_num_batched_tokens is None else config.max_num_batched_tokens
        )
        mem = memory_budget(dep, gpu_memory_utilization=config.gpu_memory_utilization, block_size=config.block_size)
        if mem.num_blocks <= 0:
            raise DoesNotFitError(
                f"{dep.model.id} does not fit on {dep.tp}x {dep.hardware.id} at {dep.scheme.name}: no room for "
                "a KV cache after weights and runtime memory; raise --tp or use a narrower --precision",
                field="memory",
            )
        self.block_bytes = mem.block_bytes
        self.bs = mem.block_size
        hash_bs = table.hashes_block_size if table.hashes is not None else mem.block_size
        self.kv = KVCache(mem.num_blocks, mem.block_size, config.prefix_caching, hash_bs)
        self.window = dep.model.sliding_window
        model = cost_model(dep, config.profile)
        self.profile = model.profile
        self.request_overhead = model.profile.request_overhead_s
        self.step_fn, self.decode_table = compiled_costs(model, self.max_seqs)
        table = self.decode_table
        # one context-dependent operator (the common case): its lines' intercepts by batch size and slopes in
        # Σ context, for _decode_run's inline path (without a window Σ min(ctx, W) = Σ ctx, so the window
        # slope folds into the context slope)
        self._one_line = (
            (
                table.constant_f,
                table.c0_f[0],
                table.m0_f[0],
                table.cs_f[0] + table.cw_f[0],
                table.ms_f[0] + table.mw_f[0],
            )
            if table.num_varying == 1
            else None
        )
        self.host_bw = dep.hardware.host_link.bandwidth_bytes_s
        self.t = 0.0
        self.pending: deque[int] = deque()
        self.waiting: deque[int] = deque()
        self.prefilling: list[int] = []
        self.run = DecodeSet(self.bs, self.window)
        self.swap_cost = 0.0
        self.reserved = 0  # blocks allocated for the growth of the next decode step (see _ensure_decode_blocks)
        self.on_finish: Callable[[list[int], float], None] | None = None  # (requests finished, at time t)
        self.on_prefilled: Callable[[int, float], None] | None = None
        self.spec = self._speculator(config, dep) if config.speculative else None
        self._steps_since_check = 0
        self.next_sample = 0.0  # when this replica records its next occupancy sample
        self.yield_on_event = False  # return from run_until after a completion or hand-off (coordinated runs)
        self._event = False

    # ----- counts used by schedulers and routers --------------------------------------------------------------
    @property
    def num_running(self) -> int:
        return self.run.n

    @property
    def num_seqs(self) -> int:
        return self.run.n + len(self.prefilling)

    @property
    def outstanding(self) -> int:
        """Requests on this replica not yet finished (for least-outstanding routing)."""
        return len(self.pending) + len(self.waiting) + self.num_seqs

    def next_activity(self) -> float:
        """When this replica next has something to do (inf when idle with nothing pending)."""
        if self.run.n or self.prefilling or self.waiting:
            return self.t
        if self.pending:
            return max(self.t, float(self.table.visible[self.pending[0]]))
        return np.inf

    def prefill_left(self, i: int) -> int:
        return int(self.table.target[i] - self.table.computed[i])

    # ----- admission -----------------------------------------------------------------------------------------
    def enqueue(self, i: int, t: float | None = None) -> None:
        """Hand request ``i`` (sent at ``t``, default its arrival) to this replica.

        It reaches the engine after the engine's per-request overhead (API server, tokenisation); requests
        must be enqueued in the order they are sent.
        """
        tb = self.table
        tb.replica[i] = self.rid
        tb.visible[i] = (tb.arrival[i] if t is None else t) + self.request_overhead
        self.pending.append(i)

    def admit(self, i: int, budget: int | None, *, limit: int | None = None, reserve: bool = False) -> int | None:
        """Move the head of the waiting queue into prefill; returns the tokens scheduled now.

        Looks up the prefix cache, then allocates KV blocks for the scheduled tokens (``reserve``: for the
        whole prompt + output). Returns None, changing nothing, when blocks run short or the remaining
        prompt exceeds ``limit``.
        """
        tb, kv = self.table, self.kv
        if tb.swapped[i]:
            return None  # swapped-out sequences come back whole, through _swap_in
        target = tb.target[i]
        if tb.hashes is not None and tb.computed[i] == 0:
            hashes = tb.hashes[i]
            hits = kv.match(hashes, target)  # cache units: whole engine blocks and whole hash blocks
            cached = hits * kv.unit_tokens
        else:
            hashes, hits, cached = None, 0, 0
        left = target - cached
        if limit is not None and left > limit:
            kv.unpin(hashes, hits)
            return None
        chunk = left if budget is None or left <= budget else budget
        shared = hits * kv.blocks_per_unit
        length = tb.prompt[i] + tb.output[i] if reserve else cached + chunk
        need = -(-length // self.bs) - shared
        if not kv.allocate(need):
            kv.unpin(hashes, hits)
            return None
        self.waiting.popleft()
        tb.computed[i] = cached
        tb.shared[i] = shared
        tb.pinned[i] = hits
        tb.private[i] = need if need > 0 else 0
        if tb.preemptions[i] == 0:
            tb.cached_tokens[i] = cached
        self.prefilling.append(i)
        return chunk

    def grow(self, i: int, budget: int | None) -> int:
        """Schedule the next chunk of a request in prefill; returns its tokens (0 if blocks run short)."""
        tb = self.table
        computed = tb.computed[i]
        left = tb.target[i] - computed
        chunk = left if budget is None or left <= budget else budget
        need = -(-(computed + chunk) // self.bs) - tb.shared[i] - tb.private[i]
        if need > 0:
            if not self.kv.allocate(need):
                return 0
            tb.private[i] += need
        return chunk

    # ----- the loop ---------------------------------------------------------------------------------------------
    def run_until(self, t_limit: float = np.inf) -> None:
        """Run steps that start before ``t_limit`` (the last may end after it)."""
        visible, swapped = self.table.visible, self.table.swapped
        run, pending, waiting, prefilling = self.run, self.pending, self.waiting, self.prefilling
        while True:
            while pending and visible[pending[0]] <= self.t:
                waiting.append(pending.popleft())
            if not (run.n or prefilling or waiting):
                if pending and visible[pending[0]] < t_limit:
                    self.t = max(self.t, float(visible[pending[0]]))
                    continue
                return
            if self.t >= t_limit:
                return
            if run.n and run.residue[(-run.D) % run.bs] != self.reserved:
                self._ensure_decode_blocks()
            if waiting and swapped[waiting[0]] and self._swap_in():
                self._ensure_decode_blocks()
            plan = self.scheduler.plan(self)
            if plan is None:
                if waiting and not run.n and not prefilling:
                    self._cannot_admit(waiting[0])
                if pending and visible[pending[0]] < t_limit:
                    self.t = max(self.t, float(visible[pending[0]]))
                    continue
                return
            if plan.prefill:
                self._step(plan)
                if (
                    self.spec is None
                    and run.n
                    and not waiting
                    and not prefilling
                    and self.t < t_limit
                    and not (self._event and self.yield_on_event)
                    and not (pending and visible[pending[0]] <= self.t)
                ):  # the next iteration would plan a decode run: start it here
                    if run.residue[(-run.D) % run.bs] != self.reserved:
                        self._ensure_decode_blocks()
                        if waiting or not run.n:
                            continue
                    self._decode_run(t_limit)
            elif self.spec is not None:
                self._speculative_step()
            else:
                self._decode_run(t_limit)
            if self._event and self.yield_on_event:
                self._event = False
                return

    def _cannot_admit(self, i: int) -> None:
        tb = self.table
        need = -(-int(tb.prompt[i] + tb.output[i]) // self.bs)
        raise DoesNotFitError(
            f"request {i} ({tb.prompt[i]} prompt + {tb.output[i]} output tokens) needs {need} KV blocks but the "
            f"replica has {self.kv.num_blocks} blocks of {self.bs} tokens; shorten the request or add memory",
            field="workload",
        )

    # ----- a step with prefill work ---------------------------------------------------------------------------
    def _step(self, plan: Plan) -> None:
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
        run = self.run
        n = run.n if plan.decode else 0
        if n:
            s = float(run.sum_base + n * run.D)
            sw = float(run.window_sum()) if W else s
        else:
            s = sw = 0.0
        n_pre = len(plan.prefill)
        x = (1.0, pre_tokens + n, sampled + n, pre_tokens, n, pairs, pairs_w, kv_read, kv_read_w, s, sw,
             n_pre + n, n_pre)  # fmt: skip
        dt = self.step_fn(x) + self.swap_cost
        self.swap_cost = 0.0
        start = self.t
        end = start + dt
        self.t = end
        if self.rec.tracing:
            self.rec.step(StepRecord(self.rid, start, dt, "mixed" if n else "prefill", pre_tokens, n,
                                     prefill_ids=tuple(i for i, _ in plan.prefill)))  # fmt: skip
        else:
            self.rec.step_count += 1
            self.rec.busy_time += dt
        if n:
            self._decode_gaps(end)
            run.advance(1, self.reserved)
            self.reserved = 0
            run.last_decode = end
            if run.heap[0][0] <= run.D:
                self._complete(end)
        scheduled = tb.scheduled
        for i, c in plan.prefill:
            if scheduled[i] != scheduled[i]:  # NaN: first time any of its tokens runs
                scheduled[i] = start
            done = computed[i] + c
            computed[i] = done
            if done == target[i]:
                self._prefill_done(i, end)
        if end >= self.next_sample:
            self.next_sample = self.rec.sample(self.rid, end, self.kv.used, run.n, len(self.waiting),
                                               len(self.prefilling))  # fmt: skip
        self._steps_since_check += 1
        if self._steps_since_check > GAP_CHECK_EVERY_STEPS:
            self._steps_since_check = 0
            self.rec.flush_check()

    def _decode_gaps(self, end: float) -> None:
        """Gaps of a decode step ending at ``end`` after a change (a join, a prefill step, a swap): newcomers
        from their own last token, the others together from the last decode step."""
        run = self.run
        others = run.n
        push = self.rec.gaps.point_buffer().extend
        if run.joined:
            for _, t_last in run.joined:
                push((end - t_last, 1.0))
                others -= 1
            run.joined = []
        if others:
            push((end - run.last_decode, others))

    def _prefill_done(self, i: int, t: float) -> None:
        tb, kv = self.table, self.kv
        target = tb.target[i]
        if tb.hashes is not None:
            moved, tb.pinned[i] = kv.publish(tb.hashes[i], tb.pinned[i], target)
            if moved:
                tb.private[i] -= moved
                tb.shared[i] += moved
        self.prefilling.remove(i)
        generated = tb.generated[i]
        if generated == 0:
            tb.first_token[i] = t
        else:
            self.rec.gaps.add(t - tb.last_token[i])
        generated += 1
        tb.generated[i] = generated
        tb.last_token[i] = t
        if generated >= tb.output[i]:
            self._release(i)
            tb.finish[i] = t
            self._event = True
            if self.on_finish:
                self.on_finish([i], t)
            return
        if self.on_prefilled is not None:  # disaggregated: the decode pool takes over
            self._release(i)
            self._event = True
            self.on_prefilled(i, t)
            return
        reserved = tb.private[i] + tb.shared[i] if self.static else 0
        self.run.join(i, target + 1, tb.output[i] - generated, t, reserved)

    def join_decoding(self, i: int) -> bool:
        """Disaggregated decode pool: request ``i`` arrives with its prompt KV; False if blocks run short."""
        tb = self.table
        ctx = int(tb.prompt[i] + tb.generated[i])
        need = -(-(ctx - 1) // self.bs)
        if self.num_seqs >= self.max_seqs or not self.kv.allocate(need):
            return False
        tb.private[i], tb.shared[i], tb.pinned[i] = need, 0, 0
        self.run.join(i, ctx, tb.output[i] - tb.generated[i], tb.last_token[i])
        return True

    # ----- runs of decode-only steps -----------------------------------------------------------------------------
    def _decode_run(self, t_limit: float) -> None:
        """Decode steps until the next event, in O(1) each (one step at a time when ``skip`` is off).

        A run's step j costs ``const + Σ_v max(a_v + j·da_v, b_v + j·db_v)`` (:class:`DecodeRun`). Completions
        end a run; when nothing else could be scheduled afterwards (no queue, no prefill, no closed-loop
        client waiting) the next run starts here instead of in the main loop.
        """
        run, kv, rec, table = self.run, self.kv, self.rec, self.decode_table
        arrivals = self.scheduler.continuous
        visible = self.table.visible
        window = self.window
        gaps = rec.gaps
        pending, skip = self.pending, self.skip
        limited = t_limit < math.inf
        single = self._one_line is not None
        simple_lines = single and not window
        if single:
            const_f, c0_f, m0_f, cs, ms = self._one_line
        ramps = gaps.ramp_buffer(table.num_varying)
        while True:
            n = run.n
            s = float(run.sum_base + n * run.D)
            swap = self.swap_cost  # host transfers of preempted KV delay this run
            if swap:
                self.swap_cost = 0.0
            origin = self.t + swap
            if not skip:
                k = 1
            else:  # steps to the next completion (DecodeSet.steps_to_completion, whose stale-entry skip is rare)
                top = run.heap[0]
                k = top[0] - run.D if run.finish_at.get(top[1]) == top[0] else run.steps_to_completion()
            line = None
            if simple_lines:
                # step j costs K + max(ca + j·dca, ma + j·dma); when one line stays on top over the k steps,
                # the run is one arithmetic series (the common case: no objects made, deadlines solved by
                # decode_cost.steps_to_reach); otherwise the general DecodeRun below
                const = const_f[n]
                ca, dca = c0_f[n] + cs * s, cs * n
                ma, dma = m0_f[n] + ms * s, ms * n
                last = k - 1
                if (ca >= ma) == (ca + dca * last >= ma + dma * last):
                    base, slope = (const + ca, dca) if ca >= ma else (const + ma, dma)
                    line = (ca, dca, ma, dma)
                    first = base
                    if k > 1 and arrivals and pending:
                        span = visible[pending[0]] - origin
                        if k * base + slope * k * (k - 1) * 0.5 >= span:  # the run reaches the next arrival
                            k = steps_to_reach(base, slope, span, k)
                    if k > 1 and limited:
                        k = steps_to_reach(base, slope, t_limit - origin, k)
            if line is None:
                ctx_run = DecodeRun(table, n, s, float(run.window_sum()) if window else s, n,
                                    run.n_below if window else n)  # fmt: skip
                const, line = ctx_run.const, ctx_run.lines[0] if single else None
                first = ctx_run.step(0)
                if k > 1:
                    if window:
                        k = min(k, run.steps_to_window())
                    if arrivals and pending:
                        k = ctx_run.steps_until(visible[pending[0]] - origin, k, first)
                    if limited:
                        k = ctx_run.steps_until(t_limit - origin, k, first)
            else:
                ctx_run = None
            now = self.reserved  # the first step's growth, reserved by _ensure_decode_blocks
            if k > 1:
                grown = run.growth_over(k)
                if grown - now > kv.free + kv.evictable:
                    k = self._steps_with_blocks(k)
                    grown = run.growth_over(k)
                if grown > now and not kv.allocate(grown - now):
                    raise RuntimeError("block accounting error: a decode run exceeded the checked budget")
                total = ctx_run.total(k) if ctx_run is not None else k * base + slope * k * (k - 1) / 2
            else:
                grown, total = now, first
            self.reserved = 0
            start = self.t
            if swap:
                first += swap
                total += swap
            end = start + total
            # gaps: every sequence sees every step of the run; the first step's gap is measured from each
            # sequence's last token (the last decode step, or its own first token if it just joined)
            if not run.joined and not swap and run.last_decode == start:
                j0 = 0  # every sequence's previous token came out at the last decode step: one ramp
            else:
                j0 = 1
                self._decode_gaps(start + first)
            if k > j0:  # steps j0..k-1, each a gap of every sequence: (j0, j1, weight, const, lines...)
                if single:
                    ramps.extend((j0, k, n, const, line[0], line[1], line[2], line[3]))
                else:
                    ramps.extend((j0, k, n, const))
                    for each in ctx_run.lines:
                        ramps.extend(each)
            if window:
                run.advance(k, grown)
            else:  # DecodeSet.advance without window crossings
                run.held += grown
                run.D += k
            run.last_decode = end
            self.t = end
            if rec.tracing:
                rec.step(StepRecord(self.rid, start, total, "decode", 0, n, steps=k))
            else:
                rec.step_count += k
                rec.busy_time += total
            finished = run.heap[0][0] <= run.D and self._complete(end)
            if end >= self.next_sample:
                self.next_sample = rec.sample(self.rid, end, kv.used, run.n, len(self.waiting), len(self.prefilling))
            if not (finished and skip and run.n and not self.waiting and not self.prefilling and end < t_limit):
                return
            if (pending and visible[pending[0]] <= end) or self.yield_on_event:
                return
            if run.residue[(-run.D) % run.bs] != self.reserved:
                self._ensure_decode_blocks()
                if self.waiting or not run.n:  # a preemption queued work for the scheduler
                    return

    # ----- speculative decoding --------------------------------------------------------------------------------
    def _speculator(self, config: ReplicaConfig, dep: Deployment) -> Speculator:
        spec = config.speculative
        table = None
        if spec.draft_model:
            draft = Deployment.resolve(spec.draft_model, dep.hardware, tp=dep.tp, precision=dep.scheme.name,
                                       engine=dep.engine)  # fmt: skip
            table = compiled_costs(cost_model(draft, None), self.max_seqs)[1]
        return Speculator(spec, config.seed + 7919 * self.rid, table)

    def _speculative_step(self) -> None:
        """Draft k tokens, verify k + 1 per sequence in one target pass, emit 1 + accepted (see speculative.py)."""
        run, kv, spec = self.run, self.kv, self.spec
        k = spec.config.num_tokens
        # room for the most tokens the step can emit
        while run.n and run.growth_over(k + 1) - self.reserved > kv.free + kv.evictable:
            self._preempt(run.victim())
        if not run.n:
            return
        n, s = run.n, float(run.context_sum())
        sw = float(run.window_sum())
        q = n * (k + 1)  # query tokens of the verification pass
        kv_read = (k + 1) * s + n * k * (k + 1) / 2
        kv_read_w = (k + 1) * sw + n * k * (k + 1) / 2 if not self.window else (k + 1) * sw
        x = (1.0, q, q, 0.0, q, 0.0, 0.0, 0.0, 0.0, kv_read, kv_read_w, n, 0.0)
        verify = self.step_fn(x)
        if spec.draft_table is not None:
            draft = DecodeRun(spec.draft_table, n, s, sw, n, run.n_below if self.window else n).total(k)
        else:
            draft = spec.config.draft_cost * k * DecodeRun(self.decode_table, n, s, sw, n, n).step(0)
        dt = verify + draft + self.swap_cost
        self.swap_cost = 0.0
        m = 1 + spec.accepted()
        grown = run.growth_over(m)
        if grown > self.reserved:
            kv.allocate(grown - self.reserved)
        elif grown < self.reserved:
            kv.release(self.reserved - grown)
        self.reserved = 0
        start, end = self.t, self.t + dt
        self._decode_gaps(end)
        run.advance(m, grown)
        run.last_decode = end
        self.t = end
        if self.rec.tracing:
            self.rec.step(StepRecord(self.rid, start, dt, "decode", 0, n))
        else:
            self.rec.count(1, dt)
        self._complete(end)
        self.next_sample = self.rec.sample(self.rid, end, kv.used, run.n, len(self.waiting), len(self.prefilling))

    def _steps_with_blocks(self, k: int) -> int:
        """Most steps (>= 1) whose block growth fits in what is available now (frees not counted)."""
        run, avail = self.run, self.kv.available + self.reserved
        lo, hi = 1, k
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if run.growth_over(mid) <= avail:
                lo = mid
            else:
                hi = mid - 1
        return lo

    # ----- bookkeeping ---------------------------------------------------------------------------------------------
    def _complete(self, t: float) -> bool:
        """Finish the sequences whose last token came out in the steps just accounted."""
        done = self.run.remove_finished()
        if not done:
            return False
        tb, kv = self.table, self.kv
        finish, shared, pinned, generated, output = tb.finish, tb.shared, tb.pinned, tb.generated, tb.output
        freed = 0
        for i, held in done:
            finish[i] = t
            generated[i] = output[i]
            freed += held - shared[i]
            if pinned[i]:
                kv.unpin(tb.hashes_of(i), pinned[i])
                pinned[i] = 0
            shared[i] = 0
        kv.release(freed)
        self._event = True
        if self.on_finish:
            self.on_finish([i for i, _ in done], t)
        return True

    def _release(self, i: int) -> None:
        tb = self.table
        self.kv.release(int(tb.private[i]))
        if tb.pinned[i]:
            self.kv.unpin(tb.hashes_of(i), int(tb.pinned[i]))
        tb.private[i] = tb.shared[i] = tb.pinned[i] = 0

    def _ensure_decode_blocks(self) -> None:
        """Reserve the blocks the next decode step needs (a new block for every sequence crossing a block
        boundary), preempting the most recently admitted sequences if they do not fit. Idempotent until the
        step runs: steps without decodes (prefill-first, static) keep the reservation."""
        run, kv = self.run, self.kv
        while run.n:
            need = run.residue[(-run.D) % run.bs]
            delta = need - self.reserved
            if not delta:
                return
            if delta < 0:
                kv.release(-delta)
                self.reserved = need
                return
            if kv.allocate(delta):
                self.reserved = need
                return
            self._preempt(run.victim())
        if self.reserved:
            kv.release(self.reserved)
            self.reserved = 0

    def _preempt(self, i: int) -> None:
        """Evict running sequence ``i`` (the most recently admitted: vLLM's policy) by recompute or swap."""
        tb = self.table
        ctx, remaining, held, last = self.run.remove(i)
        tb.preemptions[i] += 1
        tb.generated[i] = tb.output[i] - remaining
        tb.private[i] = held - int(tb.shared[i])
        tb.last_token[i] = last
        self._release(i)
        if self.config.preemption == "swap":
            tb.swapped[i] = True
            tb.computed[i] = ctx  # its KV goes to host memory: nothing to recompute
            self.swap_cost += held * self.block_bytes / self.host_bw
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
        need = -(-(ctx - 1) // self.bs) + 1  # its blocks plus room for its next token
        if self.num_seqs >= self.max_seqs or need > self.kv.free + self.kv.evictable:
            return False
        need -= 1
        self.kv.allocate(need)
        self.waiting.popleft()
        tb.swapped[i] = False
        tb.private[i], tb.shared[i], tb.pinned[i] = need, 0, 0
        self.swap_cost += need * self.block_bytes / self.host_bw
        self.run.join(i, ctx, tb.output[i] - tb.generated[i], tb.last_token[i])
        return True


def _window_pairs(c: int, c0: int, w: int) -> float:
    """Σ over a chunk's queries of min(position + 1, window) (pure-Python twin of cost.batch.window_pairs)."""
    lo, hi = c0 + 1, c0 + c
    top = min(hi, w)
    n_lin = max(top - lo + 1, 0)
    return n_lin * (lo + max(top, lo - 1)) / 2 + w * max(hi - max(lo - 1, w), 0)
