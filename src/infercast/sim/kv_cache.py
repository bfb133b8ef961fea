"""Paged KV-cache accounting for one replica, with optional prefix caching.

Blocks hold ``block_size`` tokens of every layer. A sequence owns *private* blocks for the tokens it
computed itself; with prefix caching, full blocks of a shared prompt prefix live in a cache keyed by
block-hash chains (a block is reusable only if every block before it matches too). Cached blocks in use
are pinned by a reference count; unreferenced ones stay resident and are evicted least-recently-used
when an allocation needs room — as in vLLM's prefix cache.

Workloads describe shared prefixes by ids of ``hash_block_size``-token blocks, which need not be the
engine's block size (16-token hashes against TensorRT-LLM's 32-token blocks; Mooncake's 512-token hashes
against 16-token blocks). The cache therefore works in *units* of ``lcm(hash_block_size, block_size)``
tokens: a unit is a whole number of hash blocks (``hashes_per_unit``; its id is the id of its last hash
block, which determines the whole prefix because ids are prefix-closed) and a whole number of engine blocks
(``blocks_per_unit``). With equal sizes a unit is one block. A prefix shared in hash blocks but ending inside
an engine block is shared up to the last whole unit, as an engine that hashes its own blocks would share it.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import overload

import numpy as np

from infercast.sim.workload import DEFAULT_HASH_BLOCK_SIZE


class KVCache:
    """Block accounting (counts, not per-block tables: the simulator needs sizes, not addresses)."""

    def __init__(
        self, num_blocks: int, block_size: int, prefix_caching: bool, hash_block_size: int = DEFAULT_HASH_BLOCK_SIZE
    ):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.hash_block_size = hash_block_size
        self.unit_tokens = math.lcm(hash_block_size, block_size)  # tokens per cache entry (see module docstring)
        self.hashes_per_unit = self.unit_tokens // hash_block_size
        self.blocks_per_unit = self.unit_tokens // block_size
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

    def allocate(self, blocks: int) -> bool:
        """Take ``blocks`` private blocks, evicting unreferenced cache blocks LRU-first; False if impossible."""
        if blocks <= 0:
            return True
        short = blocks - self.free
        if short > self.evictable:
            return False
        while short > 0:
            self._evict_one()
            short -= self.blocks_per_unit
        self.private += blocks
        self.free -= blocks
        return True

    def release(self, blocks: int) -> None:
        self.private -= blocks
        self.free += blocks

    def _evict_one(self) -> None:
        key, _ = self.lru.popitem(last=False)  # guarded by ``available``: the LRU list is not empty
        del self.refs[key]
        self.cached_blocks -= self.blocks_per_unit
        self.evictable -= self.blocks_per_unit
        self.free += self.blocks_per_unit
        self.evictions += 1

    # ----- prefix cache -------------------------------------------------------------------------------------
    @overload
    def unit_ids(self, hashes: np.ndarray) -> np.ndarray: ...
    @overload
    def unit_ids(self, hashes: None) -> None: ...

    def unit_ids(self, hashes: np.ndarray | None) -> np.ndarray | None:
        """Ids of the cache units a prompt's hash blocks form (the hash ids when a unit is one hash block)."""
        if hashes is None or self.hashes_per_unit == 1:
            return hashes
        step = self.hashes_per_unit
        return hashes[step - 1 :: step]

    def lookup(self, hashes: np.ndarray | None, prompt_len: int) -> tuple[int, int]:
        """The longest cached prefix of a prompt's ``hashes``, in units, and how many of its blocks are
        evictable now (unreferenced: they stop counting as allocatable once pinned). Changes nothing.

        At least one prompt token is always recomputed (its logits are needed), as in vLLM.
        """
        if not self.prefix_caching or hashes is None:
            return 0, 0
        ids = self.unit_ids(hashes)
        limit = min(len(ids), (prompt_len - 1) // self.unit_tokens)
        hits = idle = 0
        for h in ids[:limit].tolist():
            refs = self.refs.get(h)
            if refs is None:
                break
            hits += 1
            idle += refs == 0
        return hits, idle * self.blocks_per_unit

    def pin(self, hashes: np.ndarray | None, hits: int, prompt_len: int) -> None:
        """Reference the first ``hits`` units of a prompt (found by :meth:`lookup`) for a request being
        admitted, and count the lookup in the hit-rate statistics (once per admission)."""
        if not self.prefix_caching or hashes is None:
            return
        self.lookup_tokens += prompt_len
        self.hits_tokens += hits * self.unit_tokens
        per = self.blocks_per_unit
        for h in self.unit_ids(hashes)[:hits].tolist():
            refs = self.refs[h]
            if refs == 0:
                del self.lru[h]
                self.evictable -= per
            self.refs[h] = refs + 1

    def match(self, hashes: np.ndarray | None, prompt_len: int) -> int:
        """:meth:`lookup` then :meth:`pin`: pin the longest cached prefix; returns how many units matched."""
        hits, _ = self.lookup(hashes, prompt_len)
        self.pin(hashes, hits, prompt_len)
        return hits

    def publish(self, hashes: np.ndarray | None, hits: int, computed_tokens: int) -> tuple[int, int]:
        """After prefill, move the sequence's newly computed full units into the cache (pinned).

        Returns (private blocks handed over: the caller's allocation shrinks by that much, units it now pins).
        """
        if not self.prefix_caching or hashes is None:
            return 0, hits
        ids = self.unit_ids(hashes)
        full = min(len(ids), computed_tokens // self.unit_tokens)
        moved = 0
        per = self.blocks_per_unit
        for h in ids[hits:full].tolist():
            refs = self.refs.get(h)
            if refs is None:
                self.refs[h] = 1
                self.cached_blocks += per
                moved += per  # private blocks become cache blocks: free is unchanged
            else:  # computed concurrently by another sequence: keep ours private, share the entry
                if refs == 0:
                    del self.lru[h]
                    self.evictable -= per
                self.refs[h] = refs + 1
        self.private -= moved
        return moved, max(full, hits)

    def unpin(self, hashes: np.ndarray | None, count: int) -> None:
        """Drop one reference to each of the first ``count`` units (sequence finished or preempted). Units
        left unreferenced join the LRU list tail first, so a prompt's last units are evicted before its first
        (shared prefixes outlive the prompts built on them), as vLLM frees a sequence's blocks."""
        if not self.prefix_caching or hashes is None or count <= 0:
            return
        per = self.blocks_per_unit
        for h in reversed(self.unit_ids(hashes)[:count].tolist()):
            refs = self.refs.get(h)
            if refs is None:
                continue
            self.refs[h] = refs - 1
            if refs == 1:
                self.lru[h] = None
                self.evictable += per
