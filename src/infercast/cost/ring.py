"""Bytes a ring collective sends per GPU and the steps it takes: the one place the ring's factors are written.

In a ring over N GPUs each GPU's buffer is cut into N chunks and every step passes one chunk to the next GPU.
An all-gather (or a reduce-scatter) takes N-1 steps, so each GPU sends (N-1)/N of its buffer; an all-reduce
is a reduce-scatter followed by an all-gather, 2(N-1)/N. The step model's link bytes
(:mod:`infercast.cost.operators`), the ring and inter-node curves (:mod:`infercast.cost.collectives`) and the
scaling of measured curves to other group sizes (:meth:`infercast.cost.profile.CostProfile.collective_curve`)
all take the factor from here. Each step also pays a latency: an all-reduce takes 2(N-1) steps, a gather,
reduce-scatter or all-to-all N-1, a point-to-point send one (:func:`ring_steps`).
"""

from __future__ import annotations


def ring_share(kind: str, ranks: int) -> float:
    """Bytes each of ``ranks`` GPUs sends per byte of its buffer in a ring ``kind``: 2(N-1)/N for an
    ``all_reduce``, (N-1)/N otherwise (all-gather, reduce-scatter; an all-to-all also sends (N-1)/N of its
    buffer, the share bound for the other GPUs)."""
    if kind == "all_reduce":
        return 2 * (ranks - 1) / ranks
    return (ranks - 1) / ranks


def ring_steps(kind: str, ranks: int) -> int:
    """Latency steps of a ring ``kind`` over ``ranks`` GPUs: 2(N-1) for an ``all_reduce`` (reduce-scatter, then
    all-gather), 1 for a ``p2p`` send, N-1 otherwise (all-gather, reduce-scatter, all-to-all)."""
    if kind == "all_reduce":
        return 2 * (ranks - 1)
    if kind == "p2p":
        return 1
    return ranks - 1
