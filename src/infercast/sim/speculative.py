"""Speculative decoding: a draft proposes k tokens per step, the target verifies them in one pass.

Each decode step then costs one target pass over k + 1 tokens per sequence (attending to the growing
context) plus the draft's k decode steps, and emits 1 + a tokens, a ~ accepted drafts (each accepted with
probability ``acceptance`` until the first rejection). Modelling choice: one draw per step serves the whole
batch (sequences advance together), which keeps mean TPOT and throughput right but understates the spread
between requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infercast.errors import InfercastError, require_positive_int, require_positive_number

MAX_SPEC_TOKENS = 32
"""Most draft tokens per step accepted. Published methods propose 1-3 (MTP heads) up to ~8-10 (EAGLE trees,
n-gram lookup) per step; past the acceptance-dependent optimum (k ~ 4 at 0.7 acceptance on an 8B model here)
TPOT rises again, since every step verifies k + 1 tokens per sequence while the expected gain saturates at
1 / (1 - acceptance): beyond 32 the verification pass is a prefill and the model is outside its range."""


def mtp_draft_cost(num_layers: int) -> float:
    """Draft step / target decode step when the drafts come from the model's own MTP module: one transformer block
    beside the main stack's ``num_layers`` (DeepSeek-V3 technical report, section 2.2), sharing its embedding and
    output head."""
    return 1.0 / require_positive_int("num_layers", num_layers)


@dataclass(frozen=True)
class SpeculativeConfig:
    """Draft length, per-token acceptance, and what a draft token costs."""

    num_tokens: int
    acceptance: float
    draft_model: str | None = None
    """A catalog model run on the same GPUs as the draft; without one, ``draft_cost`` applies."""
    draft_cost: float = 0.05
    """Draft step time as a fraction of a target decode step (e.g. EAGLE heads, n-gram: ~0.02-0.1)."""

    def __post_init__(self) -> None:
        k = require_positive_int("spec_tokens", self.num_tokens)
        if k > MAX_SPEC_TOKENS:
            raise InfercastError(
                f"{k} draft tokens per step is more than the limit of {MAX_SPEC_TOKENS}", field="spec_tokens"
            )
        object.__setattr__(self, "num_tokens", k)
        acceptance = require_positive_number("spec_acceptance", self.acceptance, allow_zero=True)
        if acceptance > 1:
            raise InfercastError(f"must be in [0, 1], got {acceptance:g}", field="spec_acceptance")
        object.__setattr__(self, "acceptance", acceptance)
        if self.draft_model is not None and not isinstance(self.draft_model, str):
            raise InfercastError(f"must be a catalog model id, got {self.draft_model!r}", field="draft_model")
        object.__setattr__(self, "draft_cost", require_positive_number("draft_cost", self.draft_cost, allow_zero=True))

    @property
    def expected_tokens_per_step(self) -> float:
        """E[1 + accepted] = (1 - α^(k+1)) / (1 - α)."""
        a, k = self.acceptance, self.num_tokens
        return float(k + 1) if a == 1 else (1 - a ** (k + 1)) / (1 - a)


class Speculator:
    """Draws accepted counts and prices the draft for one replica."""

    def __init__(self, config: SpeculativeConfig, seed: int, draft_table=None):
        self.config = config
        self.rng = np.random.default_rng(seed)
        self.draft_table = draft_table

    def accepted(self) -> int:
        """Drafts accepted this step (successes before the first rejection, at most k)."""
        a, k = self.config.acceptance, self.config.num_tokens
        if a >= 1:
            return k
        if a <= 0:
            return 0
        return min(int(self.rng.geometric(1 - a)) - 1, k)
