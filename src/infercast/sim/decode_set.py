"""The running decode batch of a replica, advanced in O(1) per event.

Every running sequence gains one token per decode step, so the batch is described by a step counter ``D``
and, per sequence, its context offset ``base`` (context of the next step = base + D) and the value of D at
which it finishes. Sums the cost model needs (Σ context, Σ min(context, window)), KV blocks held and the
blocks the next steps must allocate (a sequence needs a new block when its context crosses a multiple of
the block size: counted per residue class) are all kept incrementally; completions come off a heap.

The blocks the next decode step allocates are ``residue[(-D) % bs]`` (the sequences whose context crosses a
block boundary at that step); the replica's hot loop reads that expression inline rather than through a
method call, and :meth:`growth_over` generalises it to k steps. On models with sliding-window layers
:class:`WindowDecodeSet` keeps the same expression true in layer-group blocks whose windowed part stops
growing at the window.
"""

from __future__ import annotations

import heapq

from infercast.sim.blocks import BlockRule, blocks_for


class DecodeSet:
    """Running sequences of one replica (see module docstring)."""

    def __init__(self, block_size: int, window: int | None):
        self.bs = block_size
        self.window = window
        """Tokens a windowed attention read stops at (the cost model's Σ min(context, window))."""
        self.rule = BlockRule(block_size)
        """The block count this set keeps (one block per ``bs`` tokens here)."""
        self.D = 0
        self.n = 0
        self.sum_base = 0
        self.base: dict[int, int] = {}
        self.finish_at: dict[int, int] = {}
        self.reserved: dict[int, int] = {}  # reserving schedulers (static, inflight): whole-request blocks, no growth
        self.order: list[int] = []  # join order; the last live one is preempted first
        self.heap: list[tuple[int, int]] = []  # (finish D, id), stale entries skipped
        self.residue = [0] * block_size  # growing sequences by (base - 1) mod block size
        self.n_grow = 0  # sequences whose blocks grow (all but the reserved ones)
        self.held = 0  # blocks held by all running sequences
        # sliding window: sequences whose context is still below the window
        self.n_below = 0
        self.sum_base_below = 0
        self.below: set[int] = set()
        self.cross_heap: list[tuple[int, int]] = []  # (D at which it reaches the window, id)
        self.joined: list[tuple[int, float]] = []  # (id, last token time) since the last decode step
        self.last_decode = 0.0  # end of the last decode step

    # ----- sums the cost model reads ------------------------------------------------------------------------
    def context_sum(self) -> int:
        """Σ context of the next decode step."""
        return self.sum_base + self.n * self.D

    def window_sum(self) -> int:
        """Σ min(context, window) of the next decode step."""
        if not self.window:
            return self.context_sum()
        return self.sum_base_below + self.n_below * self.D + self.window * (self.n - self.n_below)

    def growth_over(self, k: int) -> int:
        """Blocks decode steps D .. D+k-1 allocate (sequences finishing inside are not subtracted).

        A sequence of residue r crosses q = k // bs block boundaries, plus one more when
        ((D - 1 + r) mod bs) + (k mod bs) >= bs: a cyclic range of m = k mod bs residues.
        """
        bs = self.bs
        if k <= 1:
            return self.residue[(-self.D) % bs] if k == 1 else 0
        q, m = divmod(k, bs)
        total = q * self.n_grow
        if m:
            res = self.residue
            start = (bs - m - self.D + 1) % bs  # residues whose rotated position lies in [bs - m, bs)
            end = start + m
            total += sum(res[start:end]) if end <= bs else sum(res[start:]) + sum(res[: end - bs])
        return total

    # ----- membership -------------------------------------------------------------------------------------
    def join(self, i: int, ctx: int, remaining: int, t_last: float, reserved: int = 0) -> None:
        """Sequence ``i`` decodes from the next step at context ``ctx`` for ``remaining`` more tokens."""
        D = self.D
        base = ctx - D
        self.base[i] = base
        self.finish_at[i] = D + remaining
        n = self.n = self.n + 1
        self.sum_base += base
        order = self.order
        order.append(i)
        if len(order) > 4 * n + 1024:  # drop finished ones now and then: memory stays O(running)
            self.order = [j for j in order if j in self.base]
        heapq.heappush(self.heap, (D + remaining, i))
        if reserved:
            self.reserved[i] = reserved
            self.held += reserved
        else:
            bs = self.bs
            self.residue[(base - 1) % bs] += 1
            self.n_grow += 1
            self.held += blocks_for(ctx - 1, bs)
        if self.window and ctx < self.window:
            self.below.add(i)
            self.n_below += 1
            self.sum_base_below += base
            heapq.heappush(self.cross_heap, (self.window - base, i))
        self.joined.append((i, t_last))

    def remove(self, i: int) -> tuple[int, int, int, float]:
        """Take ``i`` out; returns (context of its next step, tokens still to generate, blocks it held,
        time of its last token)."""
        base = self.base.pop(i)
        held = self.held_by_base(i, base)
        finish = self.finish_at.pop(i)
        self.n -= 1
        self.sum_base -= base
        self.held -= held
        if i in self.reserved:
            del self.reserved[i]
        else:
            self.residue[(base - 1) % self.bs] -= 1
            self.n_grow -= 1
        if i in self.below:
            self.below.discard(i)
            self.n_below -= 1
            self.sum_base_below -= base
        last = self.last_decode
        if self.joined:
            for j, t in self.joined:
                if j == i:
                    last = t
            self.joined = [(j, t) for j, t in self.joined if j != i]
        return base + self.D, finish - self.D, held, last

    def held_by_base(self, i: int, base: int) -> int:
        """Blocks sequence ``i`` (context offset ``base``) holds now: its KV covers context - 1 tokens."""
        if i in self.reserved:
            return self.reserved[i]
        return blocks_for(base + self.D - 1, self.bs)

    # ----- events ---------------------------------------------------------------------------------------------
    def steps_to_completion(self) -> int:
        """Decode steps until the next sequence finishes (it finishes at the end of the last of them)."""
        heap = self.heap
        while heap and self.finish_at.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] - self.D if heap else 1 << 60

    def steps_to_window(self) -> int:
        """Decode steps before the next sequence's context reaches the window (changes Σ min slope)."""
        heap = self.cross_heap
        while heap and not self._below_entry(*heap[0]):
            heapq.heappop(heap)
        return heap[0][0] - self.D if heap else 1 << 60

    def _below_entry(self, d: int, i: int) -> bool:
        """Whether the cross_heap entry (d, i) is i's present one: a sequence preempted below the window and
        re-joined later left an earlier entry behind."""
        return self.window is not None and i in self.below and self.window - self.base[i] == d

    def advance(self, k: int, grown: int | None = None) -> None:
        """Account ``k`` decode steps (the caller has allocated their ``grown`` blocks)."""
        self.held += self.growth_over(k) if grown is None else grown
        self.D += k
        while self.cross_heap and self.cross_heap[0][0] <= self.D:
            d, i = heapq.heappop(self.cross_heap)
            if self._below_entry(d, i):
                self.below.discard(i)
                self.n_below -= 1
                self.sum_base_below -= self.base[i]

    def remove_finished(self) -> list[tuple[int, int]]:
        """Take out the sequences whose last token came out in the steps just accounted; returns
        (id, blocks it held) for each. The completion path of :meth:`remove`, kept lean: it runs once per
        request."""
        out: list[tuple[int, int]] = []
        heap, D, bs = self.heap, self.D, self.bs
        finish_at, base_of, reserved, residue = self.finish_at, self.base, self.reserved, self.residue
        while heap and heap[0][0] <= D:
            d, i = heapq.heappop(heap)
            if finish_at.get(i) != d:
                continue  # stale entry (preempted, or a re-joined sequence's earlier entry)
            del finish_at[i]
            base = base_of.pop(i)
            if reserved and i in reserved:
                held = reserved.pop(i)
            else:
                held = blocks_for(base + D - 1, bs)
                residue[(base - 1) % bs] -= 1
                self.n_grow -= 1
            self.n -= 1
            self.sum_base -= base
            self.held -= held
            if i in self.below:
                self.below.discard(i)
                self.n_below -= 1
                self.sum_base_below -= base
            if self.joined:
                self.joined = [(j, t) for j, t in self.joined if j != i]
            out.append((i, held))
        return out

    def victim(self) -> int:
        """The most recently joined running sequence (vLLM preempts it first); callers check that one runs."""
        while self.order and self.order[-1] not in self.base:
            self.order.pop()
        if not self.order:
            raise RuntimeError("no running sequence to preempt")
        return self.order[-1]

    def __len__(self) -> int:
        return self.n


class WindowDecodeSet(DecodeSet):
    """A running batch counted in layer-group blocks whose windowed groups stop growing at the window
    (:class:`~infercast.sim.blocks.BlockRule`; models with sliding-window or chunked local layers).

    ``residue[r]`` counts block units, not sequences: a growing sequence weighs ``full_units``, plus
    ``window_units`` while its context is below ``rule.growth_end`` (``kv_growing``; it leaves at the D in
    ``kv_heap``). So ``residue[(-D) % bs]`` stays the next step's growth for the hot loops, and ``units`` (Σ
    residue) is a full block cycle's. Decode spans end where a weight drops (:meth:`steps_to_window`), so
    :meth:`growth_over`'s closed form holds inside them; longer requests (speculative steps) are summed exactly.
    """

    def __init__(self, rule: BlockRule, window: int | None):
        super().__init__(rule.block_size, window)
        self.rule = rule
        self.count = rule.count
        self.growth_end = rule.growth_end
        self.units = 0
        self.kv_growing: set[int] = set()
        self.kv_heap: list[tuple[int, int]] = []  # (D at which its context reaches growth_end, id)

    def _weight(self, i: int) -> int:
        return self.rule.full_units + (self.rule.window_units if i in self.kv_growing else 0)

    def growth_over(self, k: int) -> int:
        """Blocks decode steps D .. D+k-1 allocate (sequences finishing inside are not subtracted)."""
        bs = self.bs
        if k <= 1:
            return self.residue[(-self.D) % bs] if k == 1 else 0
        if k > self.steps_to_kv_window():
            return self._growth_summed(k)
        q, m = divmod(k, bs)
        total = q * self.units
        if m:
            res = self.residue
            start = (bs - m - self.D + 1) % bs
            end = start + m
            total += sum(res[start:end]) if end <= bs else sum(res[start:]) + sum(res[: end - bs])
        return total

    def _growth_summed(self, k: int) -> int:
        """:meth:`growth_over` sequence by sequence (O(n)): for spans in which some windowed groups stop growing."""
        count, D, reserved = self.count, self.D, self.reserved
        return sum(count(b + D - 1 + k) - count(b + D - 1) for i, b in self.base.items() if i not in reserved)

    def held_by_base(self, i: int, base: int) -> int:
        if i in self.reserved:
            return self.reserved[i]
        return self.count(base + self.D - 1)

    def join(self, i: int, ctx: int, remaining: int, t_last: float, reserved: int = 0) -> None:
        super().join(i, ctx, remaining, t_last, reserved)
        if reserved:
            return
        # the base counted one unit per block boundary and blocks_for(ctx - 1) held: the rule's counts instead
        base = self.base[i]
        if ctx < self.growth_end:
            self.kv_growing.add(i)
            heapq.heappush(self.kv_heap, (self.growth_end - base, i))
        weight = self._weight(i)
        self.residue[(base - 1) % self.bs] += weight - 1
        self.units += weight
        self.held += self.count(ctx - 1) - blocks_for(ctx - 1, self.bs)

    def remove(self, i: int) -> tuple[int, int, int, float]:
        grows = i not in self.reserved
        weight, base = self._weight(i), self.base[i]
        out = super().remove(i)  # held by the rule (held_by_base); one unit off the residue
        if grows:
            self.residue[(base - 1) % self.bs] -= weight - 1
            self.units -= weight
            self.kv_growing.discard(i)
        return out

    def steps_to_kv_window(self) -> int:
        """Decode steps before the next sequence's windowed groups stop growing."""
        heap = self.kv_heap
        while heap and not self._current(*heap[0]):
            heapq.heappop(heap)
        return heap[0][0] - self.D if heap else 1 << 60

    def _current(self, d: int, i: int) -> bool:
        """Whether the kv_heap entry (d, i) is i's present one (not left by a finished or re-joined sequence)."""
        return i in self.kv_growing and self.growth_end - self.base[i] == d

    def steps_to_window(self) -> int:
        """Decode steps before the next window event: a context reaching the cost's window, or a sequence's
        windowed blocks stopping growing (both end decode spans)."""
        return min(super().steps_to_window(), self.steps_to_kv_window())

    def advance(self, k: int, grown: int | None = None) -> None:
        super().advance(k, grown)
        heap, D, residue, bs = self.kv_heap, self.D, self.residue, self.bs
        drop = self.rule.window_units
        while heap and heap[0][0] <= D:
            d, i = heapq.heappop(heap)
            if self._current(d, i):
                self.kv_growing.discard(i)
                residue[(self.base[i] - 1) % bs] -= drop
                self.units -= drop

    def remove_finished(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        heap, D, bs, count = self.heap, self.D, self.bs, self.count
        finish_at, base_of, reserved, residue = self.finish_at, self.base, self.reserved, self.residue
        full, window_units, growing = self.rule.full_units, self.rule.window_units, self.kv_growing
        while heap and heap[0][0] <= D:
            d, i = heapq.heappop(heap)
            if finish_at.get(i) != d:
                continue  # stale entry (preempted, or a re-joined sequence's earlier entry)
            del finish_at[i]
            base = base_of.pop(i)
            if reserved and i in reserved:
                held = reserved.pop(i)
            else:
                held = count(base + D - 1)
                weight = full
                if i in growing:
                    growing.discard(i)
                    weight += window_units
                residue[(base - 1) % bs] -= weight
                self.units -= weight
                self.n_grow -= 1
            self.n -= 1
            self.sum_base -= base
            self.held -= held
            if i in self.below:
                self.below.discard(i)
                self.n_below -= 1
                self.sum_base_below -= base
            if self.joined:
                self.joined = [(j, t) for j, t in self.joined if j != i]
            out.append((i, held))
        return out
