"""Measured kernel tables: the aiconfigurator importer (on a tiny fixture), latency curves, collectives priced
by them, and the TP 8 decode check against measured closed-loop TPOT."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from infercast.calibrate.kernel_fit import build_kernel_profile, write_kernel_profile
from infercast.cost.curves import Curve, lerp_curves, monotone_floor
from infercast.cost.profile import load_profile, set_profile_override
from infercast.cost.step import StepCostModel
from infercast.errors import InfercastError
from infercast.records.kernel_tables import locate
from infercast.specs.deployment import Deployment
from infercast.specs.engine import get_engine

needs_pyarrow = pytest.mark.skipif(
    importlib.util.find_spec("pyarrow") is None, reason="the fixture tables are parquet: pip install -e '.[parquet]'"
)

FIXTURES = Path(__file__).parent / "fixtures"
AIC = FIXTURES / "aiconfigurator"


# ----- curves --------------------------------------------------------------------------------------------
def test_curve_is_exact_at_points_monotone_and_extrapolates_with_the_last_slope():
    c = Curve.from_points([128, 256, 512, 1024], [3e-6, 2.5e-6, 4e-6, 6e-6])
    assert c.seconds == (2.5e-6, 2.5e-6, 4e-6, 6e-6)  # the 3 us spike is lowered to the next size's time
    assert [c.scalar(x) for x in c.sizes] == list(c.seconds)
    assert c.scalar(1) == c.seconds[0]  # below the table: the latency floor
    assert c.scalar(2048) == pytest.approx(6e-6 + 1024 * (2e-6 / 512))  # beyond: the last segment's slope
    xs = np.geomspace(1, 1e7, 400)
    ys = c(xs)
    assert (np.diff(ys) >= 0).all()
    assert ys.tolist() == [c.scalar(x) for x in xs]  # vector and scalar paths agree bit for bit


def test_monotone_floor_never_raises_a_point():
    raw = [5.0, 38.0, 4.0, 6.0, 5.5, 9.0]
    out = monotone_floor(raw)
    assert all(o <= r for o, r in zip(out, raw, strict=True)) and out == sorted(out)


def test_curve_rejects_bad_tables():
    with pytest.raises(ValueError):
        Curve((1.0, 1.0), (1.0, 2.0))
    with pytest.raises(ValueError):
        Curve((1.0, 2.0), (2.0, 1.0))


def test_group_sizes_between_and_beyond_the_measured_ones():
    profile = load_profile("h100-sxm", "hopper", "vllm")
    two, eight = profile.collective_curve("all_reduce", 2), profile.collective_curve("all_reduce", 8)
    four = profile.collective_curve("all_reduce", 4)
    six = profile.collective_curve("all_reduce", 6)
    x = np.array([1e3, 1e5, 1e7])
    assert (six(x) >= np.minimum(four(x), eight(x)) - 1e-12).all()
    sixteen = profile.collective_curve("all_reduce", 16)
    assert (sixteen(x) >= eight(x)).all() and "scaled from 8 to 16" in sixteen.source
    assert lerp_curves(two, eight, 0.0, "").scalar(1e5) == pytest.approx(two.scalar(1e5))


# ----- importer ------------------------------------------------------------------------------------------
@needs_pyarrow
def test_importer_reads_the_fixture_tables_with_provenance(tmp_path):
    source = locate(AIC)
    assert source.version == "0.12.0"
    data = build_kernel_profile(source, "h100-sxm")
    ar = data["collectives"]["all_reduce"]["vllm"]
    assert ar["table"].startswith("comm/vllm/0.24.0/custom_allreduce_perf.parquet")
    assert set(ar["sizes"]) == {2, 8}
    # message_size counts bf16 elements: 128 elements are 256 bytes
    assert ar["sizes"][8]["bytes"][0] == 256
    table = "aiconfigurator_core/systems/data/h100_sxm/comm/vllm/0.24.0/custom_allreduce_perf.parquet"
    raw = pd.read_parquet(AIC / table)
    first = raw[(raw.num_gpus == 8) & (raw.backend == "vllm_graph") & (raw.message_size == 128)].latency.iloc[0]
    assert ar["sizes"][8]["us"][0] == pytest.approx(first * 1000, rel=1e-4)  # tables are in ms
    assert set(data["collectives"]) == {"all_reduce", "all_gather", "alltoall"}
    k = data["kernels"]
    assert 0.3 < k["hbm_efficiency"] <= 1 and 0.3 < k["gemm_eff_max"]["bf16"] <= 1
    assert 0 < k["gemm_latency_s"] < 5e-5 and 0 < k["attn_decode_latency_s"] < 1e-4
    assert "gemm/vllm/0.24.0/gemm_perf.parquet" in data["provenance"]["gemm_eff_max.bf16"]
    assert data["fit"]["gemm.bf16"]["points"] > 10 and data["fit"]["gemm.bf16"]["rms_log_residual"] < 0.3
    path = write_kernel_profile(data, tmp_path / "h100-sxm.yaml")
    assert "aiconfigurator-core 0.12.0" in path.read_text().splitlines()[1]


@needs_pyarrow
def test_written_profile_prices_the_allreduce(tmp_path):
    import yaml

    data = build_kernel_profile(locate(AIC), "h100-sxm")
    written = yaml.safe_load(write_kernel_profile(data, tmp_path / "k.yaml").read_text())
    curves = written["collectives"]["all_reduce"]["vllm"]["sizes"][8]
    curve = Curve.from_points(curves["bytes"], [t * 1e-6 for t in curves["us"]])
    model = StepCostModel(Deployment.resolve("qwen3-32b", "h100-sxm", tp=8))
    i = model.names.index("tp_allreduce")
    _, message, calls, installed = next(c for c in model.curves if c[0] == i)
    tokens = 8
    assert calls == 2 * 64 + 1
    assert installed.scalar(message[1] * tokens) == pytest.approx(curve.scalar(tokens * 5120 * 2), rel=1e-3)


def test_locate_without_tables_says_how_to_install(tmp_path):
    with pytest.raises(InfercastError) as err:
        locate(tmp_path)
    assert "pip install 'infercast[aiconfigurator]'" in str(err.value)
    with pytest.raises(InfercastError):
        locate(tmp_path / "missing")


# ----- collectives in the step model ---------------------------------------------------------------------
def test_tp8_allreduce_is_the_measured_custom_kernel_not_a_ring_floor():
    """H100 TP 8 decode of 8 tokens: ~8 us per all-reduce (vLLM custom all-reduce, CUDA graph), where the ring
    with a per-hop floor gave ~90 us."""
    model = StepCostModel(Deployment.resolve("qwen3-32b", "h100-sxm", tp=8))
    from infercast.cost.batch import StepBatch

    b = model.breakdown(StepBatch.uniform(decode_seqs=8, context=1024))
    i = b.names.index("tp_allreduce")
    per_call = (b.time_s[i, 0] - b.overhead_s[i, 0]) / 129
    assert 4e-6 < per_call < 12e-6
    assert b.bound[i, 0] == 2  # interconnect


def test_no_table_falls_back_to_the_ring():
    set_profile_override("h100-sxm", None)
    ideal = StepCostModel(Deployment.resolve("llama-3.1-8b", "h100-sxm", tp=2, engine="ideal"))
    assert ideal.curves == []


# ----- TP 8 decode vs measured closed-loop TPOT ----------------------------------------------------------
def test_tp8_decode_within_10_percent_of_measured_h100_points():
    """Closed-loop serving, concurrency 8, TP 8 on H100 (vLLM 0.12 and TensorRT-LLM 1.0, Qwen3-32B and
    Llama-3.1-8B; rows of closed_loop_h100.csv, from aiconfigurator-core 0.12.0's silicon_sample.csv), simulated as
    the benchmark ran (10 x C requests, lengths in [0.8 L, L]). Median |error| of mean TPOT <= 10 % (the
    issue's target; it was ~50 % with the ring all-reduce); no point beyond 30 %."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from tp_scaling import rows, simulated_tpot

    frame = rows(FIXTURES / "closed_loop_h100_tp8_c8.csv", 8, 8, None)
    assert len(frame) == 24
    errors = [simulated_tpot(r, requests_per_client=5) * 1e3 / r.tpot_ms_mean - 1 for _, r in frame.iterrows()]
    assert statistics.median(abs(e) for e in errors) <= 0.10, errors
    assert max(abs(e) for e in errors) <= 0.30, errors


# ----- CLI -----------------------------------------------------------------------------------------------
@needs_pyarrow
def test_calibrate_from_aiconfigurator_writes_kernel_profiles(tmp_path, capsys):
    from tests.cli_helpers import run_json

    out = run_json(capsys, "calibrate", "--from", f"aiconfigurator:{AIC}", "--gpu", "h100-sxm", "--out", str(tmp_path))
    assert out["profiles"][0]["gpu"] == "h100-sxm"
    written = tmp_path / "kernels" / "h100-sxm.yaml"
    assert written.is_file() and "collectives:" in written.read_text()


def test_calibrate_from_bad_sources_is_one_line(tmp_path, capsys):
    from tests.cli_helpers import run

    for args, field in (
        (["--from", "nvidia"], "from"),
        (["--from", f"aiconfigurator:{tmp_path}"], "from"),
        (["--from", f"aiconfigurator:{AIC}", "--gpu", "t4"], "gpu"),
    ):
        code, _out, err = run(capsys, "calibrate", *args, "--out", str(tmp_path))
        assert code == 2 and err.strip().count("\n") == 0 and err.startswith(f"error: {field}:"), err


# ----- fused MoE -----------------------------------------------------------------------------------------
MOE_TRUE = (0.55, 120.0, 0.8, 1.2e-5, 2.5)  # eff_max, m_half, hbm efficiency, s per GEMM kernel, pair passes


def _synthetic_moe_rows() -> pd.DataFrame:
    rows = []
    for h, inter, k, e in ((2048, 768, 8, 128), (7168, 2048, 8, 256), (4096, 14336, 2, 8)):
        for tp, ep in ((1, 1), (2, 1), (8, 1), (1, 8), (1, 4)):
            for t in (1, 4, 16, 64, 256, 1024, 4096, 16384):
                rows.append(
                    {
                        "num_tokens": t,
                        "hidden_size": h,
                        "inter_size": inter,
                        "topk": k,
                        "num_experts": e,
                        "moe_tp_size": tp,
                        "moe_ep_size": ep,
                    }
                )
    return pd.DataFrame(rows)


def test_moe_fit_recovers_known_parameters_from_synthetic_rows():
    from infercast.calibrate.kernel_fit import _store_moe, fit_moe, moe_layer_time, moe_shapes

    frame = _synthetic_moe_rows()
    peak, bw = 989e12, 3.35e12
    shapes = moe_shapes(frame, 2.0, 67e12, bw, 0.85, 4e-6)
    latency = moe_layer_time(shapes, peak, bw, MOE_TRUE)
    r = fit_moe(shapes, latency, peak, bw)
    got = (r["eff_max"], r["m_half"], r["hbm"], r["t0"], r["passes"])
    assert r["points"] == len(frame) and r["rms_log_residual"] < 1e-6
    assert got == pytest.approx(MOE_TRUE, rel=1e-3)
    assert "width_half" not in r  # no narrow-shard slowdown in these rows: five parameters
    kernels: dict = {}
    _store_moe(kernels, {}, "fp8", r, "synthetic")
    assert kernels["moe_width_half"] == {"fp8": 0.0}  # stored as none, so it overrides a base fit's term


def test_moe_fit_finds_a_narrow_shard_slowdown_where_the_rows_show_one():
    """Rows whose grouped GEMMs slow down as the experts' columns per rank narrow (w / (w + 300)) get the sixth
    parameter back; the step model applies it to a deployment's shard width."""
    from infercast.calibrate.kernel_fit import fit_moe, moe_layer_time, moe_shapes

    frame = _synthetic_moe_rows()
    peak, bw = 989e12, 3.35e12
    shapes = moe_shapes(frame, 2.0, 67e12, bw, 0.85, 4e-6)
    latency = moe_layer_time(shapes, peak, bw, (*MOE_TRUE, 300.0))
    r = fit_moe(shapes, latency, peak, bw)
    assert r["width_half"] == pytest.approx(300.0, rel=1e-2) and r["rms_log_residual"] < 1e-4


@needs_pyarrow
def test_importer_fits_the_fused_moe_table_with_provenance():
    data = build_kernel_profile(locate(AIC), "h100-sxm")
    k, fits = data["kernels"], data["fit"]
    for name in ("moe_eff_max", "moe_m_half", "moe_hbm_efficiency", "moe_latency_s", "moe_pair_passes"):
        assert set(k[name]) == {"bf16", "fp8"}
        assert "moe/vllm/0.24.0/moe_perf.parquet" in data["provenance"][f"{name}.bf16"]
    assert fits["moe.bf16"]["points"] == 351 and fits["moe.bf16"]["distribution"] == "balanced"
    # fp8: 128x128 block-scaled rows of vLLM's Triton fused MoE, not the FlashInfer CUTLASS rows of the table
    assert fits["moe.fp8"]["dtype"] == "fp8_block" and fits["moe.fp8"]["kernel"].startswith("vllm_fp8moe_triton")
    assert fits["moe.fp8"]["points"] == 135 and fits["moe.fp8"]["ep_sizes"] == [1]
    assert 0.3 < k["moe_hbm_efficiency"]["bf16"] <= 1 and fits["moe.bf16"]["rms_log_residual"] < 0.3


def _expert_time(model: StepCostModel, tokens: int) -> float:
    """Seconds of one MoE layer's routed experts on one rank as the step model charges them: the expert GEMM rows
    and the activation row (launches left out, as the tables time kernels), plus the router row's three routing
    kernels; i.e. what a fused-MoE table row measures."""
    from infercast.cost.batch import StepBatch
    from infercast.cost.operators import ROUTING_KERNELS

    b = model.breakdown(StepBatch.uniform(decode_seqs=tokens, context=1))
    pk = (
        model.profile.kernel_overhead_graph_s
        if tokens <= model.profile.graph_max_tokens
        else (model.profile.kernel_overhead_eager_s)
    )
    total = 0.0
    for name in ("experts_gate_up", "experts_down", "moe_activation"):
        i = b.names.index(name)
        total += b.time_s[i, 0] - model.kernels[i, 0] * pk
    layers = model.dep.model.num_moe_layers
    return total / layers + ROUTING_KERNELS * model.profile.gemm_latency_s


@needs_pyarrow
@pytest.mark.parametrize(
    ("model", "precision", "dtype", "tp", "h", "tokens", "rms"),
    [
        ("qwen3-30b-a3b", "bf16", "bfloat16", 1, 2048, (1, 64, 1024, 8192), 0.222),
        ("deepseek-v3", "fp8", "fp8_block", 8, 7168, (1, 64, 1024, 8192), 0.155),
    ],
)
def test_expert_time_follows_the_h100_fused_moe_table(model, precision, dtype, tp, h, tokens, rms):
    """H100, vLLM 0.24 fused-MoE table rows of the model's expert shape and layout (tp x ep 1): the step model's
    routed-expert time is the fitted form exactly, and follows the rows to within 0.4 in log time, median within
    twice the fit's RMS log residual. Log errors now: Qwen3 bf16 +0.35 (1 token: the fixed time is fitted over every
    shape), +0.01, +0.04, +0.14; DeepSeek-V3 fp8 TP 8 -0.16, +0.36, +0.37, +0.10 (one form over every shape
    and TP: at TP 8 this shape's experts are 256 wide)."""
    from infercast.calibrate.kernel_fit import moe_layer_time, moe_shapes

    profile = load_profile("h100-sxm", "hopper", "vllm", fitted=False)
    cost = StepCostModel(Deployment.resolve(model, "h100-sxm", tp=tp, precision=precision), profile)
    key = cost.dep.compute_key
    assert cost.sources[cost.names.index("experts_down")].count("moe/vllm/0.24.0/moe_perf.parquet")
    table = pd.read_parquet(AIC / "aiconfigurator_core/systems/data/h100_sxm/moe/vllm/0.24.0/moe_perf.parquet")
    rows = table[
        (table.moe_dtype == dtype)
        & (table.hidden_size == h)
        & (table.moe_tp_size == tp)
        & (table.moe_ep_size == 1)
        & table.num_tokens.isin(tokens)
    ].sort_values("num_tokens")
    assert len(rows) == len(tokens)
    hw = cost.dep.hardware
    shapes = moe_shapes(
        rows,
        cost.dep.scheme.expert_weight_format.bytes_per_element,
        hw.peak_flops["fp32"],
        hw.memory.bandwidth_bytes_s,
        profile.hbm_efficiency,
        profile.gemm_latency_s,
        balanced=False,
    )
    form = moe_layer_time(shapes, hw.peak(key), hw.memory.bandwidth_bytes_s, profile.moe_params(key))
    ours = np.array([_expert_time(cost, t) for t in tokens])
    # exact but for the shared expert's activation, which DeepSeek-V3's activation row also carries
    assert ours == pytest.approx(form, rel=1e-9 if not cost.dep.model.moe.num_shared_experts else 5e-3)
    errors = np.log(ours / (rows["latency"].to_numpy() * 1e-3))
    assert (np.abs(errors) <= 0.4).all(), errors
    assert np.median(np.abs(errors)) <= 2 * rms, errors


def test_without_moe_tables_the_experts_are_dense_gemms_and_dense_models_are_unchanged():
    from dataclasses import replace

    from infercast.cost.batch import StepBatch
    from infercast.cost.profile import MOE_PARAMS

    batch = StepBatch.uniform(
        prefill_seqs=np.array([0, 1, 4]), chunk=512, decode_seqs=np.array([8, 0, 64]), context=2048
    )
    for name, kw in (("llama-3.1-8b", {}), ("qwen3-32b", {"tp": 2})):
        dep = Deployment.resolve(name, "h100-sxm", **kw)
        profile = load_profile("h100-sxm", "hopper", "vllm")
        bare = replace(profile, **{key: {} for key in MOE_PARAMS})
        with_moe, without = StepCostModel(dep, profile), StepCostModel(dep, bare)
        assert with_moe.per_token == [] and with_moe.sources == without.sources
        assert (with_moe.step_time(batch) == without.step_time(batch)).all()  # bit-identical
    dep = Deployment.resolve("qwen3-30b-a3b", "h100-sxm")
    profile = load_profile("h100-sxm", "hopper", "vllm")
    dense = StepCostModel(dep, replace(profile, **{key: {} for key in MOE_PARAMS}))
    i = dense.names.index("experts_gate_up")
    assert dense.per_token == [] and "gemm/vllm" in dense.sources[i]
    assert dense.m_half[i, 0] == profile.gemm_m_half["bf16"]
    # MXFP4 experts take the fused-MoE fit of the tables' MXFP4 kernel
    mx = StepCostModel(Deployment.resolve("qwen3-30b-a3b", "h100-sxm", precision="mxfp4-moe"), profile)
    assert mx.per_token and "w4a16_mxfp4" in mx.sources[mx.names.index("experts_gate_up")]
    # int4 (W4A16) experts take the fit of the tables' Marlin int4 kernels
    w4 = StepCostModel(Deployment.resolve("qwen3-30b-a3b", "h100-sxm", precision="int4"), profile)
    assert w4.per_token and "int4_wo" in w4.sources[w4.names.index("experts_gate_up")]


def test_nvfp4_experts_take_the_fitted_fp4_fused_moe_kernels_where_measured():
    """On a B200 the wheel times NVFP4 GEMMs and NVFP4 fused-MoE kernels: an NVFP4 MoE model's dense GEMMs and
    routed experts cite those tables, not an architecture prior."""
    from infercast.cost.profile import has_measured_kernels

    if not has_measured_kernels("b200"):
        pytest.skip("no measured b200 kernel profile installed")
    model = StepCostModel(Deployment.resolve("deepseek-r1", "b200", tp=8, ep=8, precision="nvfp4"))
    assert model.profile.moe_params("fp4") is not None
    assert "nvfp4" in model.sources[model.names.index("experts_gate_up")]
    assert "nvfp4" in model.sources[model.names.index("o_proj")]


def test_mxfp4_experts_without_fp4_tensor_cores_take_the_dequantising_kernels_ceiling():
    """gpt-oss on Hopper runs its MXFP4 experts weight-only. Without the fused-MoE fit (``moe_*.mxfp4``), the lowered
    dense curve prices them: many rows per expert (prefill) cost more than the dense 16-bit GEMM's curve prices, a
    few (decode) the same; Blackwell (FP4 tensor cores) keeps the dense curve."""
    from dataclasses import replace

    from infercast.cost.batch import StepBatch
    from infercast.cost.profile import MOE_PARAMS, has_measured_kernels

    if not has_measured_kernels("h100-sxm"):
        pytest.skip("no measured h100-sxm kernel profile installed")
    dep = Deployment.resolve("gpt-oss-120b", "h100-sxm")
    fitted = load_profile("h100-sxm", "hopper", "vllm")
    profile = replace(fitted, **{n: {k: v for k, v in getattr(fitted, n).items() if k != "mxfp4"} for n in MOE_PARAMS})
    w4, dense = (
        StepCostModel(dep, profile),
        StepCostModel(
            dep, replace(profile, gemm_eff_max={k: v for k, v in profile.gemm_eff_max.items() if k != "w4a16"})
        ),
    )
    assert "w4a16_mxfp4" in w4.sources[w4.names.index("experts_gate_up")]
    prompt = StepBatch.uniform(prefill_seqs=np.array([1]), chunk=8192, decode_seqs=np.array([0]), context=0)
    decode = StepBatch.uniform(prefill_seqs=np.array([0]), chunk=0, decode_seqs=np.array([64]), context=2048)
    assert w4.step_time(prompt)[0] > 1.2 * dense.step_time(prompt)[0]
    assert w4.step_time(decode)[0] == pytest.approx(dense.step_time(decode)[0], rel=0.05)
    # an engine with its own MXFP4 MoE table runs its own kernel (TensorRT-LLM's, beside its own GEMM curve)
    assert "moe/trtllm" in load_profile("h100-sxm", "hopper", "trtllm").provenance["gemm_eff_max.w4a16"]
    if has_measured_kernels("b200"):
        assert "w4a16" not in load_profile("b200", "blackwell", "vllm").gemm_eff_max


def test_a_launch_that_runs_mxfp4_experts_through_marlin_prefills_slower_and_decodes_the_same():
    """vLLM's Marlin kernel (VLLM_MXFP4_USE_MARLIN=1) dequantises inside Ampere-style MMA tiles: its slowdown, fitted
    on the wheel's Marlin fused-MoE rows, exceeds the Triton kernel's, so a long prompt costs more; a decode step
    streams the same weights. A launch without it keeps the tables' own kernel."""
    from dataclasses import replace

    from infercast.cost.batch import StepBatch
    from infercast.cost.profile import MOE_PARAMS, has_measured_kernels

    if not has_measured_kernels("h200"):
        pytest.skip("no measured h200 kernel profile installed")
    fitted = load_profile("h200", "hopper", "vllm")
    # against the Triton kernel's lowered dense curve (the fused-MoE fit, its default, prices decode apart)
    profile = replace(fitted, **{n: {k: v for k, v in getattr(fitted, n).items() if k != "mxfp4"} for n in MOE_PARAMS})
    assert profile.gemm_eff_max["w4a16_marlin"] < profile.gemm_eff_max["w4a16"]
    assert "marlin" in profile.provenance["gemm_eff_max.w4a16_marlin"]
    engine = get_engine("vllm-0.14")
    triton = StepCostModel(Deployment.resolve("gpt-oss-120b", "h200", tp=4, engine=engine), profile)
    marlin_engine = engine.model_copy(update={"moe_backend": "marlin"})
    marlin = StepCostModel(Deployment.resolve("gpt-oss-120b", "h200", tp=4, engine=marlin_engine), profile)
    assert "marlin" in marlin.sources[marlin.names.index("experts_gate_up")]
    assert "marlin" not in triton.sources[triton.names.index("experts_gate_up")]
    prompt = StepBatch.uniform(prefill_seqs=1, chunk=8192, cached=0)
    decode = StepBatch.uniform(decode_seqs=16, context=2048)
    assert marlin.step_time(prompt)[0] > 1.2 * triton.step_time(prompt)[0]
    assert marlin.step_time(decode)[0] == pytest.approx(triton.step_time(decode)[0], rel=0.02)
    # a dense model ignores the setting
    dense = Deployment.resolve("llama-3.1-8b", "h200", engine=marlin_engine)
    assert StepCostModel(dense, profile).step_time(prompt)[0] == pytest.approx(
        StepCostModel(Deployment.resolve("llama-3.1-8b", "h200", engine=engine), profile).step_time(prompt)[0]
    )


def test_weight_only_mxfp4_experts_take_their_kernels_fused_moe_fit_unless_marlin_runs_them():
    """gpt-oss's MXFP4 experts on Hopper run each engine's own kernel, fitted in the fused-MoE form (its own streaming
    rate and fixed time: at a few rows per expert the Triton kernels stream slower than the dense GEMMs priced
    alone); a launch that picks Marlin keeps the lowered dense curve."""
    from infercast.cost.batch import StepBatch
    from infercast.cost.profile import has_measured_kernels

    if not has_measured_kernels("h200"):
        pytest.skip("no measured h200 kernel profile installed")
    for engine in ("vllm-0.14", "trtllm"):
        profile = load_profile("h200", "hopper", engine)
        assert profile.moe_params("mxfp4") is not None
        model = StepCostModel(Deployment.resolve("gpt-oss-120b", "h200", tp=4, engine=engine), profile)
        assert "w4a16_mxfp4" in model.sources[model.names.index("experts_gate_up")]
    assert "moe_torch_flow" in load_profile("h200", "hopper", "trtllm").provenance["moe_eff_max.mxfp4"]
    marlin_engine = get_engine("vllm-0.14").model_copy(update={"moe_backend": "marlin"})
    profile = load_profile("h200", "hopper", "vllm-0.14")
    marlin = StepCostModel(Deployment.resolve("gpt-oss-120b", "h200", tp=4, engine=marlin_engine), profile)
    fused = StepCostModel(Deployment.resolve("gpt-oss-120b", "h200", tp=4, engine="vllm-0.14"), profile)
    assert "marlin" in marlin.sources[marlin.names.index("experts_gate_up")]
    decode = StepBatch.uniform(decode_seqs=4, context=2048)
    assert fused.step_time(decode)[0] > marlin.step_time(decode)[0]


def test_a_launch_that_turns_flashinfer_and_deepgemm_off_runs_fp8_experts_on_vllms_triton_kernel():
    """On Blackwell vLLM's block-FP8 experts run FlashInfer's TRT-LLM kernel (the base fp8 fit); with FlashInfer and
    DeepGEMM turned off they fall back to its Triton kernel, fitted on the wheel's older vLLM table that times it:
    a long prompt costs more. On Hopper the base fp8 fit is that Triton kernel already, so nothing changes."""
    from infercast.cost.batch import StepBatch
    from infercast.cost.profile import has_measured_kernels

    if not (has_measured_kernels("b200") and has_measured_kernels("h200")):
        pytest.skip("no measured b200 / h200 kernel profiles installed")
    engine = get_engine("vllm-0.14")
    triton_engine = engine.model_copy(update={"moe_backend": "triton"})
    prompt = StepBatch.uniform(prefill_seqs=1, chunk=8192, cached=0)
    profile = load_profile("b200", "blackwell", "vllm")
    assert "vllm_fused_moe" in profile.provenance["moe_eff_max.fp8_triton"]
    default, triton = (
        StepCostModel(Deployment.resolve("minimax-m2.5", "b200", tp=4, precision="fp8", engine=e), profile)
        for e in (engine, triton_engine)
    )
    assert "vllm_fused_moe" in triton.sources[triton.names.index("experts_gate_up")]
    assert triton.step_time(prompt)[0] > 1.1 * default.step_time(prompt)[0]
    hopper = load_profile("h200", "hopper", "vllm")
    assert hopper.moe_params("fp8_triton") is None
    same = [
        StepCostModel(Deployment.resolve("minimax-m2.5", "h200", tp=4, precision="fp8", engine=e), hopper)
        for e in (engine, triton_engine)
    ]
    assert same[0].step_time(prompt)[0] == same[1].step_time(prompt)[0]


def test_mxfp4_experts_on_blackwell_run_one_trtllm_gen_call_per_layer():
    """vLLM's default MXFP4 kernel on Blackwell (and TensorRT-LLM's with moe_config backend TRTLLM) routes and
    activates inside one call: the router row keeps its GEMM alone, the activation row costs nothing, the down
    projection launches nothing of its own, and decode is cheaper. TensorRT-LLM's CUTLASS default and Hopper keep
    the separate kernels."""
    from infercast.cost.batch import StepBatch

    decode = StepBatch.uniform(decode_seqs=8, context=2048)

    def model(gpu: str, engine: str, backend: str | None = None) -> StepCostModel:
        spec = get_engine(engine).model_copy(update={"moe_backend": backend})
        return StepCostModel(Deployment.resolve("gpt-oss-120b", gpu, tp=1, precision="mxfp4-moe", engine=spec))

    vllm, cutlass, trtllm, hopper = (
        model("b200", "vllm-0.14"),
        model("b200", "trtllm-1.1"),
        model("b200", "trtllm-1.1", "trtllm"),
        model("h200", "vllm-0.14"),
    )
    layers = vllm.dep.model.num_moe_layers
    for m in (vllm, trtllm):
        kernels = dict(zip(m.names, m.kernels[:, 0], strict=True))
        assert (kernels["router"], kernels["experts_gate_up"], kernels["experts_down"]) == (layers, layers, 0)
        assert m.breakdown(decode).time_s[m.names.index("moe_activation"), 0] == 0.0
    for m in (cutlass, hopper):
        assert m.kernels[m.names.index("router"), 0] == 4 * layers
    assert trtllm.step_time(decode)[0] < 0.95 * cutlass.step_time(decode)[0]


def test_trtllm_runs_its_own_cutlass_moe_kernel_unless_a_launch_picks_another():
    """TensorRT-LLM's default MoE backend is CUTLASS: its experts take the fit of that kernel from its own table
    (``moe_*.fp8_cutlass``); a launch with the TRTLLM backend takes the base fit, DEEPGEMM its own kernel's where
    the GPU's table has one. vLLM keeps the base fit."""
    from infercast.cost.profile import has_measured_kernels

    if not (has_measured_kernels("h100-sxm") and has_measured_kernels("b200")):
        pytest.skip("no measured h100-sxm / b200 kernel profiles installed")

    def model(gpu: str, engine: str, backend: str | None = None) -> StepCostModel:
        spec = get_engine(engine).model_copy(update={"moe_backend": backend})
        return StepCostModel(Deployment.resolve("deepseek-r1", gpu, tp=8, precision="fp8", engine=spec))

    def source(m: StepCostModel) -> str:
        return m.sources[m.names.index("experts_gate_up")]

    assert "moe_torch_flow_cutlass" in source(model("h100-sxm", "trtllm-1.1"))
    assert "moe/vllm/" in source(model("h100-sxm", "trtllm-1.1", "trtllm"))
    assert "moe/vllm/" in source(model("h100-sxm", "vllm-0.14"))
    assert "deepgemm" in source(model("b200", "trtllm-1.1", "deepgemm"))
    assert "moe/vllm/" in source(model("b200", "trtllm-1.1", "trtllm"))


def test_table_versions_sort_releases_above_their_dev_and_rc_builds():
    from infercast.records.kernel_tables import version_key

    versions = ["1.3.0", "0.1.5", "0.1.dev19262", "1.3.0rc20", "0.5.6.post2", "0.5.6"]
    assert sorted(versions, key=version_key) == ["0.1.dev19262", "0.1.5", "0.5.6", "0.5.6.post2", "1.3.0rc20", "1.3.0"]


def test_fits_name_parameters_left_on_a_bound():
    """A parameter the data push past its bound is reported (provenance and the profile's fit record), not
    passed off as measured: L40S's committed profile names its three (GEMM latency at the floor, the fused MoE's HBM
    and decode attention's efficiency at 1.0, where the tables' small cases likely sit in its 96 MB L2)."""
    import numpy as np
    import yaml

    from infercast.calibrate.kernel_fit import _fit
    from infercast.calibrate.profile_fit import PROFILE_DIR

    # y = 5 x: the fitted slope wants 5 but may not exceed 2; the intercept is free
    xs = np.linspace(1.0, 2.0, 8)
    params, _, edge = _fit(
        lambda p: np.log((np.exp(p[0]) * xs + np.exp(p[1])) / (5.0 * xs)),
        [1.0, 1e-3],
        [0.1, 1e-9],
        [2.0, 10.0],
        ("slope", "intercept"),
    )
    assert edge == ["slope"] and params[0] == pytest.approx(2.0)
    fit = yaml.safe_load((PROFILE_DIR / "kernels" / "l40s.yaml").read_text())["fit"]
    assert fit["gemm.bf16"]["at_bound"] == ["gemm_latency_s"]
    assert fit["moe.bf16"]["at_bound"] == ["moe_hbm_efficiency"]
    assert fit["attention.decode"]["at_bound"] == ["attn_decode_efficiency"]


@needs_pyarrow
def test_each_engine_gets_the_gemm_curves_of_its_own_table(tmp_path):
    import shutil

    from infercast.specs.catalog import get_hardware

    root = tmp_path / "aic"
    shutil.copytree(AIC, root)
    hw = get_hardware("h100-sxm")
    truth = {"fp8": (0.6, 40.0, 1.0, hw.peak("fp8")), "bfloat16": (0.7, 80.0, 2.0, hw.peak("bf16"))}
    rows = []
    for dtype, (eff, half, width, peak) in truth.items():
        for m in (1, 16, 64, 256, 1024, 4096, 8192):
            for n, k in ((4096, 4096), (8192, 8192), (14336, 4096)):
                compute = 2 * m * n * k / (peak * eff * max(m, 16) / (max(m, 16) + half))
                memory = ((m * k + k * n) * width + 2 * m * n) / (hw.memory.bandwidth_bytes_s * 0.85)
                # 8-bit rows quantise their input first: 6 bytes per input element at the datasheet HBM rate
                quant = 6.0 * m * k / hw.memory.bandwidth_bytes_s if width == 1.0 else 0.0
                rows.append(
                    {
                        "kernel_source": "torch_flow",
                        "gemm_dtype": dtype,
                        "m": m,
                        "n": n,
                        "k": k,
                        "latency": (max(compute, memory) + quant + 5e-6) * 1e3,
                    }
                )
    folder = root / "aiconfigurator_core/systems/data/h100_sxm/gemm/trtllm/1.3.0"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(folder / "gemm_perf.parquet")
    data = build_kernel_profile(locate(root), "h100-sxm")
    own = data["engine_kernels"]["trtllm"]
    assert own["gemm_eff_max"]["fp8"] == pytest.approx(0.6, rel=0.02)
    assert own["gemm_m_half"]["fp8"] == pytest.approx(40.0, rel=0.05)
    assert own["gemm_eff_max"]["bf16"] == pytest.approx(0.7, rel=0.02)
    assert own["gemm_act_quant_bytes"] == {"fp8": pytest.approx(6.0, rel=0.05)}  # the engine's own fp8 path
    assert set(own) == {"gemm_eff_max", "gemm_m_half", "gemm_act_quant_bytes"}  # streaming, fixed time: the base's
    assert data["kernels"]["gemm_eff_max"] != own["gemm_eff_max"]  # the base is vLLM's table, untouched
    assert "gemm/trtllm/1.3.0/gemm_perf.parquet" in data["engine_provenance"]["trtllm"]["gemm_eff_max.fp8"]
    assert "vllm" not in data["engine_kernels"]  # the base table's engine needs no overlay


def test_installed_profiles_give_each_current_engine_its_own_gemm_curves():
    import yaml

    from infercast.cli.kernel_calibration import KERNEL_PROFILE_DIR

    table = yaml.safe_load((KERNEL_PROFILE_DIR / "b200.yaml").read_text())["engine_kernels"]
    base, trt, sglang = (load_profile("b200", "blackwell", e) for e in ("vllm", "trtllm", "sglang"))
    assert trt.gemm_eff_max["fp8"] == table["trtllm"]["gemm_eff_max"]["fp8"] != base.gemm_eff_max["fp8"]
    assert sglang.gemm_m_half["bf16"] == table["sglang"]["gemm_m_half"]["bf16"]
    assert "gemm/trtllm/" in trt.provenance["gemm_eff_max.fp8"]
    assert trt.hbm_efficiency == base.hbm_efficiency and trt.gemm_latency_s == base.gemm_latency_s
    for older in ("trtllm-0.6", "vllm-0.14"):  # a 2023 release and a later vLLM keep the base curves
        assert load_profile("b200", "blackwell", older).gemm_eff_max == base.gemm_eff_max
    h100 = [load_profile("h100-sxm", "hopper", e).gemm_eff_max for e in ("vllm", "trtllm", "sglang")]
    assert h100[0] != h100[1] != h100[2]  # the end-to-end fit leaves measured GEMM curves alone (H100 too)


def test_a_gated_deltanet_table_of_another_layout_is_skipped_not_a_traceback() -> None:
    """A ``gdn_perf`` table without the columns the fit reads (another release's layout) leaves the roofline
    pricing in place."""
    import pandas as pd

    from infercast.calibrate.kernel_fit import fit_gdn

    assert fit_gdn(pd.DataFrame({"phase": ["context"], "latency": [0.1]}), 2.25e15) is None
