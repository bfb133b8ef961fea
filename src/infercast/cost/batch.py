"""The work of one engine step, summarised as the few aggregates its cost depends on.

A step runs prefill chunks (``c`` new tokens on top of ``c0`` cached ones) and decode tokens (one each, at
context ``ctx``). Every operator's FLOPs and bytes are linear in these aggregates, so a batch is a feature
column and many batches (steps, or configurations of a sweep) are a feature matrix of shape
``(NUM_FEATURES, N)``: the cost model evaluates all columns at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infercast.errors import InfercastError

FEATURES = (
    "one",
    "tokens",  # new tokens in the step: prefill chunk tokens + decode tokens
    "sampled",  # tokens that produce logits: decodes + prefill chunks that finish their prompt
    "prefill_tokens",
    "decode_tokens",
    "prefill_pairs",  # causal (query, key) pairs of prefill chunks, full-attention layers
    "prefill_pairs_win",  # same for sliding-window layers
    "prefill_kv",  # KV tokens prefill attention reads (c0 + c per chunk)
    "prefill_kv_win",
    "decode_kv",  # KV tokens decode attention reads (context per decode token)
    "decode_kv_win",
    "seqs",  # sequences in the step
    "prefill_seqs",
)
F = {name: i for i, name in enumerate(FEATURES)}
NUM_FEATURES = len(FEATURES)


def causal_pairs(c: np.ndarray | float, c0: np.ndarray | float) -> np.ndarray | float:
    """Query-key pairs of a chunk of ``c`` tokens after ``c0`` cached ones: c·c0 + c(c+1)/2."""
    return c * c0 + c * (c + 1) / 2


def window_pairs(c: np.ndarray | float, c0: np.ndarray | float, window: float) -> np.ndarray:
    """Pairs when each query sees at most ``window`` keys (itself included): sum of min(p+1, W)."""
    c = np.asarray(c, dtype=float)
    c0 = np.asarray(c0, dtype=float)
    lo, hi = c0 + 1, c0 + c  # values of p+1 over the chunk
    top = np.minimum(hi, window)
    n_lin = np.maximum(top - lo + 1, 0)
    linear = n_lin * (lo + np.maximum(top, lo - 1)) / 2
    capped = window * np.maximum(hi - np.maximum(lo - 1, window), 0)
    return linear + capped


def window_kv(c: np.ndarray | float, c0: np.ndarray | float, window: float) -> np.ndarray:
    """KV tokens a chunk reads in a sliding layer: min(c0, W-1) + c."""
    return np.minimum(np.asarray(c0, dtype=float), window - 1) + c


@dataclass(frozen=True)
class StepBatch:
    """A feature matrix ``x`` of shape (NUM_FEATURES, N): N steps (or configurations) at once."""

    x: np.ndarray

    def __post_init__(self) -> None:
        if self.x.ndim != 2 or self.x.shape[0] != NUM_FEATURES:
            raise ValueError(f"StepBatch.x must have shape ({NUM_FEATURES}, N), got {self.x.shape}")

    def __len__(self) -> int:
        return self.x.shape[1]

    def feature(self, name: str) -> np.ndarray:
        return self.x[F[name]]

    @classmethod
    def from_items(
        cls,
        prefill: Sequence[tuple[int, int]] = (),
        decode: Sequence[int] = (),
        *,
        window: int | None = None,
        prefill_samples: int | None = None,
    ) -> StepBatch:
        """One step from explicit work items.

        ``prefill``: (chunk tokens c, cached tokens c0) per chunk; ``decode``: context length per decode token
        (keys it attends to, itself included). ``prefill_samples``: how many chunks finish their prompt and
        sample a token (default: all).
        """
        c = np.array([p[0] for p in prefill], dtype=float)
        c0 = np.array([p[1] for p in prefill], dtype=float)
        ctx = np.asarray(decode, dtype=float)
        if (c < 1).any() or (c0 < 0).any() or (ctx < 1).any():
            raise InfercastError("chunk tokens and contexts must be >= 1, cached tokens >= 0", field="batch")
        w = float(window) if window else np.inf
        x = np.zeros((NUM_FEATURES, 1))
        x[F["one"]] = 1
        x[F["prefill_tokens"]] = c.sum()
        x[F["decode_tokens"]] = len(ctx)
        x[F["tokens"]] = c.sum() + len(ctx)
        x[F["sampled"]] = len(ctx) + (len(c) if prefill_samples is None else prefill_samples)
        x[F["prefill_pairs"]] = np.sum(causal_pairs(c, c0))
        x[F["prefill_kv"]] = (c0 + c).sum()
        x[F["decode_kv"]] = ctx.sum()
        if window:
            x[F["prefill_pairs_win"]] = window_pairs(c, c0, w).sum()
            x[F["prefill_kv_win"]] = window_kv(c, c0, w).sum()
            x[F["decode_kv_win"]] = np.minimum(ctx, w).sum()
        else:
            x[F["prefill_pairs_win"]] = x[F["prefill_pairs"]]
            x[F["prefill_kv_win"]] = x[F["prefill_kv"]]
            x[F["decode_kv_win"]] = x[F["decode_kv"]]
        x[F["seqs"]] = len(c) + len(ctx)
        x[F["prefill_seqs"]] = len(c)
        return cls(x)

    @classmethod
    def uniform(
        cls,
        *,
        prefill_seqs: np.ndarray | float = 0,
        chunk: np.ndarray | float = 0,
        cached: np.ndarray | float = 0,
        decode_seqs: np.ndarray | float = 0,
        context: np.ndarray | float = 1,
        window: float | None = None,
        prefill_samples: np.ndarray | float | None = None,
    ) -> StepBatch:
        """Vectorised steps of identical items: ``prefill_seqs`` chunks of ``chunk`` tokens on ``cached`` ones,
        and ``decode_seqs`` decodes at ``context``. Arguments broadcast to N columns."""
        p, c, c0, d, ctx = np.broadcast_arrays(
            *(np.asarray(v, dtype=float) for v in (prefill_seqs, chunk, cached, decode_seqs, context))
        )
        n = p.size
        p, c, c0, d, ctx = (a.reshape(n) for a in (p, c, c0, d, ctx))
        samples = p if prefill_samples is None else np.broadcast_to(np.asarray(prefill_samples, float), (n,))
        c = np.where(p > 0, c, 0.0)
        x = np.empty((NUM_FEATURES, n))
        x[F["one"]] = 1
        x[F["prefill_tokens"]] = p * c
        x[F["decode_tokens"]] = d
        x[F["tokens"]] = p * c + d
        x[F["sampled"]] = d + samples
        x[F["prefill_pairs"]] = p * causal_pairs(c, c0)
        x[F["prefill_kv"]] = p * (c0 + c)
        x[F["decode_kv"]] = d * ctx
        if window:
            x[F["prefill_pairs_win"]] = p * window_pairs(c, c0, window)
            x[F["prefill_kv_win"]] = p * np.where(c > 0, window_kv(c, c0, window), 0.0)
            x[F["decode_kv_win"]] = d * np.minimum(ctx, window)
        else:
            x[F["prefill_pairs_win"]] = x[F["prefill_pairs"]]
            x[F["prefill_kv_win"]] = x[F["prefill_kv"]]
            x[F["decode_kv_win"]] = x[F["decode_kv"]]
        x[F["seqs"]] = p + d
        x[F["prefill_seqs"]] = p
        return cls(x)
