"""One row of the operator table (:mod:`infercast.cost.operators`): an operator's linear coefficients. Its own
module so that the tables of attention variants (:mod:`infercast.cost.attention_variants`) and the main table
build rows of one type without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from infercast.cost.batch import NUM_FEATURES, F

# Extra feature appended by the step model: the fraction of a rank's routed experts the step's tokens touch.
EXPERT_FRAC = NUM_FEATURES
NUM_COLUMNS = NUM_FEATURES + 1


@dataclass
class OpRow:
    """Coefficients of one operator (per rank, all its layers together)."""

    name: str
    group: str
    kind: str  # gemm | attention | elementwise | comm
    compute_key: str | None  # tensor-core peak key for the compute ceiling (None: vector fp32 / none)
    flops: np.ndarray = field(default_factory=lambda: np.zeros(NUM_COLUMNS))
    bytes: np.ndarray = field(default_factory=lambda: np.zeros(NUM_COLUMNS))
    rows: np.ndarray = field(default_factory=lambda: np.zeros(NUM_COLUMNS))
    kernels: float = 0.0
    hops: float = 0.0  # ring steps without a measured curve (cost/ring.py ring_steps), each paying a step latency
    active: int = F["tokens"]  # feature that must be > 0 for the op to run at all
    bandwidth: str = "hbm"  # hbm | attn_decode | link (scale-up) | network (scale-out between nodes)
    collective: str | None = None  # all_reduce | all_gather | alltoall | p2p (a measured curve prices it, if any)
    ranks: int = 1  # GPUs taking part in each collective
    calls: float = 0.0  # collectives of this op per step
    message: np.ndarray = field(default_factory=lambda: np.zeros(NUM_COLUMNS))
    """Bytes of one collective's buffer per rank (the size collective benchmarks report), linear in the features."""
    act_in: float = 0.0
    """Input activation elements per token (K x layers) of a dense GEMM row: what an 8-bit GEMM quantises first."""
