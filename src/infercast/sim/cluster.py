"""Several replicas behind a router, and disaggregated prefill/decode pools, driven in time order.

Replicas advance lazily: before anything is routed at time t, the replicas it could depend on are run up
to t, so routing sees their state at that moment. Prefill completions in a disaggregated deployment become
KV-transfer events that reach the decode pool after the transfer time; closed-loop clients send their next
request when the previous one finishes.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from typing import Protocol, TypeVar

import numpy as np

from infercast.errors import InfercastError, unknown_choice
from infercast.sim.config import ROUTERS, KVLink
from infercast.sim.replica import Replica
from infercast.sim.state import RequestTable
from infercast.sim.watchdog import Watchdog


class Routable(Protocol):
    """What a router reads of a replica (the simulator's and the reference simulator's alike)."""

    @property
    def rid(self) -> int: ...
    @property
    def outstanding(self) -> int: ...


class HashSource(Protocol):
    """What a prefix-affinity router reads of the requests: their prompt's block hashes."""

    def hashes_of(self, i: int) -> np.ndarray | None: ...


R = TypeVar("R", bound=Routable)


class Router:
    """Picks a replica for each request."""

    def __init__(self, name: str, table: HashSource):
        if not isinstance(name, str) or name not in ROUTERS:
            raise unknown_choice("router", str(name), ROUTERS)
        self.name = name
        self.table = table
        self._rr = itertools.count()

    @property
    def needs_state(self) -> bool:
        return self.name != "round_robin"

    def pick(self, i: int, replicas: Sequence[R]) -> R:
        if self.name == "round_robin":
            return replicas[next(self._rr) % len(replicas)]
        if self.name == "prefix_affinity":
            hashes = self.table.hashes_of(i)
            if hashes is not None and len(hashes):
                return replicas[spread_hash(int(hashes[0])) % len(replicas)]
        return min(replicas, key=lambda r: (r.outstanding, r.rid))


_MASK64 = (1 << 64) - 1


def spread_hash(block_id: int) -> int:
    """A well-mixed 64-bit hash of a block id (the splitmix64 finalizer, Steele et al., OOPSLA 2014).

    Block ids are structured (a system prompt's blocks are numbered k*m .. k*m+m-1), so ``id % n`` sends every
    prompt to replica 0 whenever n divides m; mixing the bits first spreads prompts evenly for any n.
    """
    z = (block_id + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


class Coordinator:
    """Feeds requests to replicas in time order (see module docstring)."""

    def __init__(
        self,
        table: RequestTable,
        replicas: Sequence[Replica],
        router: Router,
        *,
        decode_replicas: Sequence[Replica] = (),
        decode_router: Router | None = None,
        kv_link: KVLink | None = None,
        closed_loop: int | None = None,
    ):
        self.table = table
        self.replicas = list(replicas)
        self.router = router
        self.decode = list(decode_replicas)
        self.decode_router = decode_router
        self.kv_link = kv_link or KVLink()
        self.closed_loop = closed_loop
        self.events: list[tuple[float, int, int]] = []  # (time, order, request) KV arrivals / client sends
        self._order = itertools.count()
        self._next_request = 0
        for rep in self.replicas:
            if self.decode:
                rep.on_prefilled = self._prefilled
            if closed_loop:
                rep.on_finish = self._client_done
        for rep in self.decode:
            if closed_loop:
                rep.on_finish = self._client_done

    # ----- callbacks -------------------------------------------------------------------------------------
    def _prefilled(self, i: int, t: float) -> None:
        tb = self.table
        rep = self.replicas[int(tb.replica[i])]
        kv_bytes = rep.handoff_bytes(int(tb.target[i]))  # per GPU: every rank sends its shard at once
        arrive = t + self.kv_link.latency_s + kv_bytes / self.kv_link.bandwidth_bytes_s
        tb.prefill_replica[i] = tb.replica[i]
        heapq.heappush(self.events, (arrive, next(self._order), i))

    def _client_done(self, ids: list[int], t: float) -> None:
        """Requests ``ids`` finished at ``t``: each of their clients sends its next request then."""
        for _ in ids:
            if self._next_request < self.table.n:
                j = self._next_request
                self._next_request += 1
                self.table.arrival[j] = t
                heapq.heappush(self.events, (t, next(self._order), j))

    def _front_ends(self) -> bool:
        return any(rep.front_end is not None for rep in self.replicas)

    # ----- driving -----------------------------------------------------------------------------------------
    def run(self) -> None:
        tb = self.table
        if self.closed_loop:
            first = min(self.closed_loop, tb.n)
            for j in range(first):
                tb.arrival[j] = 0.0
            for j in range(first):
                heapq.heappush(self.events, (0.0, next(self._order), j))
            self._next_request = first
            order: list[int] = []
        else:
            order = np.argsort(tb.arrival, kind="stable").tolist()
        # independent replicas: give each its share up front and run them to the end (not behind an API server's
        # front-end, whose queue when a request is sent depends on the steps before)
        if not (self.router.needs_state or self.decode or self.closed_loop or self._front_ends()):
            for i in order:
                self.router.pick(i, self.replicas).enqueue(i)
            for rep in self.replicas:
                rep.run_until(np.inf)
            return
        if len(self.replicas) == 1 and not self.decode:
            self._run_alone(order)
            return
        self._run_in_time_order(order)

    def _run_alone(self, order: list[int]) -> None:
        """One replica, no decode pool (behind a front-end, or closed loop): the steps of
        :meth:`_run_in_time_order`, in the same order, without its scan over replicas.

        Open loop: the replica runs up to each arrival, which is then handed over. Closed loop: it runs up to the
        next client send, returning early after a completion (whose client may send sooner)."""
        rep, replicas, pick = self.replicas[0], self.replicas, self.router.pick
        if not self.closed_loop:
            arrival = self.table.arrival
            for i in order:
                rep.run_until(arrival[i])
                pick(i, replicas).enqueue(i)
            rep.run_until(np.inf)
            return
        events = self.events
        rep.yield_on_event = True
        watchdog = Watchdog("the single-replica event loop")
        while True:
            watchdog.tick((len(events), rep.t, rep.outstanding))
            t_next = events[0][0] if events else np.inf
            t_low = rep.next_activity()
            if t_low < t_next:
                rep.run_until(max(t_next, np.nextafter(t_low, np.inf)))
            elif t_next == np.inf:
                return
            else:
                t, _, i = heapq.heappop(events)
                pick(i, replicas).enqueue(i, t)

    def _run_in_time_order(self, order: list[int]) -> None:
        """Conservative time-stepping: always advance the replica that is furthest behind, never past the next
        event (arrival, KV transfer, client send) or the next replica's clock, so every event is routed
        before any replica has moved beyond it."""
        tb = self.table
        everyone = self.replicas + self.decode
        for rep in everyone:
            rep.yield_on_event = True
        position = 0
        watchdog = Watchdog("the cluster event loop")
        while True:
            watchdog.tick(
                (
                    position,
                    len(self.events),
                    tuple(rep.t for rep in everyone),
                    tuple(rep.outstanding for rep in everyone),
                )
            )
            t_arrival = float(tb.arrival[order[position]]) if position < len(order) else np.inf
            t_event = self.events[0][0] if self.events else np.inf
            t_next = min(t_arrival, t_event)
            lowest, t_low, t_second = None, np.inf, np.inf
            for rep in everyone:
                tr = rep.next_activity()
                if tr < t_low:
                    lowest, t_low, t_second = rep, tr, t_low
                elif tr < t_second:
                    t_second = tr
            if lowest is not None and t_low < t_next:
                limit = min(t_next, t_second)
                lowest.run_until(max(limit, np.nextafter(t_low, np.inf)))
                continue
            if t_next == np.inf:
                stuck = [rep.inbox[0] for rep in self.decode if rep.inbox]
                if stuck:
                    raise InfercastError(
                        f"request {stuck[0]} cannot fit in any decode replica's KV cache", field="workload"
                    )
                return
            if t_event <= t_arrival:
                t, _, i = heapq.heappop(self.events)
                if self.decode and not np.isnan(tb.first_token[i]) and tb.generated[i] < tb.output[i]:
                    rep = (self.decode_router or self.router).pick(i, self.decode)
                    tb.replica[i] = rep.rid
                    rep.t = max(rep.t, t)
                    rep.receive(i)
                else:
                    self.router.pick(i, self.replicas).enqueue(i, t)
            else:
                i = order[position]
                position += 1
                self.router.pick(i, self.replicas).enqueue(i)
