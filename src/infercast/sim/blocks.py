"""KV-block ownership on one replica, behind one object (:class:`BlockLedger`), and the block-count rule
(:class:`BlockRule`).

A request owns *private* blocks (KV it computed itself), shares *shared* blocks served by the prefix cache
and pins that many cache units; the running decode batch additionally holds a *reservation*: the blocks its
next step will fill (sequences whose context crosses a block boundary). The pool's counts (free, private,
cached, evictable) are the :class:`~infercast.sim.kv_cache.KVCache`; the per-request counts live in the
:class:`~infercast.sim.state.RequestTable`. Every change to either goes through the ledger.

On models with sliding-window (or chunked local) layers a block holds one *layer group*'s tokens and the
windowed groups stop growing at the window (:func:`infercast.memory.kv_blocks_per_sequence`, the memory
budget's count), as vLLM's hybrid allocator frees blocks that fall out of the window. The prefix cache keeps
whole-context blocks, so a replica whose prefix cache is in use counts such models full-context
(:func:`replica_pool`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from infercast.sim.kv_cache import KVCache
from infercast.sim.state import RequestTable

if TYPE_CHECKING:
    from infercast.memory import MemoryBudget


def blocks_for(tokens: int, block_size: int) -> int:
    """KV blocks holding ``tokens`` tokens. A sequence about to run a step at context c holds c - 1 tokens of
    KV (the new token's KV is written by that step)."""
    return -(-tokens // block_size)


@dataclass(frozen=True)
class BlockRule:
    """Blocks a sequence of t tokens holds: full_units x ceil(t / bs) + window_units x ceil(min(t, window) / bs).

    Without windowed layers (window_units 0, full_units 1) that is :func:`blocks_for`; with them the units are
    :func:`~infercast.memory.kv_layer_groups` and the count equals the memory budget's."""

    block_size: int
    full_units: int = 1
    window_units: int = 0
    window: int = 0
    """Tokens the windowed layers keep (0: no windowed layers)."""

    @property
    def windowed(self) -> bool:
        return self.window_units > 0

    @property
    def step_units(self) -> int:
        """Most blocks one more token can take (one per layer group at a block boundary)."""
        return self.full_units + self.window_units

    @property
    def growth_end(self) -> int:
        """First context at whose decode step the windowed groups no longer grow: a step at context c writes
        token c, taking a windowed block when (c - 1) % bs == 0 and c <= window."""
        w = self.window
        return w + 1 if (w - 1) % self.block_size == 0 else w

    def count(self, tokens: int) -> int:
        """Blocks ``tokens`` tokens of one sequence hold."""
        bs = self.block_size
        if not self.window_units:
            return -(-tokens // bs)
        return self.full_units * -(-tokens // bs) + self.window_units * -(-min(tokens, self.window) // bs)

    def count_array(self, tokens: np.ndarray) -> np.ndarray:
        """:meth:`count` of each element of an integer array."""
        bs = self.block_size
        full = -(-tokens // bs)
        if not self.window_units:
            return full
        return self.full_units * full + self.window_units * -(-np.minimum(tokens, self.window) // bs)


def replica_pool(mem: MemoryBudget, prefix_cache: bool) -> tuple[BlockRule, int, float, int]:
    """(rule, pool blocks, bytes per block, state blocks per sequence) of a replica with budget ``mem``.

    With the prefix cache in use (prompt hashes and caching on) a model with sliding layers is counted
    full-context in whole-layer blocks, as before windowed accounting: the cache's units hold every layer of
    their tokens, and sharing them with window-capped sequences is not modelled."""
    bs, window = mem.block_size, mem.kv_window
    if window is None:
        return BlockRule(bs), mem.num_blocks, mem.block_bytes, mem.state_blocks_per_sequence
    if not prefix_cache:
        rule = BlockRule(bs, *mem.layer_groups, window)
        return rule, mem.num_blocks, mem.block_bytes, mem.state_blocks_per_sequence
    block_bytes = mem.kv_bytes_per_token * bs  # every layer's tokens, as memory.py sizes blocks without groups
    pool, state = mem.unreserved_bytes, mem.state_bytes_per_sequence
    return (
        BlockRule(bs),
        int(pool // block_bytes) if pool > 0 else 0,
        block_bytes,
        int(-(-state // block_bytes)) if state else 0,
    )


class BlockLedger:
    """Allocates, hands over and frees one replica's KV blocks (see module docstring)."""

    def __init__(self, kv: KVCache, table: RequestTable, state_blocks: int = 0, rule: BlockRule | None = None):
        self.kv = kv
        self.table = table
        self.block_size = kv.block_size
        self.rule = BlockRule(kv.block_size) if rule is None else rule
        """How many blocks a sequence's tokens take (window-capped on models with sliding layers)."""
        self.count = self.rule.count
        self.reserved = 0
        """Blocks allocated for the growth of the next decode step (see :meth:`reserve`)."""
        self.state_blocks = state_blocks
        """Blocks of one sequence's fixed linear-attention state (hybrid models; 0 otherwise): taken from the same
        pool when the sequence first gets KV blocks and freed with them, as vLLM's hybrid allocator does."""
        self.state_holders: set[int] = set()

    def state_need(self, i: int) -> int:
        """State blocks sequence ``i`` still needs to run (hybrid linear-attention models; 0 once it holds them)."""
        return self.state_blocks if self.state_blocks and i not in self.state_holders else 0

    def _free_state(self, i: int) -> int:
        if i in self.state_holders:
            self.state_holders.discard(i)
            return self.state_blocks
        return 0

    # ----- admission and prefill -----------------------------------------------------------------------------
    def lookup_prefix(self, i: int) -> tuple[int, int]:
        """Request ``i``'s cached prompt prefix: (units, blocks of them evictable now); changes nothing."""
        return self.kv.lookup(self.table.hashes_of(i), self.table.target[i])

    def claim(self, i: int, tokens: int, hits: int = 0, idle: int = 0) -> bool:
        """Admit request ``i`` with the blocks that hold its first ``tokens`` tokens, the first ``hits`` cache
        units (:meth:`lookup_prefix`, ``idle`` of whose blocks are evictable) served by the prefix cache.
        False, changing nothing, when they do not fit (a refused admission leaves the cache's LRU order
        alone, as vLLM's allocator does)."""
        tb, kv = self.table, self.kv
        shared = hits * kv.blocks_per_unit
        need = max(self.count(tokens) - shared, 0)
        state = self.state_blocks if self.state_blocks and i not in self.state_holders else 0
        if need + state > kv.free + kv.evictable - idle:
            return False
        if tb.hashes is not None:
            kv.pin(tb.hashes[i], hits, tb.target[i])
        kv.allocate(need + state)
        if state:
            self.state_holders.add(i)
        tb.shared[i], tb.pinned[i], tb.private[i] = shared, hits, need
        return True

    def extend(self, i: int, tokens: int) -> bool:
        """Grow request ``i``'s blocks to hold ``tokens`` tokens; False, changing nothing, if they run short."""
        tb = self.table
        need = self.count(tokens) - tb.shared[i] - tb.private[i]
        if need > 0:
            if not self.kv.allocate(need):
                return False
            tb.private[i] += need
        return True

    def publish(self, i: int) -> None:
        """Prefill of ``i`` done: its newly computed full prompt units join the prefix cache (pinned by it)."""
        tb = self.table
        if tb.hashes is None:
            return
        moved, tb.pinned[i] = self.kv.publish(tb.hashes[i], tb.pinned[i], tb.target[i])
        if moved:
            tb.private[i] -= moved
            tb.shared[i] += moved

    # ----- sequences that enter decoding with their KV -----------------------------------------------------------
    def fits(self, blocks: int) -> bool:
        """Whether ``blocks`` blocks could be allocated now (evicting unreferenced cache blocks)."""
        return blocks <= self.kv.free + self.kv.evictable

    def hold(self, i: int, context: int) -> bool:
        """Allocate the KV of a sequence that decodes next at ``context`` (arriving from a prefill pool, or
        swapped back in); False if blocks run short."""
        need = self.count(context - 1)
        state = self.state_need(i)
        if not self.kv.allocate(need + state):
            return False
        if state:
            self.state_holders.add(i)
        tb = self.table
        tb.private[i], tb.shared[i], tb.pinned[i] = need, 0, 0
        return True

    # ----- freeing -----------------------------------------------------------------------------------------------
    def release(self, i: int) -> None:
        """Free everything request ``i`` holds (finished, preempted or handed to another pool)."""
        tb = self.table
        self.kv.release(int(tb.private[i]) + self._free_state(i))
        if tb.pinned[i]:
            self.kv.unpin(tb.hashes_of(i), int(tb.pinned[i]))
        tb.private[i] = tb.shared[i] = tb.pinned[i] = 0

    def release_held(self, i: int, held: int) -> None:
        """Free a decoding sequence that held ``held`` blocks (its prompt's shared ones included)."""
        self.table.private[i] = held - int(self.table.shared[i])
        self.release(i)

    def release_finished(self, done: list[tuple[int, int]]) -> None:
        """Free the sequences that finished decoding: (id, blocks held) each. The completion path, kept lean."""
        tb, kv = self.table, self.kv
        shared, pinned = tb.shared, tb.pinned
        freed = 0
        for i, held in done:
            freed += held - shared[i] + (self._free_state(i) if self.state_holders else 0)
            if pinned[i]:
                kv.unpin(tb.hashes_of(i), pinned[i])
                pinned[i] = 0
            shared[i] = 0
        kv.release(freed)

    # ----- the running batch's growth ----------------------------------------------------------------------------
    def reserve(self, need: int) -> bool:
        """Make the reservation ``need`` blocks (the next decode step's growth); False if they do not fit."""
        delta = need - self.reserved
        if delta <= 0:
            if delta:
                self.kv.release(-delta)
                self.reserved = need
            return True
        if self.kv.allocate(delta):
            self.reserved = need
            return True
        return False

    def settle(self, grown: int) -> None:
        """Decode steps just ran and grew the batch by ``grown`` blocks: the reservation becomes theirs, with
        any difference allocated or freed."""
        extra = grown - self.reserved
        if extra > 0:
            self.kv.allocate(extra)
        elif extra < 0:
            self.kv.release(-extra)
        self.reserved = 0
