"""infercast's predictions against its own harness timed on a real H100 (``data/harness/h100-sxm/``).

None of these rows is fitted: they sit outside ``data/measurements/`` (see that folder's README). Each row is
predicted under three layers of the cost profile, to show what each source of parameters is worth on real
silicon:

* ``priors``: the architecture priors alone (``profiles/defaults.yaml``);
* ``measured kernels``: plus the kernel parameters fitted to aiconfigurator's H100 tables
  (``profiles/kernels/h100-sxm.yaml``; vLLM 0.24's GEMMs, attention and fused MoE);
* ``installed``: plus the end-to-end fits every prediction uses (``profiles/h100-sxm.yaml``, ``engine_load.yaml``).

Rows are grouped by what they time. The kernel groups (GEMMs, copies, peak matmul) test the GPU's kernel
parameters. The step groups test the cost model's composition of the ``torch`` engine, which is this harness:
unfused PyTorch layers, SDPA attention, eager prefill and graph-replayed decode.

A second table reads the rate of SDPA's decode attention off the decode steps: the extra time of a step at 4096
context tokens over one at 512, per KV byte, is the bandwidth decode attention reached, and per thread block
(one per sequence and KV head: SDPA does not split a sequence's KV across blocks) it is the ``torch`` engine's
``decode_attn_cta_bytes_s`` prior (``profiles/defaults.yaml``).

    python benchmarks/harness_h100.py [--data DIR] [--write]     # --write: benchmarks/harness_h100.md
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from infercast.calibrate.harness_fit import same_token_moe_step
from infercast.calibrate.validation import compare
from infercast.cost.profile import load_profile
from infercast.records.readers import load_records
from infercast.records.record import Record
from infercast.specs.catalog import get_hardware, get_model

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {
    "priors": {"fitted": False, "measured": False},
    "measured kernels": {"fitted": False, "measured": True},
    "installed": {"fitted": True, "measured": True},
}
SMALL_M = 128
"""GEMMs of at most this many rows stream their weights (memory-bound on H100); larger ones are compute-bound."""


def group_of(rec: Record) -> str:
    """What a row times, at the grain its error says something about."""
    if rec.kind == "gemm":
        if rec.op == "peak_matmul":
            return f"gemm {rec.precision} 8192^3"
        return f"gemm {rec.precision} M {'<=' if rec.m <= SMALL_M else '>'} {SMALL_M}"
    if rec.kind == "op" and rec.op == "attention_decode":
        return f"attention_decode batch {'1' if rec.batch == 1 else '>= 8'}"
    if rec.kind == "op":
        return rec.op
    if rec.kind == "launch_overhead":
        return f"launch ({rec.op})"
    if rec.kind == "hbm_copy":
        return "hbm copy"
    depth = f" ({rec.layers} layers)" if rec.layers else ""
    same = ", same token in every sequence: left out of the fit" if same_token_moe_step(rec) else ""
    return f"{rec.kind} {rec.model}{depth}{same}"


def profiles_for(records: list[Record], layer: dict[str, bool]) -> dict:
    """The cost profiles of one layer, keyed 'gpu/engine' as :func:`infercast.calibrate.validation.compare` wants."""
    out = {}
    for gpu, engine in {(r.gpu, r.engine) for r in records}:
        hw = get_hardware(gpu)
        out[f"{gpu}/{engine}"] = load_profile(hw.id, hw.architecture, engine, **layer)
    return out


def table(records: list[Record]) -> list[str]:
    """Markdown rows: per group, median |error| and signed median under each profile layer."""
    errors: dict[str, dict[str, list[float]]] = {}
    for name, layer in LAYERS.items():
        for row in compare(records, profiles_for(records, layer)):
            errors.setdefault(group_of(row.record), {}).setdefault(name, []).append(row.error)
    head = "| what | points | " + " | ".join(f"{n}: median / signed" for n in LAYERS) + " |"
    lines = [head, "|" + "---|" * (2 + len(LAYERS))]
    for group in sorted(errors):
        cells = []
        for name in LAYERS:
            e = np.asarray(errors[group][name])
            cells.append(f"{np.median(np.abs(e)):.1%} / {np.median(e):+.1%}")
        lines.append(f"| {group} | {len(errors[group]['installed'])} | " + " | ".join(cells) + " |")
    return lines


def decode_attention_rates(records: list[Record], short: int = 512, long: int = 4096) -> list[str]:
    """Markdown rows: the bandwidth decode attention reached in the harness's decode steps, (long - short) context
    tokens' KV bytes over the time they added, in all and per thread block (sequences x KV heads)."""
    steps: dict[tuple[str, int, int], dict[int, float]] = {}
    for r in records:
        if r.kind == "decode_step":
            steps.setdefault((r.model, r.batch, r.layers), {})[r.context] = r.value_si
    lines = ["| model | layers | batch | thread blocks | TB/s | GB/s per block |", "|---|---|---|---|---|---|"]
    for (model, batch, layers), by_ctx in sorted(steps.items()):
        if short not in by_ctx or long not in by_ctx:
            continue
        spec = get_model(model)
        depth = layers or spec.num_layers
        kv_bytes = (long - short) * batch * depth * spec.num_kv_heads * spec.head_dim * 2 * 2  # K and V, 16-bit
        rate = kv_bytes / (by_ctx[long] - by_ctx[short])
        blocks = batch * spec.num_kv_heads
        lines.append(f"| {model} | {depth} | {batch} | {blocks} | {rate / 1e12:.2f} | {rate / blocks / 1e9:.1f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "harness" / "h100-sxm")
    parser.add_argument("--write", action="store_true", help="also write benchmarks/harness_h100.md")
    args = parser.parse_args()
    records = load_records([args.data])
    lines = [
        f"# Harness on H100: {len(records)} rows of `{args.data.relative_to(ROOT)}` against infercast",
        "",
        "Generated by `python benchmarks/harness_h100.py --write`. Error = predicted / measured - 1; "
        "signed < 0: infercast too fast.",
        "",
        *table(records),
        "",
        "## Decode attention per thread block",
        "",
        "Decode steps at 4096 against 512 context tokens (16-bit KV): the bandwidth decode attention reached, and "
        "per thread block (sequences x KV heads). Few blocks: each streams ~40 GB/s (head size 128; 28 GB/s at 64); "
        "from ~128 blocks the GPU's bandwidth binds.",
        "",
        *decode_attention_rates(records),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        (ROOT / "benchmarks" / "harness_h100.md").write_text(text)


if __name__ == "__main__":
    main()
