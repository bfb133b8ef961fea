"""A reference simulator: short, one engine step at a time, plain Python records — the oracle the fast
simulator (:mod:`infercast.sim.replica`, :mod:`infercast.sim.decode_runner`, :mod:`infercast.sim.cluster`)
is tested against. Slow (one cost-model evaluation per step): for tests only.

It shares the *policies* — the scheduler classes (through :class:`~infercast.sim.scheduler.base.ReplicaView`),
the router, the prefix cache's pool (:class:`~infercast.sim.kv_cache.KVCache`), the memory budget, the cost
model and the summary's metric definitions — and none of the fast path's mechanics: no decode spans or
closed-form sums (every step is ``step_time(StepBatch.from_items(...))``), no incremental batch state
(every sequence's context and blocks are stored on it), no block ledger, every gap stored. The rules:

* A request reaches its engine ``request_overhead`` + ``request_jitter`` x its intake draw after it is sent (in
  the order those times end, ties in sending order). Steps are atomic at their start: an
  event at time T (arrival, client send, KV transfer) is routed after every step that starts before T and
  before every step that starts at T or later; ties between replicas go to the lowest id.
* Before each step a replica (1) queues the requests that have reached it, (2) lets KV transfers waiting in
  its inbox join the running batch while a slot and blocks are free, (3) gives every running sequence the
  block its next token needs, preempting the most recently joined sequences while they do not fit, (4) brings
  a swapped-out request at the head of the queue back if its blocks (plus its next token's) fit, reserving again.
* A sequence of t tokens holds the memory budget's ``kv_blocks_per_sequence(t)`` blocks (sliding layers: layer-group
  blocks, capped at the window), or whole-context blocks while the prefix cache is in use.
* Then the scheduler plans the step; it lasts ``step_time`` of its batch (times ``step_time_scale``) plus any
  pending swap transfer, and its tokens come out at its end: decodes first (completions by request id), then
  finished prefills. The pool holds ``kv_pool_scale`` times the budget's blocks.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from infercast.cost.batch import StepBatch
from infercast.cost.front_end import FrontEnd
from infercast.cost.step import cost_model
from infercast.errors import DoesNotFitError, InfercastError
from infercast.memory import kv_blocks_per_sequence, memory_budget
from infercast.sim.api import SimulationResult, summarize, with_tp
from infercast.sim.blocks import replica_pool
from infercast.sim.cluster import Router
from infercast.sim.config import SimulationConfig
from infercast.sim.kv_cache import KVCache
from infercast.sim.recorder import Recorder
from infercast.sim.scheduler import Plan, engine_scheduler, make_scheduler
from infercast.sim.state import RequestTable, intake_draws
from infercast.specs.deployment import Deployment

NAN = float("nan")


@dataclass
class Request:
    """One request's lengths, progress, blocks and timestamps."""

    id: int
    prompt: int
    output: int
    arrival: float
    hashes: np.ndarray | None
    target: int = 0  # tokens the current prefill must hold: the prompt, plus outputs after a recompute
    computed: int = 0
    generated: int = 0
    context: int = 0  # while running: context of its next decode token
    private: int = 0  # blocks it owns
    shared: int = 0  # prompt blocks served by the prefix cache
    pinned: int = 0  # prefix-cache units it references
    state: int = 0  # blocks of its linear-attention state (hybrid models)
    swapped: bool = False
    preemptions: int = 0
    cached_tokens: int = 0
    replica: int = -1
    prefill_replica: int = -1
    visible: float = NAN
    intake: float = 0.0  # its intake draw (x request_jitter_s: its varying request overhead)
    scheduled: float = NAN
    first_token: float = NAN
    last_token: float = NAN
    finish: float = NAN


class ReferenceReplica:
    """One replica, stepped one engine step at a time (see module docstring)."""

    def __init__(
        self,
        rid: int,
        dep: Deployment,
        config: SimulationConfig,
        requests: list[Request],
        hash_block_size: int | None,
        gaps: list[float],
    ):
        engine = config.engine
        if engine.speculative is not None:
            raise InfercastError("the reference simulator does not model speculative decoding", field="speculative")
        self.rid, self.requests, self.gaps = rid, requests, gaps
        self.scheduler = make_scheduler(engine.scheduler or engine_scheduler(dep.engine))
        self.reserves = self.scheduler.reserves
        self.max_seqs = engine.max_num_seqs or dep.engine.max_num_seqs
        self.max_batched_tokens = engine.max_num_batched_tokens or dep.engine.max_num_batched_tokens
        mem = memory_budget(
            dep,
            gpu_memory_utilization=engine.gpu_memory_utilization,
            block_size=engine.block_size,
            max_num_batched_tokens=self.max_batched_tokens,
            max_num_seqs=self.max_seqs,
        )
        if dep.engine.limits_per_dp_rank:  # the limits bound each attention-DP rank
            self.max_seqs *= dep.attention_dp
            self.max_batched_tokens *= dep.attention_dp
        prefix_cache = engine.prefix_caching and hash_block_size is not None
        _, num_blocks, self.block_bytes, self.state_blocks = replica_pool(mem, prefix_cache)
        num_blocks = max(1, int(num_blocks * engine.kv_pool_scale))
        self.bs, self.token_bytes = mem.block_size, mem.kv_bytes_per_token
        self.state_bytes = mem.state_bytes_per_sequence
        # sliding layers keep only their window, in layer-group blocks: the memory budget's own count (whole-
        # context whole-layer blocks while the prefix cache is in use, see blocks.replica_pool)
        self.windowed = mem.kv_window is not None and not prefix_cache
        self.token_room = sum(mem.layer_groups) if self.windowed else 1  # most blocks one more token takes
        self.groups, self.window_tokens = mem.layer_groups, mem.kv_window or 0
        self.kv = KVCache(num_blocks, mem.block_size, engine.prefix_caching, hash_block_size or mem.block_size)
        self.model_spec = dep.model
        self.model = cost_model(dep, config.profile)
        self.step_scale = engine.step_time_scale
        self.overhead = self.model.profile.request_overhead_s
        self.jitter = self.model.profile.request_jitter_s
        token_s = self.model.profile.stream_token_s
        self.front_end = FrontEnd(token_s) if token_s > 0 else None
        self.stream_delay = 0.0
        self.overlap = dep.engine.overlap_scheduler if engine.overlap_scheduler is None else engine.overlap_scheduler
        self.recv_interval = dep.engine.recv_interval if engine.recv_interval is None else engine.recv_interval
        self.recv_count = self.recv_interval  # decode steps since the engine last polled for new requests
        waits = dep.engine.batch_wait_iters if engine.batch_wait_iters is None else engine.batch_wait_iters
        ratio = dep.engine.batch_wait_ratio if engine.batch_wait_ratio is None else engine.batch_wait_ratio
        self.wait_iters = waits if ratio > 0 and dep.attention_dp == 1 else 0
        self.wait_ratio = ratio
        self.wait_count = 0
        adp = dep.engine.adp_balance_iters if engine.adp_balance_iters is None else engine.adp_balance_iters
        self.adp_iters = adp if dep.attention_dp > 1 else 0
        self.adp_ranks = dep.attention_dp
        self.adp_count = 0
        self.decided = False  # this step's prompts were held or released by a waiting rule
        self.last_start = -math.inf
        self.window = dep.model.attention_window
        self.host_bw = dep.hardware.host_link.bandwidth_bytes_s
        self.swap = engine.preemption == "swap"
        self.t = 0.0
        self.pending: deque[int] = deque()
        self.waiting: deque[int] = deque()
        self.prefilling: list[int] = []
        self.running: list[int] = []  # in join order
        self.inbox: deque[int] = deque()
        self.swap_cost = 0.0
        self.on_finish: Callable[[list[int], float], None] | None = None  # (ids, t)
        self.hand_off: Callable[[int, float], None] | None = None  # (id, t): a prefill pool's finished prefill
        self.steps = self.prefill_only_steps = self.decode_seqs = 0
        self.busy = 0.0

    # ----- ReplicaView ---------------------------------------------------------------------------------------
    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_seqs(self) -> int:
        return len(self.running) + len(self.prefilling)

    @property
    def outstanding(self) -> int:
        return len(self.pending) + len(self.waiting) + self.num_seqs

    def admit(self, i: int, budget: int | None, *, limit: int | None = None, reserve: bool = False) -> int | None:
        r, kv = self.requests[i], self.kv
        if r.swapped:
            return None
        hits, idle = kv.lookup(r.hashes, r.target) if r.computed == 0 else (0, 0)
        cached = hits * kv.unit_tokens
        left = r.target - cached
        if limit is not None and left > limit:
            return None
        chunk = left if budget is None or left <= budget else budget
        shared = hits * kv.blocks_per_unit
        need = max(self._blocks(r.prompt + r.output if reserve else cached + chunk) - shared, 0)
        if need + self.state_blocks > kv.free + kv.evictable - idle:  # refused: nothing changes
            return None
        kv.pin(r.hashes, hits, r.target)
        kv.allocate(need + self.state_blocks)
        r.pinned = hits
        self.waiting.popleft()
        r.private, r.shared, r.state, r.computed = need, shared, self.state_blocks, cached
        if r.preemptions == 0:
            r.cached_tokens = cached
        self.prefilling.append(i)
        return chunk

    def grow(self, i: int, budget: int | None) -> int:
        r = self.requests[i]
        left = r.target - r.computed
        chunk = left if budget is None or left <= budget else budget
        need = self._blocks(r.computed + chunk) - r.shared - r.private
        if need > 0:
            if not self.kv.allocate(need):
                return 0
            r.private += need
        return chunk

    # ----- blocks -------------------------------------------------------------------------------------------------
    def _blocks(self, tokens: int) -> int:
        """KV blocks ``tokens`` tokens of one sequence hold."""
        if not self.windowed:
            return -(-tokens // self.bs)
        m = self.model_spec
        return int(
            kv_blocks_per_sequence(tokens, self.bs, m.sliding_window, m.num_attention_layers, m.num_sliding_layers)
        )

    def _unpin(self, r: Request) -> None:
        if r.pinned:
            self.kv.unpin(r.hashes, r.pinned)
            r.pinned = 0

    def _free(self, r: Request) -> None:
        self.kv.release(r.private + r.state)
        self._unpin(r)
        r.private = r.shared = r.state = 0

    def _hold(self, r: Request, context: int) -> bool:
        """Blocks for the KV of ``context - 1`` tokens (and the linear state) of a sequence about to decode."""
        need = self._blocks(context - 1)
        if not self.kv.allocate(need + self.state_blocks):
            return False
        r.private, r.shared, r.pinned, r.state = need, 0, 0, self.state_blocks
        return True

    def _reserve_next_tokens(self) -> None:
        """Every running sequence gets the block its next token writes, or the newest ones are preempted."""
        while self.running:
            grow = [] if self.reserves else [self.requests[i] for i in self.running]
            need = sum(max(self._blocks(r.context) - r.private - r.shared, 0) for r in grow)
            if self.kv.allocate(need):
                for r in grow:
                    r.private += max(self._blocks(r.context) - r.private - r.shared, 0)
                return
            self._preempt(self.requests[self.running.pop()])

    def _preempt(self, r: Request) -> None:
        r.preemptions += 1
        written = self._blocks(r.context - 1)  # blocks holding KV (not the empty one for the next token)
        self._free(r)
        if self.swap:
            r.swapped, r.computed = True, r.context
            self.swap_cost += written * self.block_bytes / self.host_bw
        else:
            r.computed, r.target = 0, r.prompt + r.generated
        self.waiting.appendleft(r.id)

    # ----- the step -----------------------------------------------------------------------------------------------
    def enqueue(self, i: int, t: float | None = None) -> None:
        r = self.requests[i]
        r.replica = self.rid
        sent = r.arrival if t is None else t
        r.visible = sent + self.overhead + self.jitter * r.intake
        if self.front_end is not None:
            r.visible += self.front_end.backlog_at(sent)
        k = len(self.pending)  # the intake queue stays in the order requests reach the engine
        while k and self.requests[self.pending[k - 1]].visible > r.visible:
            k -= 1
        self.pending.insert(k, i)

    def next_start(self) -> float:
        if self.running or self.prefilling or self.waiting:
            return self.t
        if self.pending:
            return max(self.t, self.requests[self.pending[0]].visible)
        return math.inf

    def step(self) -> None:
        """Prepare and run one engine step starting at :meth:`next_start` (see module docstring)."""
        reqs = self.requests
        if not (self.running or self.prefilling or self.waiting):
            self.t = max(self.t, reqs[self.pending[0]].visible)
        busy = bool(self.running or self.prefilling or self.waiting)
        polled = not busy or self.recv_count >= self.recv_interval
        if polled:
            self.recv_count = 0
        while polled and self.pending and reqs[self.pending[0]].visible <= self.t:
            if self.overlap and busy and reqs[self.pending[0]].visible > self.last_start:
                break  # it arrived while the last step ran: the engine had scheduled this step already
            self.waiting.append(self.pending.popleft())
        self._take_inbox()
        self._reserve_next_tokens()
        if self.waiting and reqs[self.waiting[0]].swapped and self._swap_in():
            self._reserve_next_tokens()
        plan = Plan(decode=True) if self._holds_prompts() else self.scheduler.plan(self)
        if plan is None:
            if self.waiting and not self.running and not self.prefilling:
                raise DoesNotFitError(f"request {self.waiting[0]} cannot be admitted", field="workload")
            if not self.pending:
                raise RuntimeError("reference simulator: a replica with work cannot plan a step")
            self.t = max(self.t, reqs[self.pending[0]].visible)
            return
        decodes = list(self.running) if plan.decode or not plan.prefill else []
        chunks = [(c, reqs[i].computed) for i, c in plan.prefill]
        sampled = sum(1 for i, c in plan.prefill if reqs[i].computed + c == reqs[i].target)
        batch = StepBatch.from_items(
            chunks, [reqs[i].context for i in decodes], window=self.window, prefill_samples=sampled
        )
        start = self.last_start = self.t
        duration = float(self.model.step_time(batch)[0]) * self.step_scale + self.swap_cost
        end = self.t = start + duration
        self.swap_cost = 0.0
        self.steps += 1
        self.busy += duration
        self.decode_seqs += len(decodes)
        self.prefill_only_steps += not decodes
        self.recv_count = self.recv_interval if plan.prefill else self.recv_count + 1
        if self.adp_iters and not self.decided and not plan.prefill:
            self.adp_count = (self.adp_count + 1) % self.adp_iters  # the balancer counts every step
        if self.front_end is not None:
            self.stream_delay = self.front_end.emit(start, end, len(decodes) + sampled)
        seen = end + self.stream_delay
        finished = []
        for i in decodes:
            r = reqs[i]
            self.gaps.append(end - r.last_token)
            r.last_token, r.generated, r.context = end, r.generated + 1, r.context + 1
            if r.generated == r.output:
                finished.append(i)
        for i in sorted(finished):
            self.running.remove(i)
            reqs[i].finish = seen
            self._free(reqs[i])
        if finished and self.on_finish:
            self.on_finish(sorted(finished), seen)
        for i, c in plan.prefill:
            r = reqs[i]
            if math.isnan(r.scheduled):
                r.scheduled = start
            r.computed += c
            if r.computed == r.target:
                self._prefill_done(r, end)

    def _holds_prompts(self) -> bool:
        """TensorRT-LLM batch waiting and attention-DP balancing, step by step (see the fast replica's
        ``_holds_prompts``): the prompts that fit this step, counted against the rules' thresholds."""
        self.decided = False
        if not (self.wait_iters or self.adp_iters) or not self.waiting or self.prefilling:
            return False
        if self.requests[self.waiting[0]].swapped:
            return False
        n = len(self.running)
        budget, room = self.max_batched_tokens - n, self.max_seqs - self.num_seqs
        count = tokens = 0
        for i in self.waiting:
            left = self.requests[i].target - self.requests[i].computed
            if count >= room or tokens + left > budget:
                break
            tokens, count = tokens + left, count + 1
        if not count:
            return False
        self.decided = True
        if self.adp_iters:
            ranks = self.adp_ranks
            hold = n >= ranks and count < ranks and self.adp_count + 1 < self.adp_iters
            self.adp_count = self.adp_count + 1 if hold else 0
            return hold
        hold = n > 0 and self.wait_count < self.wait_iters and tokens + n < self.wait_ratio * self.max_batched_tokens
        if hold:
            self.wait_count += 1
        elif n:
            self.wait_count = 0
        return hold

    def _prefill_done(self, r: Request, t: float) -> None:
        if r.hashes is not None:
            moved, r.pinned = self.kv.publish(r.hashes, r.pinned, r.target)
            r.private -= moved
            r.shared += moved
        self.prefilling.remove(r.id)
        if r.generated == 0:
            r.first_token = t + self.stream_delay
        else:
            self.gaps.append(t - r.last_token)
        r.generated += 1
        r.last_token = t
        if r.generated >= r.output:
            self._free(r)
            r.finish = t + self.stream_delay
            if self.on_finish:
                self.on_finish([r.id], t + self.stream_delay)
        elif self.hand_off is not None:
            self._free(r)
            self.hand_off(r.id, t)
        else:
            r.context = r.target + 1
            self.running.append(r.id)

    def _swap_in(self) -> bool:
        r = self.requests[self.waiting[0]]
        need = self._blocks(r.computed - 1)
        room = need + self.token_room + self.state_blocks  # its blocks, its next token's and its state's
        if self.num_seqs >= self.max_seqs or room > self.kv.free + self.kv.evictable:
            return False
        self._hold(r, r.computed)
        self.waiting.popleft()
        r.swapped, r.context = False, r.computed
        self.swap_cost += need * self.block_bytes / self.host_bw
        self.running.append(r.id)
        return True

    def receive(self, i: int) -> None:
        self.inbox.append(i)
        self._take_inbox()

    def _take_inbox(self) -> None:
        while self.inbox:
            r = self.requests[self.inbox[0]]
            context = r.prompt + r.generated
            if self.num_seqs >= self.max_seqs or not self._hold(r, context):
                return
            self.inbox.popleft()
            r.context = context
            self.running.append(r.id)


class _Hashes:
    """What the router reads of the request table."""

    def __init__(self, requests: list[Request]):
        self.requests = requests

    def hashes_of(self, i: int) -> np.ndarray | None:
        return self.requests[i].hashes


def _refuse_unservable(requests: list[Request], pool: list[ReferenceReplica], decode: bool = True) -> None:
    """A request whose whole context (``decode``; else its prompt) needs more blocks than a replica of ``pool``
    holds can never be served, whatever the scheduler: refused before the run."""
    if not pool:
        return
    rep = min(pool, key=lambda r: r.kv.num_blocks)
    for r in requests:
        if rep._blocks(r.prompt + (r.output if decode else 0)) + rep.state_blocks > rep.kv.num_blocks:
            raise DoesNotFitError(f"request {r.id} can never fit a replica's KV cache", field="workload")


def reference_simulate(config: SimulationConfig) -> SimulationResult:
    """Simulate ``config`` one step at a time; the result's summary and table are the fast simulator's."""
    work = config.workload.build()
    hashes = work.block_hashes
    draws = intake_draws(len(work), config.workload.seed).tolist()
    lengths = zip(work.prompt_len.tolist(), work.output_len.tolist(), work.arrival.tolist(), draws, strict=True)
    requests = [
        Request(i, p, o, a, None if hashes is None else hashes[i], target=p, intake=d)
        for i, (p, o, a, d) in enumerate(lengths)
    ]
    gaps: list[float] = []
    events: list[tuple[float, int, int]] = []  # (time, order, request): KV transfers and client sends
    order = iter(range(1 << 62))
    hash_bs = work.hash_block_size if hashes is not None else None

    def send(t: float, i: int) -> None:  # request i reaches the router at t (a KV transfer, a client's send)
        heapq.heappush(events, (t, next(order), i))

    front, back = _pools(config, requests, hash_bs, gaps, send)
    _refuse_unservable(requests, front, decode=not back)
    _refuse_unservable(requests, back)
    if work.closed_loop:
        _closed_loop(work.closed_loop, requests, front + back, send)
        arrivals: list[int] = []
    else:
        arrivals = sorted(range(len(requests)), key=lambda i: (requests[i].arrival, i))
    _replay(config.cluster.router, requests, arrivals, events, front, back)
    return _result(config, work, requests, gaps, front + back)


def _pools(
    config: SimulationConfig,
    requests: list[Request],
    hash_bs: int | None,
    gaps: list[float],
    send: Callable[[float, int], None],
) -> tuple[list[ReferenceReplica], list[ReferenceReplica]]:
    """The replicas: ``config.cluster.replicas`` of them, or a disaggregated prefill pool whose finished prompts
    ``send`` their KV (at the time it arrives) to the decode pool."""
    dep, cluster = config.deployment, config.cluster

    def replica(rid: int, tp: int | None) -> ReferenceReplica:
        return ReferenceReplica(rid, with_tp(dep, tp), config, requests, hash_bs, gaps)

    disagg = cluster.disagg
    if disagg is None:
        return [replica(r, None) for r in range(cluster.replicas)], []
    front = [replica(r, disagg.prefill_tp) for r in range(disagg.prefill_instances)]
    back = [replica(disagg.prefill_instances + r, disagg.decode_tp) for r in range(disagg.decode_instances)]
    link = disagg.link

    def hand_off(i: int, t: float) -> None:
        r = requests[i]
        rep = front[r.replica]
        if rep.windowed:  # windowed layer groups hand over only the window, as their blocks hold it
            full, sliding = rep.groups
            units = full * r.target + sliding * min(r.target, rep.window_tokens)
            kv_bytes = rep.block_bytes / rep.bs * units + rep.state_bytes
        else:
            kv_bytes = rep.token_bytes * r.target + rep.state_bytes
        r.prefill_replica = r.replica
        send(t + link.latency_s + kv_bytes / link.bandwidth_bytes_s, i)

    for rep in front:
        rep.hand_off = hand_off
    return front, back


def _closed_loop(
    clients: int, requests: list[Request], replicas: list[ReferenceReplica], send: Callable[[float, int], None]
) -> None:
    """A closed loop: the first ``clients`` requests are sent at t=0, and every completion sends the next one."""
    sent = min(clients, len(requests))
    for i in range(sent):
        requests[i].arrival = 0.0
        send(0.0, i)

    def client_done(ids: list[int], t: float) -> None:
        nonlocal sent
        for _ in ids:
            if sent < len(requests):
                requests[sent].arrival = t
                send(t, sent)
                sent += 1

    for rep in replicas:
        rep.on_finish = client_done


def _replay(
    router_name: str,
    requests: list[Request],
    arrivals: list[int],
    events: list[tuple[float, int, int]],
    front: list[ReferenceReplica],
    back: list[ReferenceReplica],
) -> None:
    """Until nothing is left: the earliest of the next step, the next event (a KV transfer or a client's send:
    a transfer to the decode pool, a send to the front) and the next arrival, steps first (see module
    docstring)."""
    routes = _Hashes(requests)
    router, back_router = Router(router_name, routes), Router("least_outstanding", routes)
    everyone = front + back
    position = 0
    while True:
        t_arrival = requests[arrivals[position]].arrival if position < len(arrivals) else math.inf
        t_event = events[0][0] if events else math.inf
        first = min(everyone, key=lambda rep: (rep.next_start(), rep.rid))
        if first.next_start() < min(t_arrival, t_event):
            first.step()
        elif t_event <= t_arrival and events:
            t, _, i = heapq.heappop(events)
            r = requests[i]
            if back and not math.isnan(r.first_token) and r.generated < r.output:
                rep = back_router.pick(i, back)
                r.replica = rep.rid
                rep.t = max(rep.t, t)
                rep.receive(i)
            else:
                router.pick(i, front).enqueue(i, t)
        elif position < len(arrivals):
            router.pick(arrivals[position], front).enqueue(arrivals[position])
            position += 1
        else:
            if any(rep.inbox for rep in back):
                raise InfercastError("a prefilled request cannot fit in any decode replica", field="workload")
            return


def _result(
    config: SimulationConfig, work, requests: list[Request], gaps: list[float], replicas: list[ReferenceReplica]
) -> SimulationResult:
    """The fast simulator's result types, filled from the reference's records."""
    table = RequestTable(work, config.workload.seed)
    table.freeze()
    for name in (
        "arrival",
        "visible",
        "first_token",
        "last_token",
        "finish",
        "scheduled",
        "target",
        "computed",
        "generated",
        "cached_tokens",
        "preemptions",
        "swapped",
        "replica",
        "prefill_replica",
    ):
        column = getattr(table, name)
        column[:] = [getattr(r, name) for r in requests]
    recorder = Recorder()
    recorder.gaps.add_many(np.array(gaps))
    recorder.step_count = sum(rep.steps for rep in replicas)
    recorder.busy_time = sum(rep.busy for rep in replicas)
    recorder.decode_seqs = sum(rep.decode_seqs for rep in replicas)
    recorder.prefill_only_steps = sum(rep.prefill_only_steps for rep in replicas)
    disagg = config.cluster.disagg
    pre = disagg.prefill_instances if disagg is not None else 0
    summary = summarize(table, recorder, replicas, config.observe.goodput, work, pre)  # type: ignore[arg-type]
    return SimulationResult(summary, table, recorder, {"reference": True}, [], config)
