"""Several replicas behind a router, and disaggregated prefill/decode pools, driven in time order.

Replicas advance lazily: before anything is routed at time t, the replicas it could depend on are run up
to t, so routing sees their state at that moment. Prefill completions in a disaggregated deployment become
KV-transfer events that reach the decode pool after the transfer time; closed-loop clients send their next
request when the previous one finishes.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from infercast.errors import InfercastError, unknown_choice
from infercast.sim.replica import Replica
from infercast.sim.state import RequestTable

ROUTERS = ("round_robin", "least_outstanding", "prefix_affinity")


@dataclass(frozen=True)
class KVLink:
    """The link KV caches cross from the prefill to the decode pool (per GPU)."""

    bandwidth_bytes_s: float = 50e9
    """Default: one 400 Gb/s InfiniBand NDR port per GPU (50 GB/s), the common disaggregation fabric."""
    latency_s: float = 20e-6
    """Per transfer: RDMA setup and completion notification (tens of microseconds)."""


class Router:
    """Picks a replica for each request."""

    def __init__(self, name: str, table: RequestTable):
        if name not in ROUTERS:
            raise unknown_choice("router", name, ROUTERS)
        self.name = name
        self.table = table
        self._rr = itertools.count()

    @property
    def needs_state(self) -> bool:
        return self.name != "round_robin"

    def pick(self, i: int, replicas: Sequence[Replica]) -> Replica:
        if self.name == "round_robin":
            return replicas[next(self._rr) % len(replicas)]
        if self.name == "prefix_affinity":
            hashes = self.table.hashes_of(i)
            if hashes is not None and len(hashes):
                return replicas[int(hashes[0]) % len(replicas)]
        return min(replicas, key=lambda r: (r.outstanding, r.rid))


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
        self.kv_queue: dict[int, deque[int]] = {r.rid: deque() for r in self.decode}
        for rep in self.replicas:
            if self.decode:
                rep.on_prefilled = self._prefilled
            if closed_loop:
                rep.stop_on_completion = True
                rep.on_finish = self._client_done
        for rep in self.decode:
            if closed_loop:
                rep.stop_on_completion = True
                rep.on_finish = self._client_done

    # ----- callbacks -------------------------------------------------------------------------------------
    def _prefilled(self, i: int, t: float) -> None:
        tb = self.table
        rep = self.replicas[int(tb.replica[i])]
        kv_bytes = rep.block_bytes / rep.bs * float(tb.target[i])  # per GPU: every rank sends its shard at once
        arrive = t + self.kv_link.latency_s + kv_bytes / self.kv_link.bandwidth_bytes_s
        tb.prefill_replica[i] = tb.replica[i]
        heapq.heappush(self.events, (arrive, next(self._order), i))

    def _client_done(self, ids: np.ndarray, times: np.ndarray) -> None:
        for t in times.tolist():
            if self._next_request < self.table.n:
                j = self._next_request
                self._next_request += 1
                self.table.arrival[j] = self.table.visible[j] = t
                heapq.heappush(self.events, (t, next(self._order), j))

    # ----- driving -----------------------------------------------------------------------------------------
    def run(self) -> None:
        tb = self.table
        if self.closed_loop:
            first = min(self.closed_loop, tb.n)
            tb.arrival[:first] = tb.visible[:first] = 0.0
            for j in range(first):
                heapq.heappush(self.events, (0.0, next(self._order), j))
            self._next_request = first
            arrivals: Callable[[], tuple[float, int] | None] = lambda: None  # noqa: E731
        else:
            order = np.argsort(tb.arrival, kind="stable")
            it = iter(order.tolist())
            nxt = [next(it, None)]

            def arrivals() -> tuple[float, int] | None:
                i = nxt[0]
                return None if i is None else (float(tb.arrival[i]), i)

        simple = not self.router.needs_state and not self.decode and not self.closed_loop
        if simple:  # independent replicas: give each its share up front and run them to the end
            while (a := arrivals()) is not None:
                self.router.pick(a[1], self.replicas).enqueue(a[1])
                nxt[0] = next(it, None)
            for rep in self.replicas:
                rep.run_until(np.inf)
            return
        while True:
            a = arrivals()
            e = self.events[0] if self.events else None
            if a is None and e is None:
                if self._drain():
                    continue
                return
            if e is not None and (a is None or e[0] <= a[0]):
                heapq.heappop(self.events)
                t, i = e[0], e[2]
                if self.decode and not np.isnan(tb.first_token[i]) and tb.generated[i] < tb.output[i]:
                    self._to_decode(t, i)
                else:
                    self._route(t, i)
            else:
                t, i = a
                nxt[0] = next(it, None)
                self._route(t, i)

    def _advance_all(self, t: float) -> None:
        for rep in self.replicas:
            rep.run_until(t)
        for rep in self.decode:
            self._feed_decode(rep)
            rep.run_until(t)
            self._feed_decode(rep)

    def _route(self, t: float, i: int) -> None:
        self._advance_all(t)
        self.table.visible[i] = t
        self.router.pick(i, self.replicas).enqueue(i)

    def _to_decode(self, t: float, i: int) -> None:
        self._advance_all(t)
        rep = (self.decode_router or self.router).pick(i, self.decode)
        self.table.replica[i] = rep.rid
        self.kv_queue[rep.rid].append(i)
        rep.t = max(rep.t, t)
        self._feed_decode(rep)

    def _feed_decode(self, rep: Replica) -> None:
        queue = self.kv_queue[rep.rid]
        while queue and rep.join_decoding(queue[0]):
            queue.popleft()

    def _drain(self) -> bool:
        """Run everything to the end; True if that produced new events."""
        for rep in self.replicas:
            rep.run_until(np.inf)
        progress = True
        while progress and not self.events:
            progress = False
            for rep in self.decode:
                before = len(self.kv_queue[rep.rid])
                self._feed_decode(rep)
                rep.run_until(np.inf)
                self._feed_decode(rep)
                progress |= len(self.kv_queue[rep.rid]) != before or bool(rep.r_ids.size)
            if any(self.kv_queue[r.rid] for r in self.decode) and not progress:
                stuck = next(q[0] for q in self.kv_queue.values() if q)
                raise InfercastError(f"request {stuck} cannot fit in any decode replica's KV cache", field="workload")
        return bool(self.events)
