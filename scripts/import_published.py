"""Convert ../shared/reference/published_measurements.csv into infercast measurement records.

Usage:  python scripts/import_published.py [path/to/published_measurements.csv]
Writes: data/measurements/published/reference.csv

Every row keeps its source. Interpretation choices (each stated in the row's notes):
- TensorRT-LLM v0.6.1 FP8 static-batch throughputs on H100 need an FP8 KV cache to fit the stated batches
  (e.g. Llama-2-7B at batch 768 x 256 tokens needs 100 GB of BF16 KV), so kv_precision=fp8 for those rows.
- Per-GPU throughputs are multiplied by tp to get the replica's throughput; the A100 table's "out tok/s"
  is read as per GPU like the H100 table of the same document (the reference notes call it ambiguous).
- LambdaLabs vLLM runs (10 ShareGPT prompts sent at once, ~137 prompt tokens each, natural output lengths)
  are serving measurements (serving_ttft / serving_tpot): the simulator predicts them, replaying 10
  requests of 137 prompt tokens arriving together (output length 256 assumed: the lengths are not
  published; decode at batch <= 10 is dominated by weight reads, so it matters little).
- Vidur operator profiles are single eager-mode GEMMs (engine torch-eager).
- Rows on hardware outside the catalog (the nano-vllm laptop GPU) are skipped.
- DEVICE_NOTES adds four micro-benchmark readings taken on the borrowed H100/H200 machines (see there).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from infercast.records.record import Record, write_records  # noqa: E402

MODELS = {
    "Llama-2-7B": "llama-2-7b",
    "Llama-2-70B": "llama-2-70b",
    "Meta-Llama-3-8B-Instruct": "llama-3-8b",
    "Meta-Llama-3-70B-Instruct": "llama-3-70b",
    "Meta-Llama-3-8B": "llama-3-8b",
}
GPUS = {
    "H100 SXM 80GB": "h100-sxm",
    "H100 (SXM assumed)": "h100-sxm",
    "A100 80GB": "a100-80gb",
    "A100 SXM 80GB": "a100-80gb",
}
PRECISION = {"FP8": ("fp8", "fp8"), "FP16": ("fp16", "fp16"), "BF16": ("bf16", "bf16"), "FP16/BF16": ("bf16", "bf16")}
SHAREGPT_MEAN_INPUT = 137  # 1369 prompt tokens over 10 prompts (reference notes)
SHAREGPT_OUTPUT = 256  # outputs ended at EOS (lengths not published); decode at batch <= 10 barely depends on it


def convert(row: dict[str, str]) -> Record | None:
    gpu = GPUS.get(row["hardware"])
    model = MODELS.get(row["model"])
    if gpu is None or model is None:
        return None
    precision, kv = PRECISION[row["precision"]]
    tp = int(row["tp"])
    metric, value, _unit = row["metric"], float(row["value"]), row["unit"]
    engine = (
        "trtllm-0.6"
        if row["engine"].startswith("TensorRT")
        else "vllm-0.6"
        if row["engine"].startswith("vLLM")
        else ("torch-eager")
    )
    base = dict(
        model=model,
        gpu=gpu,
        engine=engine,
        precision=precision,
        kv_precision=kv,
        tp=tp,
        source=row["source"],
        notes=row["notes"],
    )
    if metric.startswith("output_throughput"):
        isl, osl, batch = int(row["isl"]), int(row["osl"]), int(row["concurrency_or_batch"])
        return Record(
            kind="static_throughput", batch=batch, input_len=isl, output_len=osl, value=value * tp, unit="tok/s", **base
        )
    if metric == "ttft" and engine == "trtllm-0.6":
        return Record(kind="ttft", batch=1, input_len=int(row["isl"]), output_len=1, value=value, unit="ms", **base)
    if metric.startswith("ttft"):
        return Record(
            kind="serving_ttft",
            num_prompts=10,
            statistic="mean",
            input_len=SHAREGPT_MEAN_INPUT,
            output_len=SHAREGPT_OUTPUT,
            value=value,
            unit="ms",
            **base,
        )
    if metric == "tpot_median":
        return Record(
            kind="serving_tpot",
            num_prompts=10,
            statistic="median",
            input_len=SHAREGPT_MEAN_INPUT,
            output_len=SHAREGPT_OUTPUT,
            value=value,
            unit="ms",
            **base,
        )
    if metric.startswith("op_time_"):
        tokens = int(row["concurrency_or_batch"].split("=")[1])
        return Record(kind="op", op=metric.removeprefix("op_time_"), batch=tokens, value=value, unit="ms", **base)
    raise ValueError(f"unhandled metric {metric!r}")


# GEMM and copy rates read on the GPU machines this project borrows, as recorded in the lending service's
# machine notes (its KINDS.md; outside this repository, so each row's `source` quotes the reading in full: the
# machine, the date and the figure). An 8192^3 bf16 matrix product on random data, mean of 10 products after 3
# warm-ups; device-to-device copies count bytes read plus written.
DEVICE_NOTES = [
    Record(
        kind="gemm",
        gpu="h100-sxm",
        engine="torch-eager",
        precision="bf16",
        m=8192,
        n=8192,
        k=8192,
        value=2 * 8192**3 / 798e12,
        source="device notes, nvidia-h100-x1 (2026-11-13): 8192^3 bf16 GEMM at 798 TFLOP/s",
    ),
    Record(
        kind="hbm_copy",
        gpu="h100-sxm",
        engine="torch-eager",
        bytes=8.6e9,
        value=8.6e9 / 3.0e12,
        source="device notes, nvidia-h100-x1 (2026-11-13): device-to-device copy ~3.0 TB/s (read + write)",
    ),
    Record(
        kind="gemm",
        gpu="h200",
        engine="torch-eager",
        precision="bf16",
        m=8192,
        n=8192,
        k=8192,
        value=2 * 8192**3 / 788e12,
        source="device notes, nvidia-h200 (2026-10-28): 8192^3 bf16 GEMM at 788 TFLOP/s",
    ),
    Record(
        kind="hbm_copy",
        gpu="h200",
        engine="torch-eager",
        bytes=8.6e9,
        value=2.0e-3,
        source="device notes, nvidia-h200 (2026-10-28): 8.6 GB device-to-device copy in 2.0 ms (~4.3 TB/s)",
    ),
]


def main() -> None:
    src = (
        Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "reference" / "published_measurements.csv"
    )
    with src.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    records = [r for r in (convert(row) for row in rows) if r is not None]
    records += DEVICE_NOTES
    out = ROOT / "data" / "measurements" / "published" / "reference.csv"
    write_records(out, records, header_comment="generated by: python scripts/import_published.py (see its docstring)")
    print(f"wrote {len(records)} records ({len(rows) - (len(records) - len(DEVICE_NOTES))} skipped) to {out}")


if __name__ == "__main__":
    main()
