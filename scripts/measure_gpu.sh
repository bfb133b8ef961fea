#!/usr/bin/env bash
# Measure the torch harness (random weights, real shapes) on one GPU and write CSVs under
# data/harness/<gpu-id>/ (h100-sxm on an "NVIDIA H100 80GB HBM3"; DEST=<folder> to choose another), packed into
# $OUT/measurements-<gpu-id>.tar.gz too when $OUT is set (one file after every step, so a run cut short keeps
# what it measured, and a host that fetches a limited number of files back gets them all). data/harness/ is
# outside data/measurements/, so the project's profile fit does not read these rows (data/harness/h100-sxm/
# README.md says why). <gpu-id> is the harness's own label for the device (infercast.harness.runner.
# device_label); a GPU the hardware catalog does not know stops the script: set GPU_ID=<catalog id> (see
# `infercast gpus`).
#
# Run from the repository root, from source (torch preinstalled, no network needed):
#     bash scripts/measure_gpu.sh              # every step (about 4.5 minutes of GPU time on an H100)
#     bash scripts/measure_gpu.sh llama1b      # one or more named steps, e.g. to stay under a per-command limit
# Steps: env llama1b llama8b qwen8b extrapolate qwen30b fp8 flush
#
# Entry point: `python3 -m infercast.harness run ...` (src/infercast/harness/__main__.py) is `infercast measure`
# run from source: same options. Besides torch it needs pydantic and PyYAML (and the CLI's typer, rich, numpy,
# scipy, pandas). A box without internet that lacks one gets it carried in as wheels: download them elsewhere
# (`pip download --only-binary=:all: pydantic pydantic-core annotated-types typing-inspection -d wheels/`), then
# `pip install --no-index --target /tmp/site wheels/*.whl` and `export PYTHONPATH=/tmp/site` before this script.
set -euo pipefail

cd "$(dirname "$0")/.."
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}

preflight() {  # preflight PYTHON-STATEMENT WHAT
  local why
  if ! why=$($PY -c "$1" 2>&1); then
    echo "measure_gpu.sh: $PY cannot run '$1' ($2): $(tail -n 1 <<<"$why")" >&2
    echo "install what is missing, or carry it in as wheels (see the comment at the top of this script)" >&2
    exit 2
  fi
}
preflight 'import torch, pydantic, yaml' "torch, pydantic and PyYAML"
preflight 'import infercast.cli.measure_cmd' "the measurement entry point"

if [[ -z "${GPU_ID:-}" ]]; then
  # The runner's own labelling: the catalog id of the detected device, never a guess.
  GPU_ID=$($PY -c '
import sys

import torch

from infercast.harness.runner import device_label

if not torch.cuda.is_available():
    sys.exit(f"measure_gpu.sh: torch {torch.__version__} sees no CUDA GPU; this script measures a GPU")
label, warnings = device_label(torch.cuda.get_device_name())
if warnings:
    sys.exit("measure_gpu.sh: " + "; ".join(warnings) + ". Set GPU_ID=<catalog id> (see `infercast gpus`).")
print(label)
') || exit 2
fi
DEST=${DEST:-data/harness/$GPU_ID}
mkdir -p "$DEST"

# Same sweep for every model so rows line up across models and against extrapolations.
LENS=128,512,2048,8192
BATCHES=1,8,32,64
CONTEXTS=512,2048,4096
COMMON=(--gpu "$GPU_ID" --prefill-lens "$LENS" --batches "$BATCHES" --contexts "$CONTEXTS" --output-len 128)

measure() {  # measure OUTFILE ARGS...
  local out=$1
  shift
  echo "+ $PY -m infercast.harness run --out $DEST/$out $*" >&2
  local t0=$SECONDS
  $PY -m infercast.harness run --out "$DEST/$out" "$@"
  echo "  ($out: $((SECONDS - t0)) s)" >&2
}

publish() {  # pack what exists so far into $OUT/measurements-<gpu-id>.tar.gz (one file, however many steps ran)
  if [[ -n "${OUT:-}" ]]; then
    tar -czf "$OUT/measurements-$GPU_ID.tar.gz.part" -C "$(dirname "$DEST")" "$(basename "$DEST")" \
      && mv -f "$OUT/measurements-$GPU_ID.tar.gz.part" "$OUT/measurements-$GPU_ID.tar.gz"
  fi
}

step_env() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,memory.total --format=csv \
    | tee "$DEST/environment.txt" || true
  $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())" \
    | tee -a "$DEST/environment.txt"
}

step_llama1b() {
  # Full suite: steps + microbenchmarks (GEMMs, attention, copy bandwidth, peak matmul, launch overhead).
  measure llama-3.2-1b-bf16.csv --model llama-3.2-1b --suite full "${COMMON[@]}"
}

step_llama8b() {
  measure llama-3.1-8b-bf16.csv --model llama-3.1-8b --suite full "${COMMON[@]}"
}

step_qwen8b() {
  measure qwen3-8b-bf16.csv --model qwen3-8b --suite full "${COMMON[@]}"
}

step_extrapolate() {
  # Llama-3.1-8B at 4 and 8 of its 32 layers, extrapolated to 32 and compared with the full run of step_llama8b
  # (same sweep minus the batched prefill rows, which the quick suite does not run).
  measure llama-3.1-8b-bf16-L4-L8.csv --model llama-3.1-8b --suite quick --extrapolate-from 4,8 "${COMMON[@]}"
  if [[ -f "$DEST/llama-3.1-8b-bf16.csv" && -f "$DEST/llama-3.1-8b-bf16-L4-L8.extrapolated.csv" ]]; then
    # a failed comparison (e.g. no matching rows) is reported but does not stop the remaining steps
    if ! $PY -m infercast.harness compare "$DEST/llama-3.1-8b-bf16-L4-L8.extrapolated.csv" \
      "$DEST/llama-3.1-8b-bf16.csv" 2>&1 | tee "$DEST/llama-3.1-8b-extrapolation-vs-full.txt"; then
      echo "  (extrapolation check failed; see $DEST/llama-3.1-8b-extrapolation-vs-full.txt)" >&2
    fi
  fi
}

step_qwen30b() {
  # Qwen3-30B-A3B (MoE, 128 experts, top-8): the first 4 and 8 of 48 layers, extrapolated to 48.
  measure qwen3-30b-a3b-bf16-L4-L8.csv --model qwen3-30b-a3b --suite quick --extrapolate-from 4,8 "${COMMON[@]}"
}

step_flush() {
  # Lone GEMMs vs the same GEMMs in a layer stack, per L2-flush method (benchmarks/l2_flush_check.py).
  $PY benchmarks/l2_flush_check.py | tee "$DEST/l2_flush_check.txt"
}

step_fp8() {
  # fp8 (e4m3, per-tensor scales, torch._scaled_mm) GEMM microbenchmarks of Llama-3.1-8B's shapes.
  measure llama-3.1-8b-fp8-micro.csv --model llama-3.1-8b --suite micro --precision fp8 "${COMMON[@]}"
}

STEPS=("$@")
if [[ ${#STEPS[@]} -eq 0 ]]; then
  STEPS=(env llama1b llama8b qwen8b extrapolate qwen30b fp8 flush)
fi
for step in "${STEPS[@]}"; do
  if ! declare -F "step_$step" >/dev/null; then
    echo "unknown step '$step'; steps: env llama1b llama8b qwen8b extrapolate qwen30b fp8 flush" >&2
    exit 2
  fi
  "step_$step"
  publish
done
echo "measurements in $DEST" >&2
