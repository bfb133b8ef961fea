"""Latency curves of the collectives of one deployment, inside one scale-up domain or across nodes.

Inside a domain (an 8-GPU NVLink node, a 72-GPU NVL72 rack) the measured curve of the engine's kernel is used
(:meth:`CostProfile.collective_curve`). Across nodes the collective is hierarchical, as NCCL runs it: the
intra-node part on the whole message (measured curve, or the ring formula) plus an inter-node ring over the
scale-out network in which each GPU's own NIC carries its 1/g share (g GPUs per node):

* all-reduce:  2(n-1)·lat + 2(n-1)/n · (x/g) / BW_net
* all-gather:   (n-1)·lat +  (n-1)/n · (x/g) / BW_net
* all-to-all:   (n-1)·lat + x · (N-g)/N / BW_net   (the share of each rank's buffer bound for other nodes)

for n nodes, N ranks, a message (buffer) of x bytes per rank; BW_net and lat from the hardware's ``scale_out``.

The two latencies are counted differently, each as its parameter is defined: ``lat`` (the network's
``latency_s``) is per ring step, so an all-reduce's 2(n-1) steps pay 2(n-1)·lat; inside a domain without a
measured curve (:func:`_ring`, and the step model's ``hops``) alpha = ``allreduce_latency_s`` is defined per
all-reduce hop, two ring steps (``profiles/defaults.yaml``): an all-reduce of g GPUs pays (g-1)·alpha, an
all-gather or all-to-all, whose ring has half the steps, (g-1)·alpha/2.
"""

from __future__ import annotations

import numpy as np

from infercast.cost.curves import Curve
from infercast.cost.profile import CostProfile
from infercast.cost.ring import ring_share, ring_steps
from infercast.specs.hardware import HardwareSpec

GRID = tuple(float(2**i) for i in range(7, 34))
"""Message sizes (bytes) at which composed curves are tabulated: 128 B to 8 GiB (linear beyond)."""


def _ring(kind: str, ranks: int, bandwidth: float, alpha: float) -> Curve:
    """The alpha-beta ring formula the step model uses without a measured curve, as a curve."""
    xs = np.asarray(GRID)
    t = ring_share(kind, ranks) * xs / bandwidth + ring_steps(kind, ranks) * (0.5 * alpha)
    return Curve(GRID, tuple(t.tolist()), f"ring formula over {ranks} GPUs")


def collective_curve(profile: CostProfile, hw: HardwareSpec, kind: str, ranks: int) -> Curve | None:
    """Curve for ``ranks`` GPUs; None inside one domain without a measured curve (the step model's ring)."""
    domain = hw.max_gpus_per_node
    if ranks <= domain or hw.scale_out is None:
        return profile.collective_curve(kind, ranks)
    nodes = -(-ranks // domain)
    g = ranks // nodes
    net = hw.scale_out
    bw = net.bandwidth_bytes_s * profile.link_efficiency
    lat = net.latency_s
    xs = np.asarray(GRID)
    if kind == "all_reduce":
        inter = 2 * (nodes - 1) * lat + ring_share(kind, nodes) * (xs / g) / bw
    elif kind == "all_gather":
        inter = (nodes - 1) * lat + ring_share(kind, nodes) * (xs / g) / bw
    else:  # alltoall (and anything else: every byte bound for another node crosses the network once)
        inter = (nodes - 1) * lat + xs * (ranks - g) / ranks / bw
    label = f"inter-node over {net.name} ({nodes} nodes x {g} GPUs, alpha-beta)"
    across = Curve(GRID, tuple(inter.tolist()), label)
    if g == 1:
        return across
    intra = profile.collective_curve(kind, g) or _ring(
        kind, g, hw.collective_bandwidth_bytes_s * profile.link_efficiency, profile.allreduce_latency_s
    )
    return intra.plus(across, 1.0, f"{intra.source} + {label}")
