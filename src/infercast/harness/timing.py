"""Timing and provenance for the torch harness: median-of-repeats timers, device facts, record stamping.

On CUDA a timed call is bracketed by ``torch.cuda.Event`` pairs (GPU time, after warm-up); on CPU by
``time.perf_counter`` — CPU timings only exercise the plumbing, they say nothing about a GPU.

Re-timing the same tensors lets a small operand (a 32 MB o_proj weight, a short context's KV) stay in the
GPU's L2 cache between repeats, which no serving step enjoys (each layer's weights evict the last's). So by
default the timer reads a buffer of twice the L2 size before every timed repeat (outside the timed span);
``flush_l2=False`` turns that off. What was done is in :attr:`Timer.description`, copied into the CSV header.

The flush reads rather than writes: a write leaves the L2 full of dirty lines, and the timed kernel then pays
for writing them back to HBM. Measured on an H100 SXM (2026-11-26, ``benchmarks/l2_flush_check.py``), a
105 MB ``zero_()`` before each repeat added 3-11 us to each of Llama-3.1-8B's layer GEMMs at M = 1-128, whose
sum came to 1.13-1.21x the same layer inside a stack of layers; after a read it came to 0.97-1.03x. A read
leaves the L2 clean, as the previous layer's weight reads do in a serving step.
"""

from __future__ import annotations

import re
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from infercast.errors import require_positive_int
from infercast.records.record import Record

L2_FALLBACK_BYTES = 128 << 20
"""L2 size assumed when torch does not report one: above every catalog GPU's L2 (H100 50 MB, H200 60 MB,
B200 126 MB), so twice it evicts any of them."""

# Device-name patterns -> hardware catalog ids (first match wins; names as torch.cuda.get_device_name gives).
_GPU_PATTERNS: list[tuple[str, str]] = [
    (r"\bgb200\b", "gb200"),
    (r"\bb200\b", "b200"),
    (r"\bh200\b", "h200"),
    (r"\bh100\b.*\bpcie\b", "h100-pcie"),
    (r"\bh100\b.*\b(sxm|hbm3)\b", "h100-sxm"),
    (r"\ba100\b.*\b80\s*gb\b", "a100-80gb"),
    (r"\ba100\b", "a100-40gb"),
    (r"\bl40s\b", "l40s"),
    (r"\bl4\b", "l4"),
    (r"\ba10g\b", "a10g"),
    (r"\bt4\b", "t4"),
    (r"\b4090\b", "rtx-4090"),
    (r"\bmi325x\b", "mi325x"),
    (r"\bmi300x\b", "mi300x"),
]


def detect_gpu_id(device_name: str) -> str | None:
    """Catalog id for a device name, e.g. 'NVIDIA H100 80GB HBM3' -> 'h100-sxm'; None when unknown."""
    lowered = device_name.lower()
    for pattern, gpu_id in _GPU_PATTERNS:
        if re.search(pattern, lowered):
            return gpu_id
    return None


def command_line(argv: list[str] | None = None) -> str:
    """The command that is running, as a shell would take it (``python -m pkg`` for module entry points)."""
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return ""
    prog = argv[0]
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if prog.endswith("__main__.py") and main_spec is not None:
        prog = f"python -m {main_spec.name.removesuffix('.__main__')}"
    else:
        prog = Path(prog).name
    return " ".join([prog, *(shlex.quote(a) for a in argv[1:])])


def _nvidia_smi(fields: str) -> list[str]:
    """One GPU's values for ``--query-gpu=fields`` (empty list when nvidia-smi is missing or fails)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    lines = out.stdout.strip().splitlines()
    return [v.strip() for v in lines[0].split(",")] if lines else []


@dataclass(frozen=True)
class Environment:
    """What the measurements ran on (copied into every record)."""

    device: str
    gpu_name: str
    driver: str
    torch_version: str
    clocks: str

    @classmethod
    def detect(cls, device: torch.device) -> Environment:
        """Read device name, driver and clocks (nvidia-smi when present); empty strings on CPU."""
        if device.type != "cuda":
            return cls("cpu", "cpu", "", torch.__version__, "")
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        smi = _nvidia_smi("driver_version,clocks.sm,clocks.mem,clocks.max.sm")
        if len(smi) == 4:
            driver = smi[0]
            clocks = f"sm={smi[1]}MHz mem={smi[2]}MHz max_sm={smi[3]}MHz"
        else:
            driver = f"cuda-runtime {torch.version.cuda}"
            rate = getattr(props, "clock_rate", None)
            clocks = f"max_sm={rate // 1000}MHz" if rate else ""
        return cls("cuda", props.name, driver, torch.__version__, clocks)


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work (no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def l2_cache_bytes(device: torch.device) -> int:
    """The device's L2 cache size in bytes (from torch when it reports it; 0 on CPU)."""
    if device.type != "cuda":
        return 0
    index = device.index if device.index is not None else torch.cuda.current_device()
    return int(getattr(torch.cuda.get_device_properties(index), "L2_cache_size", 0) or L2_FALLBACK_BYTES)


@dataclass
class Timer:
    """Median wall time of ``fn()`` over ``repeats`` calls after ``warmup`` calls (L2 flushed before each
    timed call on CUDA unless ``flush_l2`` is False)."""

    device: torch.device
    warmup: int = 3
    repeats: int = 10
    flush_l2: bool = True
    _scratch: torch.Tensor | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.warmup = require_positive_int("warmup", self.warmup, minimum=0)
        self.repeats = require_positive_int("repeats", self.repeats)
        if self.flush_l2 and self.device.type == "cuda":
            self._scratch = torch.zeros(2 * l2_cache_bytes(self.device), dtype=torch.uint8, device=self.device)

    @property
    def description(self) -> str:
        """How values were timed, for the CSV header."""
        text = f"median of {self.repeats} timed calls after {self.warmup} warm-up calls"
        if self.device.type != "cuda":
            return f"{text}; wall clock on the CPU (no L2 flush)"
        if self._scratch is None:
            return f"{text}; CUDA events; L2 not flushed (--no-l2-flush)"
        mb = self._scratch.numel() / 1e6
        return f"{text}; CUDA events; L2 flushed before each timed call ({mb:.0f} MB read, 2x the L2)"

    def flush(self) -> None:
        """Evict the L2 cache by reading twice its size, leaving it clean (queued on the stream; no-op on CPU
        or when off)."""
        if self._scratch is not None:
            self._scratch.sum(dtype=torch.int32)

    def __call__(self, fn: Callable[[], object], repeats: int | None = None) -> float:
        n = self.repeats if repeats is None else require_positive_int("repeats", repeats)
        for _ in range(self.warmup):
            fn()
        synchronize(self.device)
        times: list[float] = []
        if self.device.type == "cuda":
            pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
            for start, end in pairs:
                self.flush()  # before the start event: not timed
                start.record()
                fn()
                end.record()
            torch.cuda.synchronize(self.device)
            times = [start.elapsed_time(end) / 1e3 for start, end in pairs]
        else:
            for _ in range(n):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        return statistics.median(times)


@dataclass
class Stamp:
    """Fills the provenance fields of every record (model, GPU label, environment, command, time)."""

    env: Environment
    gpu: str
    model: str = ""
    precision: str = "bf16"
    kv_precision: str = ""
    source: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)

    def __call__(self, kind: str, value: float, **fields: Any) -> Record:
        rec = Record(
            kind=kind,
            model=self.model,
            gpu=self.gpu,
            engine="torch",
            precision=self.precision,
            kv_precision=self.kv_precision,
            value=float(value),
            unit="s",
            source=self.source,
            gpu_name=self.env.gpu_name,
            driver=self.env.driver,
            torch_version=self.env.torch_version,
            clocks=self.env.clocks,
            timestamp=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        return replace(rec, **{**self.defaults, **fields})
