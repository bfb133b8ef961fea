"""``predict`` and ``sweep``: the two-phase report, its physical floors, agreement between the scalar and the
vectorised paths, and clear errors for bad scenarios."""

from __future__ import annotations

import numpy as np
import pytest

import infercast
from infercast.errors import DoesNotFitError, InfercastError


def test_two_phase_report_at_batch_one():
    p = infercast.predict("llama-3.1-8b", "h100-sxm", input_len=2048, output_len=256)
    assert p.prefill.bound == "compute" and p.decode.bound == "memory"
    assert p.prefill.arithmetic_intensity > p.prefill.ridge_point > p.decode.arithmetic_intensity
    assert p.ttft_s > p.prefill.time_s  # plus the per-request overhead
    assert p.e2e_s == pytest.approx(p.ttft_s + p.tpot_s * 255)
    assert p.output_throughput_tok_s == pytest.approx(256 / p.e2e_s)
    assert p.itl_s == pytest.approx(p.tpot_s)  # one stream: the batch is the stream
    # shares add up; the per-operator table covers the phase
    assert sum(p.decode.time_share_by_ceiling.values()) == pytest.approx(1.0)
    assert sum(p.decode.time_share_by_group.values()) == pytest.approx(1.0)
    ops = p.decode.ops
    assert sum(o.flops for o in ops) == pytest.approx(p.decode.flops_per_gpu)
    assert sum(o.time_s for o in ops) <= p.decode.time_s
    assert any("memory-bound" in tip for tip in p.advice)


def test_decode_becomes_compute_bound_at_large_batch_and_short_context():
    p = infercast.predict("llama-3.1-8b", "h100-sxm", input_len=128, output_len=16, batch=512)
    assert p.decode.bound == "compute"


def test_floors_hold_for_every_engine():
    """No engine decodes faster than streaming the weights, or prefills faster than the tensor-core peak."""
    hw = infercast.get_hardware("h100-sxm")
    for engine in ("ideal", "vllm", "sglang", "trtllm"):
        p = infercast.predict("llama-3.1-70b", "h100-sxm", tp=4, precision="fp8", input_len=4096, output_len=128,
                              engine=engine)  # fmt: skip
        assert p.tpot_s >= 70.6e9 / 4 / hw.memory.bandwidth_bytes_s  # fp8 weights per GPU over HBM bandwidth
        assert p.prefill.time_s >= p.prefill.flops_per_gpu / hw.peak("fp8")


def test_faster_hardware_and_narrower_formats_help_the_phase_they_should():
    base = infercast.predict("llama-3.1-8b", "h100-sxm", input_len=2048, output_len=256)
    h200 = infercast.predict("llama-3.1-8b", "h200", input_len=2048, output_len=256)
    fp8 = infercast.predict("llama-3.1-8b", "h100-sxm", precision="fp8", input_len=2048, output_len=256)
    w4 = infercast.predict("llama-3.1-8b", "h100-sxm", precision="int4", input_len=2048, output_len=256)
    assert h200.tpot_s < 0.9 * base.tpot_s  # 4.8 vs 3.35 TB/s
    assert h200.prefill.time_s == pytest.approx(base.prefill.time_s, rel=0.1)  # same tensor cores
    assert fp8.prefill.time_s < 0.8 * base.prefill.time_s and fp8.tpot_s < base.tpot_s
    assert w4.tpot_s < fp8.tpot_s  # 4-bit weights stream fewer bytes
    assert w4.prefill.time_s > 0.9 * base.prefill.time_s  # W4A16 still computes at 16 bits


def test_batching_trades_latency_for_throughput():
    runs = [infercast.predict("llama-3.1-8b", "h100-sxm", input_len=1024, output_len=256, batch=b) for b in (1, 8, 64)]
    tput = [r.output_throughput_tok_s for r in runs]
    tpot = [r.tpot_s for r in runs]
    assert tput[0] < tput[1] < tput[2]
    assert tpot[0] < tpot[1] < tpot[2]
    assert tpot[1] < 2 * tpot[0]  # decode at batch 8 still mostly streams the same weights


def test_tpot_grows_with_context():
    short = infercast.predict("llama-3.1-8b", "h100-sxm", input_len=256, output_len=128, batch=8)
    long = infercast.predict("llama-3.1-8b", "h100-sxm", input_len=32000, output_len=128, batch=8)
    # 8 x 32K tokens x 128 KiB = 34 GB of KV, read by every decode step: twice the weights' 16 GB
    assert long.tpot_s > 2 * short.tpot_s
    assert long.memory.kv_cache_bytes > 50 * short.memory.kv_cache_bytes
    with pytest.raises(DoesNotFitError, match=r"at most \d+ sequences fit"):
        infercast.predict("llama-3.1-8b", "h100-sxm", input_len=32000, output_len=128, batch=16)


def test_chunked_prefill_is_never_faster_than_one_pass():
    whole = infercast.predict("llama-3.1-8b", "h100-sxm", input_len=8192, output_len=2)
    chunked = infercast.predict("llama-3.1-8b", "h100-sxm", input_len=8192, output_len=2, chunk_size=512)
    assert chunked.prefill.steps == 16
    assert chunked.ttft_s >= whole.ttft_s
    assert chunked.prefill.flops == pytest.approx(whole.prefill.flops, rel=1e-9)  # same work, more passes


@pytest.mark.parametrize(
    "kw",
    [
        dict(models="llama-3.1-8b", gpus=["h100-sxm", "a100-80gb"], precisions=["bf16", "int4"]),
        dict(models="mixtral-8x7b", gpus="h100-sxm", tps=[2, 4], eps=[1, 2]),
        dict(models="gemma-2-9b", gpus="l40s", precisions="fp8"),
    ],
)
def test_sweep_rows_equal_predict(kw):
    df = infercast.sweep(batches=[1, 4, 32], input_lens=[128, 3000], output_lens=[2, 300], **kw)
    assert len(df) > 0
    for row in df.sample(n=min(len(df), 8), random_state=0).itertuples():
        p = infercast.predict(row.model, row.gpu, precision=row.precision, tp=row.tp, ep=row.ep, batch=row.batch,
                              input_len=row.input_len, output_len=row.output_len, strict=False)  # fmt: skip
        assert row.ttft_s == pytest.approx(p.ttft_s, rel=1e-9)
        assert row.tpot_s == pytest.approx(p.tpot_s, rel=1e-9)
        assert row.e2e_s == pytest.approx(p.e2e_s, rel=1e-9)
        assert row.output_throughput_tok_s == pytest.approx(p.output_throughput_tok_s, rel=1e-9)
        assert bool(row.fits) == p.memory.fits


def test_sweep_skips_invalid_groups_and_says_why():
    df = infercast.sweep(models="llama-3.1-8b", gpus=["a100-80gb", "h100-sxm"], precisions="fp8")
    assert set(df["gpu"]) == {"h100-sxm"}
    assert "fp8" in df.attrs["skipped"][0]["reason"]
    with pytest.raises(InfercastError) as err:
        infercast.sweep(batches=[0, 4])
    assert err.value.field == "batches"


def test_does_not_fit_says_why_unless_asked_to_predict_anyway():
    with pytest.raises(DoesNotFitError) as err:
        infercast.predict("llama-3.1-70b", "l4", input_len=1024, output_len=128)
    assert "GB" in str(err.value)
    p = infercast.predict("llama-3.1-70b", "l4", input_len=1024, output_len=128, strict=False)
    assert not p.memory.fits and p.ttft_s > 0


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        (dict(input_len=-5, output_len=10), "input_len"),
        (dict(input_len=10, output_len=0), "output_len"),
        (dict(input_len=10, output_len=10, batch=0), "batch"),
        (dict(input_len=10, output_len=10, chunk_size=0), "chunk_size"),
        (dict(input_len=200_000, output_len=10), "input_len"),
        (dict(input_len=10, output_len=10, precision="fp7"), "precision"),
        (dict(input_len=10, output_len=10, tp=3), "tp"),
        (dict(input_len=10, output_len=10, engine="tgi-9"), "engine"),
    ],
)
def test_bad_scenarios_name_the_field(kw, field):
    with pytest.raises(InfercastError) as err:
        infercast.predict("llama-3.1-8b", "h100-sxm", **kw)
    assert err.value.field == field


def test_precision_the_chip_cannot_run_lists_what_it_can():
    with pytest.raises(InfercastError) as err:
        infercast.predict("llama-3.1-8b", "a100-80gb", precision="fp8", input_len=10, output_len=10)
    assert err.value.field == "precision"
    assert "bf16" in str(err.value)


def test_predict_results_are_finite_and_positive_across_the_catalog():
    for model in ("qwen3-30b-a3b", "deepseek-v3", "gpt-oss-120b", "phi-3-mini", "llama-3.2-1b"):
        gpu, tp = ("h200", 8) if model == "deepseek-v3" else ("h100-sxm", 1)
        p = infercast.predict(model, gpu, tp=tp, input_len=1000, output_len=100, strict=False)
        values = np.array([p.ttft_s, p.tpot_s, p.e2e_s, p.output_throughput_tok_s])
        assert np.isfinite(values).all() and (values > 0).all()
