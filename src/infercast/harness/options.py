"""What a measurement run takes and gives back, without importing torch.

:class:`MeasureOptions` is the one source of the harness's defaults: ``infercast measure`` (typer) and
``python -m infercast.harness run`` (argparse) both leave unset options to it, and ``None`` fields pick a
per-device default from :data:`DEVICE_DEFAULTS` when the run starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from infercast.records.record import Record

SUITES = ("quick", "full", "micro")
DEFAULT_MAX_PREFILL_TOKENS = 16384
"""Largest prefill point (batch x prompt tokens) timed by default: the biggest chunk serving engines'
default token budgets admit (vLLM/SGLang 8192-16384), and small enough for an 8B model's activations."""

DEVICE_DEFAULTS: dict[str, dict[str, object]] = {
    "cuda": {
        "prefill_lens": [128, 512, 2048],
        "batches": [1, 8, 32],
        "contexts": [512, 2048],
        "output_len": 128,
        "warmup": 3,
        "repeats": 10,
    },
    "cpu": {  # CPU runs only test the plumbing: small and quick
        "prefill_lens": [16, 64],
        "batches": [1, 4],
        "contexts": [32, 128],
        "output_len": 8,
        "warmup": 1,
        "repeats": 3,
    },
}
"""Per-device values of the options left as ``None``."""


@dataclass
class MeasureOptions:
    """What ``infercast measure`` runs; ``None`` picks a per-device default (see :data:`DEVICE_DEFAULTS`)."""

    model: str
    gpu: str | None = None
    precision: str = "bf16"
    layers: int | None = None
    prefill_lens: list[int] | None = None
    batches: list[int] | None = None
    contexts: list[int] | None = None
    suite: str = "quick"
    device: str | None = None
    out: Path | None = None
    output_len: int | None = None
    warmup: int | None = None
    repeats: int | None = None
    cuda_graphs: bool = True
    extrapolate_from: tuple[int, int] | None = None
    max_prefill_tokens: int = DEFAULT_MAX_PREFILL_TOKENS
    seed: int = 0
    flush_l2: bool = True
    """Evict the GPU's L2 cache before every timed repeat, so weights and KV are read from HBM as in
    serving (no-op on CPU)."""
    source: str = ""


DEFAULTS = MeasureOptions(model="")
"""Field defaults, for front ends that show them."""


@dataclass
class MeasureResult:
    """Records measured (and extrapolated), where they were written, and points skipped (with why)."""

    records: list[Record]
    device: str
    gpu: str
    out: Path | None = None
    extrapolated: list[Record] = field(default_factory=list)
    extrapolated_out: Path | None = None
    skipped: list[str] = field(default_factory=list)
    timing: str = ""
    """How the values were timed (repeats, warm-up, L2 flushing); also in the CSV's header comment."""

    def to_dict(self) -> dict[str, object]:
        """The JSON both front ends print with ``--json``."""
        return {
            "out": str(self.out) if self.out else None,
            "device": self.device,
            "gpu": self.gpu,
            "timing": self.timing,
            "records": [r.to_row() for r in self.records],
            "skipped": self.skipped,
            "extrapolated_out": str(self.extrapolated_out) if self.extrapolated_out else None,
            "extrapolated": [r.to_row() for r in self.extrapolated],
        }
