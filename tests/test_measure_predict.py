"""Predictions for the records the torch harness writes: every kind and operator priced, scaling the right way,
fit-able; one layer-truncation rule for harness and predictor; errors naming the CSV row (no torch needed)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from infercast.calibrate.predict import deployment_of, predict_record
from infercast.calibrate.profile_fit import build_profiles, fit
from infercast.calibrate.validation import compare
from infercast.errors import InfercastError
from infercast.records.readers import read_records
from infercast.records.record import Record, write_records
from infercast.specs.catalog import get_model
from infercast.specs.sharding import rank_linears
from infercast.specs.truncate import is_sliding_layer, sliding_layers, truncated

MODEL, GPU = "llama-3.1-8b", "h100-sxm"
LENS, BATCHES, CONTEXTS = (128, 512, 2048, 8192), (1, 8, 32, 64), (512, 2048, 4096)
GPU_TOKEN_COUNTS = (1, 8, 32, 128, 512, 2048, 8192)  # microbench.GPU_TOKEN_COUNTS (that module needs torch)


def harness_records(model: str = MODEL, gpu: str = GPU) -> list[Record]:
    """Rows shaped exactly as runner/microbench write them for a `--suite full` run (values still unset)."""
    base = dict(model=model, gpu=gpu, engine="torch", precision="bf16", kv_precision="bf16", value=1.0, unit="s")
    rows = [
        Record(kind="prefill_step", batch=b, input_len=t, context=0, notes="eager", **base)
        for b in BATCHES
        for t in LENS
        if b * t <= 16384
    ]
    rows += [
        Record(kind="decode_step", batch=b, context=c, notes="cuda_graph", **base) for b in BATCHES for c in CONTEXTS
    ]
    for t in LENS:
        rows.append(Record(kind="ttft", batch=1, input_len=t, output_len=128, notes="prefill+argmax", **base))
        rows.append(Record(kind="tpot", batch=1, input_len=t, output_len=128, notes="greedy loop", **base))
    shapes = []
    for lin in rank_linears(get_model(model), tp=1, ep=1):  # microbench.gemm_shapes
        if lin.name != "embedding" and (lin.name, int(lin.k), int(lin.n)) not in shapes:
            shapes.append((lin.name, int(lin.k), int(lin.n)))
    rows += [Record(kind="gemm", op=name, m=m, n=n, k=k, **base) for name, k, n in shapes for m in GPU_TOKEN_COUNTS]
    rows.append(Record(kind="gemm", op="peak_matmul", m=8192, n=8192, k=8192, **base))
    rows += [Record(kind="op", op="attention_prefill", batch=1, input_len=t, layers=1, **base) for t in LENS]
    rows += [
        Record(kind="op", op="attention_decode", batch=b, context=c, layers=1, **base)
        for b in BATCHES
        for c in CONTEXTS
    ]
    no_precision = base | {"precision": ""}
    rows += [
        Record(kind="hbm_copy", op="d2d_copy", bytes=float(2 * size), **no_precision) for size in (256 << 20, 1 << 30)
    ]
    rows += [Record(kind="launch_overhead", op=op, **no_precision) for op in ("eager", "cuda_graph")]
    return rows


def _op(op: str, **shape: int) -> Record:
    return Record(kind="op", model=MODEL, gpu=GPU, engine="torch", op=op, layers=1, value=1.0, **shape)


def test_every_harness_record_is_predicted_finite_and_positive() -> None:
    records = harness_records()
    assert {r.kind for r in records} == {
        "prefill_step",
        "decode_step",
        "ttft",
        "tpot",
        "gemm",
        "op",
        "hbm_copy",
        "launch_overhead",
    }
    for rec in records:
        value = predict_record(rec)
        assert math.isfinite(value) and value > 0, (rec.kind, rec.op, value)


def test_harness_operators_scale_with_their_work() -> None:
    short, long = (
        predict_record(_op("attention_prefill", input_len=128)),
        predict_record(_op("attention_prefill", input_len=8192)),
    )
    # causal pairs grow 4096x; the measured fixed time per prefill-attention kernel (~20 us) stays
    assert long > 30 * short
    decode = [predict_record(_op("attention_decode", batch=8, context=c)) for c in (512, 2048, 4096)]
    # KV reads grow 8x over a measured ~11 us fixed time per decode-attention kernel (H100, FlashAttention-3)
    assert decode[0] < decode[1] < decode[2] and decode[2] > 2.5 * decode[0]
    assert predict_record(_op("attention_decode", batch=64, context=2048)) > 4 * decode[1]
    # a decode step is not priced as a prefill of `batch` tokens: the decode op has a cost of its own
    assert predict_record(_op("attention_decode", batch=8, context=512)) != predict_record(
        _op("attention_prefill", input_len=8)
    )


def test_launch_overhead_variants_use_their_own_parameter() -> None:
    profile = build_profiles([(GPU, "torch")], {"torch:kernel_overhead_graph_s": 1.5e-6}, "test")
    rec = Record(kind="launch_overhead", gpu=GPU, engine="torch", precision="", value=1.0)
    assert predict_record(replace(rec, op="cuda_graph"), profile) == pytest.approx(1.5e-6)
    eager = profile[f"{GPU}/torch"].kernel_overhead_eager_s
    assert predict_record(replace(rec, op="eager"), profile) == pytest.approx(eager) != pytest.approx(1.5e-6)


def test_published_operator_rows_keep_their_meaning() -> None:
    """Vidur's op rows time one GEMM on `batch` tokens (measured 0.987 ms at 4096 tokens, 0.064 ms at 1)."""
    up = Record(kind="op", model="llama-2-7b", gpu=GPU, engine="torch-eager", op="mlp_up_proj", value=1.0)
    big, one = predict_record(replace(up, batch=4096)), predict_record(replace(up, batch=1))
    assert big == pytest.approx(0.987e-3, rel=0.1) and one == pytest.approx(0.064e-3, rel=0.1)


def test_harness_records_fit_and_recover_attention_efficiencies() -> None:
    """Harness-shaped rows generated by the cost model itself: every prediction is finite and positive and the
    fit recovers the parameters that made them (it used to see log(0) for attention_decode and fit nothing)."""
    truth = {
        f"{GPU}/attn_prefill_efficiency": 0.42,
        f"{GPU}/attn_decode_efficiency": 0.66,
        f"{GPU}/hbm_efficiency": 0.83,
        "torch:kernel_overhead_graph_s": 1.7e-6,
    }
    profiles = build_profiles([(GPU, "torch")], truth, "truth")
    records = [r for r in harness_records() if r.kind in ("op", "hbm_copy", "launch_overhead", "decode_step")]
    for r in records:
        r.value = predict_record(r, profiles)
    result = fit(records, parameters=list(truth), prior_weight=1e-4)
    assert np.isfinite(result.before).all() and np.isfinite(result.after).all()
    assert set(result.values) == set(truth)
    for name, value in truth.items():
        assert result.values[name] == pytest.approx(value, rel=0.03), name


@pytest.mark.parametrize("model", ["gemma-2-9b", "gpt-oss-20b"])
def test_one_truncation_rule_for_harness_and_predictor(model: str) -> None:
    spec = get_model(model)
    expected = [1, 1, 2, 2, 3, 3]  # alternating, layer 0 sliding (Gemma 2, gpt-oss)
    for depth in range(1, 7):
        harness = [i for i in range(depth) if is_sliding_layer(spec, i)]
        assert len(harness) == sliding_layers(spec, depth) == expected[depth - 1]
        rec = Record(kind="prefill_step", model=model, gpu=GPU, batch=1, input_len=128, layers=depth, value=1.0)
        priced = deployment_of(rec).model
        assert priced.num_layers == depth and priced.num_sliding_layers == len(harness), depth
        assert priced == truncated(spec, depth)
    assert sliding_layers(spec, spec.num_layers) == spec.num_sliding_layers
    assert truncated(spec, 0) is spec and truncated(spec, spec.num_layers) is spec


def test_prediction_errors_name_the_file_and_row(tmp_path) -> None:
    path = tmp_path / "m.csv"
    good = Record(kind="decode_step", model=MODEL, gpu=GPU, batch=8, context=512, value=0.01)
    write_records(path, [good, replace(good, gpu="h100-sxn")], header_comment="two rows")
    records = read_records(path)
    with pytest.raises(InfercastError, match=r"m\.csv:4: gpu: unknown value 'h100-sxn'; did you mean h100-sxm"):
        compare(records)
    with pytest.raises(InfercastError, match=r"m\.csv:4: gpu"):
        fit(records)
    bad_model = replace(records[0], model="llama-9", origin=f"{path}:3")
    with pytest.raises(InfercastError, match=r"m\.csv:3: model"):
        compare([bad_model])


def test_gemm_records_move_their_precisions_bytes():
    """A memory-bound GEMM (one row, a 8192 x 8192 weight) streams the weight at the record's operand width: an
    fp8 record (e4m3 operands) takes about half the time of a bf16 one and an fp32 record twice."""
    from infercast.calibrate.predict import predict_record

    def gemv(precision: str) -> float:
        return predict_record(
            Record(kind="gemm", gpu="h100-sxm", engine="torch", precision=precision, m=1, n=8192, k=8192, value=1.0)
        )

    bf16, fp8, fp32 = gemv("bf16"), gemv("fp8"), gemv("fp32")
    assert 0.45 < fp8 / bf16 < 0.6
    assert 1.8 < fp32 / bf16 < 2.1
