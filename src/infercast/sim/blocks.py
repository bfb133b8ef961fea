"""KV-block ownership on one replica, behind one object (:class:`BlockLedger`), and the one block-count rule.

A request owns *private* blocks (KV it computed itself), shares *shared* blocks served by the prefix cache
and pins that many cache units; the running decode batch additionally holds a *reservation*: the blocks its
next step will fill (sequences whose context crosses a block boundary). The pool's counts (free, private,
cached, evictable) are the :class:`~infercast.sim.kv_cache.KVCache`; the per-request counts live in the
:class:`~infercast.sim.state.RequestTable`. Every change to either goes through the ledger.
"""

from __future__ import annotations

from infercast.sim.kv_cache import KVCache
from infercast.sim.state import RequestTable


def blocks_for(tokens: int, block_size: int) -> int:
    """KV blocks holding ``tokens`` tokens. A sequence about to run a step at context c holds c - 1 tokens of
    KV (the new token's KV is written by that step)."""
    return -(-tokens // block_size)


class BlockLedger:
    """Allocates, hands over and frees one replica's KV blocks (see module docstring)."""

    def __init__(self, kv: KVCache, table: RequestTable, state_blocks: int = 0):
        self.kv = kv
        self.table = table
        self.block_size = kv.block_size
        self.reserved = 0
        """Blocks allocated for the growth of the next decode step (see :meth:`reserve`)."""
        self.state_blocks = state_blocks
        """Blocks of one sequence's fixed linear-attention state (hybrid models; 0 otherwise): taken from the same
        pool when the sequence first gets KV blocks and freed with them, as vLLM's hybrid allocator does."""
        self.state_holders: set[int] = set()

    def _state_need(self, i: int) -> int:
        return self.state_blocks if self.state_blocks and i not in self.state_holders else 0

    def _free_state(self, i: int) -> int:
        if i in self.state_holders:
            self.state_holders.discard(i)
            return self.state_blocks
        return 0

    # ----- admission and prefill -----------------------------------------------------------------------------
    def match_prefix(self, i: int) -> int:
        """Pin the cached prefix of request ``i``'s prompt; returns its length in tokens (0 without a cache)."""
        tb, kv = self.table, self.kv
        hashes = tb.hashes_of(i)
        if hashes is None:
            return 0
        hits = kv.match(hashes, tb.target[i])
        tb.pinned[i] = hits
        return hits * kv.unit_tokens

    def unmatch(self, i: int) -> None:
        """Undo :meth:`match_prefix` (the request was not admitted after all)."""
        tb = self.table
        if tb.pinned[i]:
            self.kv.unpin(tb.hashes_of(i), tb.pinned[i])
            tb.pinned[i] = 0

    def claim(self, i: int, tokens: int) -> bool:
        """Allocate the blocks that hold the first ``tokens`` tokens of request ``i``, its matched prefix
        (:meth:`match_prefix`) served by the cache; on failure undo the match and return False."""
        tb, kv = self.table, self.kv
        shared = tb.pinned[i] * kv.blocks_per_unit
        need = blocks_for(tokens, self.block_size) - shared
        state = self._state_need(i)
        if not kv.allocate(max(need, 0) + state):
            self.unmatch(i)
            return False
        if state:
            self.state_holders.add(i)
        tb.shared[i] = shared
        tb.private[i] = need if need > 0 else 0
        return True

    def extend(self, i: int, tokens: int) -> bool:
        """Grow request ``i``'s blocks to hold ``tokens`` tokens; False, changing nothing, if they run short."""
        tb = self.table
        need = blocks_for(tokens, self.block_size) - tb.shared[i] - tb.private[i]
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
        need = blocks_for(context - 1, self.block_size)
        state = self._state_need(i)
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
