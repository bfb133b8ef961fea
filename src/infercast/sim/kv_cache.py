"""Paged KV-cache accounting for one replica, with optional prefix caching.

Blocks hold ``block_size`` tokens of every layer. A sequence owns *private* blocks for the tokens it
computed itself; with prefix caching, full blocks of a shared prompt prefix live in a cache keyed by
block-hash chains (a block is reusable only if every block before it matches too). Cached blocks in use
are pinned by a reference count; unreferenced ones stay resident and are evicted least-recently-used
when an allocation needs room — as in vLLM's prefix cache.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np


class KVCache:
    """Block accounting (counts, not per-block tables: the simulator needs sizes, not addresses)."""

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool, hash_block_size: int = 16):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.hash_block_size = hash_block_size
        self.blocks_per_hash = max(hash_block_size // block_size, 1) if prefix_caching else 1
        self.private = 0  # blocks owned by sequences
        self.free = num_blocks  # allocatable without evicting: num_blocks - private - cached_blocks
        self.refs: dict[int, int] = {}  # resident hash block -> references from live sequences
        self.lru: OrderedDict[int, None] = OrderedDict()  # unreferenced resident blocks, least recent first
        self.cached_blocks = 0  # resident cache blocks (pinned + evictable)
        self.evictable = 0  # resident cache blocks with refcount 0
        self.hits_tokens = 0
        self.lookup_tokens = 0
        self.evictions = 0

    @property
    def available(self) -> int:
        """Blocks allocatable if every unreferenced cached block is evicted."""
        return self.free + self.evictable

    @property
    def used(self) -> int:
        """Blocks holding live data (private + pinned cache)."""
        return self.private + self.cached_blocks - self.evictable

    def blocks_for(self, tokens: int | float | np.ndarray) -> int | np.ndarray:
        """Blocks needed for ``tokens`` tokens."""
        return -(-tokens // self.block_size)

    def allocate(self, blocks: int) -> bool:
        """Take ``blocks`` private blocks, evicting unreferenced cache blocks LRU-first; False if impossible."""
        if blocks <= 0:
            return True
        short = blocks - self.free
        if short > self.evictable:
            return False
        while short > 0:
            self._evict_one()
            short -= self.blocks_per_hash
        self.private += blocks
        self.free -= blocks
        return True

    def release(self, blocks: int) -> None:
        self.private -= blocks
        self.free += blocks

    def _evict_one(self) -> None:
        key, _ = self.lru.popitem(last=False)  # guarded by ``available``: the LRU list is not empty
        del self.refs[key]
        self.cached_blocks -= self.blocks_per_hash
        self.evictable -= self.blocks_per_hash
        self.free += self.blocks_per_hash
        self.evictions += 1

    # ----- prefix cache -------------------------------------------------------------------------------------
    def match(self, hashes: np.ndarray | None, prompt_len: int) -> int:
        """Pin the longest cached prefix of ``hashes``; returns how many hash blocks matched.

        At least one prompt token is always recomputed (its logits are needed), as in vLLM.
        """
        if not self.prefix_caching or hashes is None:
            return 0
        self.lookup_tokens += prompt_len
        limit = min(len(hashes), (prompt_len - 1) // self.hash_block_size)
        hits = 0
        for h in hashes[:limit].tolist():
            refs = self.refs.get(h)
            if refs is None:
                break
            if refs == 0:
                del self.lru[h]
                self.evictable -= self.blocks_per_hash
            self.refs[h] = refs + 1
            hits += 1
        self.hits_tokens += hits * self.hash_block_size
        return hits

    def publish(self, hashes: np.ndarray | None, hits: int, computed_tokens: int) -> int:
        """After prefill, move the sequence's newly computed full hash blocks into the cache (pinned).

        Returns the private blocks handed over (the caller's allocation shrinks by that much).
        """
        if not self.prefix_caching or hashes is None:
            return 0
        full = min(len(hashes), computed_tokens // self.hash_block_size)
        moved = 0
        for h in hashes[hits:full].tolist():
            refs = self.refs.get(h)
            if refs is None:
                self.refs[h] = 1
                self.cached_blocks += self.blocks_per_hash
                moved += self.blocks_per_hash  # private blocks become cache blocks: free is unchanged
            else:  # computed concurrently by another sequence: keep ours private, share the entry
                if refs == 0:
                    del self.lru[h]
                    self.evictable -= self.blocks_per_hash
                self.refs[h] = refs + 1
        self.private -= moved
        return moved

    def unpin(self, hashes: np.ndarray | None, count: int) -> None:
        """Drop one reference to each of the first ``count`` hash blocks (sequence finished or preempted)."""
        if not self.prefix_caching or hashes is None or count <= 0:
            return
        for h in hashes[:count].tolist():
            refs = self.refs.get(h)
            if refs is None:
                continue
            self.refs[h] = refs - 1
            if refs == 1:
                self.lru[h] = None
                self.evictable += self.blocks_per_hash

    @property
    def hit_rate(self) -> float:
        """Share of looked-up prompt tokens served from the cache."""
        return self.hits_tokens / self.lookup_tokens if self.lookup_tokens else 0.0
