"""The engine's paged KV memory: a pool of fixed-size blocks with a free list, reference counts and a
prefix cache (block-content hash -> block), as in vLLM's block manager.

A block holds ``block_size`` tokens of every layer. A sequence owns a *block table* (the ids of its blocks in
order). Full prompt blocks are published under a hash of their tokens chained to the previous block's hash,
so a later prompt that starts with the same tokens finds them and shares the blocks (reference count + 1)
instead of recomputing them. Published blocks nobody references stay resident and are evicted
least-recently-released first when an allocation needs room. The simulator's :class:`~infercast.sim.kv_cache.
KVCache` keeps the same accounting as counts; this pool keeps the addresses.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence


def chain_hashes(tokens: Sequence[int], block_size: int, limit: int | None = None) -> list[int]:
    """Hash of every full block of ``tokens`` (each chained to the one before, so equal hashes mean equal
    prefixes); at most ``limit`` blocks."""
    full = len(tokens) // block_size if limit is None else min(limit, len(tokens) // block_size)
    out: list[int] = []
    parent = 0
    for b in range(full):
        parent = hash((parent, tuple(tokens[b * block_size : (b + 1) * block_size])))
        out.append(parent)
    return out


class BlockPool:
    """Block ids ``0 .. num_blocks-1``: free list, per-block reference counts, hash table of cached blocks."""

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True):
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be >= 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.free_ids: deque[int] = deque(range(num_blocks))
        self.refs = [0] * num_blocks
        self.hash_of: list[int | None] = [None] * num_blocks
        self.cached: dict[int, int] = {}  # block hash -> block id (resident, referenced or not)
        self.lru: OrderedDict[int, None] = OrderedDict()  # cached blocks with refcount 0, least recent first
        self.hit_tokens = 0
        self.lookup_tokens = 0
        self.evictions = 0

    # ----- counts ---------------------------------------------------------------------------------------
    @property
    def free(self) -> int:
        """Blocks allocatable without evicting anything."""
        return len(self.free_ids)

    @property
    def evictable(self) -> int:
        """Cached blocks nobody references (evicted on demand)."""
        return len(self.lru)

    @property
    def available(self) -> int:
        return len(self.free_ids) + len(self.lru)

    @property
    def used(self) -> int:
        """Blocks referenced by live sequences."""
        return self.num_blocks - self.available

    # ----- allocation -----------------------------------------------------------------------------------
    def allocate(self, n: int) -> list[int] | None:
        """``n`` fresh blocks (reference count 1), evicting unreferenced cached blocks LRU-first; None (and no
        change) if fewer than ``n`` are available."""
        if n <= 0:
            return []
        if n > self.available:
            return None
        out: list[int] = []
        for _ in range(n):
            if not self.free_ids:
                self._evict_one()
            b = self.free_ids.popleft()
            self.refs[b] = 1
            out.append(b)
        return out

    def _evict_one(self) -> None:
        b, _ = self.lru.popitem(last=False)
        h = self.hash_of[b]
        if h is not None:
            del self.cached[h]
            self.hash_of[b] = None
        self.free_ids.append(b)
        self.evictions += 1

    def release(self, blocks: Sequence[int]) -> None:
        """Drop one reference to each block; unreferenced blocks return to the free list, or to the LRU list
        if they hold a published prefix (reusable until evicted). Released in reverse so a sequence's tail
        blocks are evicted before its head (vLLM's order)."""
        for b in reversed(blocks):
            refs = self.refs[b] - 1
            if refs < 0:
                raise RuntimeError(f"block {b} released more often than referenced")
            self.refs[b] = refs
            if refs == 0:
                if self.hash_of[b] is not None:
                    self.lru[b] = None
                else:
                    self.free_ids.append(b)

    # ----- prefix cache ---------------------------------------------------------------------------------
    def lookup(self, hashes: Sequence[int], prompt_len: int) -> list[int]:
        """Ids of the cached blocks of the longest cached prefix of ``hashes``; changes nothing.

        At least one prompt token is always left to compute (its logits are needed), as in vLLM.
        """
        if not self.prefix_caching:
            return []
        limit = min(len(hashes), (prompt_len - 1) // self.block_size)
        out: list[int] = []
        for h in hashes[:limit]:
            b = self.cached.get(h)
            if b is None:
                break
            out.append(b)
        return out

    def take(self, blocks: Sequence[int], prompt_len: int) -> None:
        """Reference the cached ``blocks`` (from :meth:`lookup`) for a sequence being admitted, counting the
        lookup in the hit-rate statistics (once per admission, as the simulator's KVCache.pin)."""
        if not self.prefix_caching:
            return
        self.lookup_tokens += prompt_len
        for b in blocks:
            if self.refs[b] == 0:
                del self.lru[b]
            self.refs[b] += 1
        self.hit_tokens += len(blocks) * self.block_size

    def match(self, hashes: Sequence[int], prompt_len: int) -> list[int]:
        """:meth:`lookup` then :meth:`take`: reference the longest cached prefix and return its block ids."""
        out = self.lookup(hashes, prompt_len)
        self.take(out, prompt_len)
        return out

    def publish(self, table: list[int], hashes: Sequence[int], start: int) -> list[int]:
        """Make blocks ``table[start:len(hashes)]`` findable under ``hashes``.

        A hash already cached (the same prefix computed concurrently by another sequence) keeps the first
        copy: ours stays private and the sequence takes a reference on the cached copy, which is then not
        evictable while the sequence lives (the simulator's accounting, :meth:`KVCache.publish`). Returns the
        ids of the blocks so referenced; the caller releases them with the sequence.
        """
        if not self.prefix_caching:
            return []
        pinned: list[int] = []
        for j in range(start, min(len(hashes), len(table))):
            h = hashes[j]
            other = self.cached.get(h)
            if other is not None:
                if other != table[j]:
                    if self.refs[other] == 0:
                        del self.lru[other]
                    self.refs[other] += 1
                    pinned.append(other)
                continue
            b = table[j]
            if self.hash_of[b] is None:
                self.cached[h] = b
                self.hash_of[b] = h
        return pinned

    def check(self, live_tables: Sequence[Sequence[int]]) -> None:
        """Raise if reference counts disagree with the live block tables or a block is lost (leak check)."""
        counts = [0] * self.num_blocks
        for table in live_tables:
            for b in table:
                counts[b] += 1
        if counts != self.refs:
            bad = next(b for b in range(self.num_blocks) if counts[b] != self.refs[b])
            raise RuntimeError(f"block {bad}: {self.refs[bad]} references recorded, {counts[bad]} held by sequences")
        free = set(self.free_ids)
        lru = set(self.lru)
        if len(free) != len(self.free_ids) or free & lru:
            raise RuntimeError("a block is listed twice among free/evictable blocks")
        idle = {b for b in range(self.num_blocks) if counts[b] == 0}
        if idle != free | lru:
            raise RuntimeError(f"{len(idle - free - lru)} unreferenced blocks are neither free nor cached (leak)")
