"""Multi-node and multi-dimensional layouts: TP across nodes, attention data parallelism with wide EP,
pipeline parallelism at the cost level; memory per GPU follows the layout; bad layouts are one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

import infercast
from infercast import memory_budget
from infercast.cost.batch import FEATURES, StepBatch
from infercast.cost.collectives import collective_curve
from infercast.cost.compiled import compile_scalar
from infercast.cost.profile import load_profile
from infercast.cost.step import StepCostModel
from infercast.errors import InfercastError
from infercast.specs.catalog import get_hardware
from infercast.specs.deployment import Deployment

KW = dict(input_len=2048, output_len=128, batch=16)


@pytest.mark.parametrize("gpu", ["h200", "b200"])
def test_issue_layouts_predict(gpu):
    """--tp 16, --ep 64 with attention DP, --pp 2 on H200 and B200 predict (the issue's done-when)."""
    for kw in (
        dict(model="llama-3.1-70b", tp=16),
        dict(model="llama-3.1-70b", tp=8, pp=2),
        dict(model="deepseek-v3", ep=64, attention_dp=64, precision="fp8"),
        dict(model="deepseek-v3", tp=8, ep=8, pp=2, precision="fp8"),
    ):
        kw = dict(kw)
        p = infercast.predict(kw.pop("model"), gpu, **kw, **KW)
        assert np.isfinite(p.tpot_s) and p.tpot_s > 0 and p.ttft_s > 0 and p.memory.fits
        assert p.gpus == p.tp * p.attention_dp * p.pp


def test_hierarchical_allreduce_adds_the_network_part():
    hw = get_hardware("h100-sxm")
    profile = load_profile("h100-sxm", "hopper", "vllm")
    eight, sixteen = collective_curve(profile, hw, "all_reduce", 8), collective_curve(profile, hw, "all_reduce", 16)
    x = np.array([1e4, 1e6, 1e8])
    extra = sixteen(x) - eight(x)
    # 2 nodes x 8 GPUs: 2 latencies of the ConnectX-7 network plus 2(n-1)/n of x/8 at 50 GB/s x link efficiency
    bw = hw.scale_out.bandwidth_bytes_s * profile.link_efficiency
    assert extra == pytest.approx(2 * hw.scale_out.latency_s + (x / 8) / bw, rel=1e-6)
    assert "inter-node" in sixteen.source and "ConnectX-7" in sixteen.source


def test_tp16_across_nodes_costs_more_allreduce_than_tp8():
    def allreduce(tp):
        m = StepCostModel(Deployment.resolve("llama-3.1-70b", "h200", tp=tp))
        b = m.breakdown(StepBatch.uniform(decode_seqs=32, context=2048))
        return b.time_s[b.names.index("tp_allreduce"), 0]

    assert allreduce(16) > 2 * allreduce(8)


def test_pipeline_latency_crosses_every_stage_and_throughput_is_not_multiplied():
    """pp=2 on 2x the GPUs: a request's decode step still runs every layer (about the same time as one
    replica of half the GPUs, plus the stage hand-off); weights and KV per GPU halve."""
    one = infercast.predict("llama-3.1-70b", "h200", tp=8, **KW)
    two = infercast.predict("llama-3.1-70b", "h200", tp=8, pp=2, **KW)
    assert two.tpot_s == pytest.approx(one.tpot_s, rel=0.35)
    assert two.memory.weights_bytes == pytest.approx(one.memory.weights_bytes / 2, rel=0.05)
    assert two.memory.kv_bytes_per_token == pytest.approx(one.memory.kv_bytes_per_token / 2)
    ops = StepCostModel(Deployment.resolve("llama-3.1-70b", "h200", tp=8, pp=2)).names
    assert "pp_send" in ops


def test_attention_dp_splits_attention_work_not_expert_work():
    base = StepCostModel(Deployment.resolve("deepseek-v3", "h200", tp=8, ep=8, precision="fp8"))
    wide = StepCostModel(Deployment.resolve("deepseek-v3", "h200", tp=1, ep=8, attention_dp=8, precision="fp8"))
    b = StepBatch.uniform(decode_seqs=64, context=4096)
    fb, fw = base.breakdown(b), wide.breakdown(b)
    # decode attention: each DP rank reads the latent KV of 1/8 of the sequences, with all heads on one GPU
    i, j = fb.names.index("attention_decode"), fw.names.index("attention_decode")
    assert fw.bytes[j, 0] == pytest.approx(fb.bytes[i, 0] / 8, rel=0.2)
    # routed experts: the same tokens reach a rank's experts either way
    i, j = fb.names.index("experts_down"), fw.names.index("experts_down")
    assert fw.flops[j, 0] == pytest.approx(fb.flops[i, 0])
    assert "tp_allreduce" not in fw.names and "ep_all_to_all" in fw.names


def test_layout_memory_per_gpu():
    dense = memory_budget("deepseek-v3", "h200", tp=8, ep=8, precision="fp8")
    wide = memory_budget("deepseek-v3", "h200", ep=64, attention_dp=64, precision="fp8")
    assert wide.weights_bytes < dense.weights_bytes / 2  # experts spread over 64 GPUs
    assert wide.max_concurrency(4096) > dense.max_concurrency(4096)


@pytest.mark.parametrize("kw", [dict(tp=8, pp=2), dict(tp=16), dict(tp=1, ep=16, attention_dp=16)])
def test_compiled_step_equals_vector_step_for_layouts(kw):
    model = "deepseek-v3" if "attention_dp" in kw else "llama-3.1-70b"
    m = StepCostModel(Deployment.resolve(model, "b200", precision="fp8", **kw))
    f = compile_scalar(m)
    for batch in (StepBatch.uniform(decode_seqs=24, context=3000), StepBatch.from_items([(512, 0)], [100, 900])):
        want = float(m.step_time(batch)[0])
        assert f(**dict(zip(FEATURES, batch.x[:, 0].tolist(), strict=True))) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        (dict(model="llama-3.1-70b", gpu="l40s", tp=16), "tp"),
        (dict(model="llama-3.1-70b", gpu="h200", tp=8, pp=0), "pp"),
        (dict(model="llama-3.1-70b", gpu="h200", pp=81), "pp"),
        (dict(model="llama-3.1-70b", gpu="h200", attention_dp=2), "attention_dp"),
        (dict(model="deepseek-v3", gpu="h200", ep=64), "ep"),
        (dict(model="deepseek-v3", gpu="h200", ep=48, attention_dp=64), "ep"),
        (dict(model="llama-3.1-70b", gpu="l40s", tp=8, pp=2), "pp"),
    ],
)
def test_bad_layouts_name_the_field(kw, field):
    kw = dict(kw)
    with pytest.raises(InfercastError) as err:
        Deployment.resolve(kw.pop("model"), kw.pop("gpu"), **kw)
    assert err.value.field == field and "\n" not in str(err.value)


def test_cli_layout_options(capsys):
    from tests.cli_helpers import run, run_json

    out = run_json(
        capsys,
        "predict",
        "--model",
        "deepseek-v3",
        "--gpu",
        "b200",
        "--ep",
        "64",
        "--attention-dp",
        "64",
        "--precision",
        "fp8",
        "--input-len",
        "1024",
        "--output-len",
        "64",
    )
    assert out["gpus"] == 64 and out["attention_dp"] == 64 and out["ep"] == 64
    code, _out, err = run(capsys, "predict", "--model", "llama-3.1-70b", "--gpu", "h200", "--pp", "0")
    assert code == 2 and err.startswith("error: pp:")


def test_simulate_takes_pipeline_and_attention_dp_layouts():
    """The simulator runs the layouts predict takes: pp stages hold more KV (weights per GPU halve), and the run
    reports its layout and the out-of-calibration warning."""
    from infercast.sim.api import simulate

    kw = dict(input_len=1024, output_len=64, concurrency=8, num_requests=24)
    one = simulate("llama-3.1-70b", "h200", tp=4, **kw)
    two = simulate("llama-3.1-70b", "h200", tp=4, pp=2, **kw)
    assert two.config["pp"] == 2 and two.config["gpus_per_replica"] == 8
    assert two.config["kv_blocks_per_replica"] > 1.5 * one.config["kv_blocks_per_replica"]
    assert two.summary.completed == 24 and two["tpot_s"]["mean"] > 0
    assert any("pp 2" in w for w in two.confidence.warnings)
    wide = simulate("deepseek-v3", "h200", tp=1, ep=16, attention_dp=16, precision="fp8", **kw)
    assert wide.config["attention_dp"] == 16 and wide.config["gpus_per_replica"] == 16
    assert wide.summary.completed == 24


def test_simulate_refuses_layouts_it_cannot_run():
    from infercast.sim.api import simulate

    with pytest.raises(InfercastError) as err:
        simulate(
            "llama-3.1-70b",
            "h200",
            tp=4,
            pp=2,
            scheduler="disagg",
            input_len=512,
            output_len=16,
            num_requests=4,
            rate=1.0,
        )
    assert err.value.field == "pp" and "\n" not in str(err.value)


def test_cli_simulate_layout_options(capsys):
    from tests.cli_helpers import run, run_json

    out = run_json(
        capsys,
        "simulate",
        "--model",
        "llama-3.1-70b",
        "--gpu",
        "h200",
        "--tp",
        "4",
        "--pp",
        "2",
        "--input-len",
        "512",
        "--output-len",
        "16",
        "--num-requests",
        "8",
        "--rate",
        "2",
    )
    assert out["config"]["pp"] == 2 and out["config"]["gpus_per_replica"] == 8
    code, _out, err = run(
        capsys,
        "simulate",
        "--model",
        "llama-3.1-70b",
        "--gpu",
        "h200",
        "--pp",
        "0",
        "--input-len",
        "512",
        "--output-len",
        "16",
        "--rate",
        "2",
    )
    assert code == 2 and err.startswith("error: --pp:")


def test_sweep_rows_equal_predict_for_layouts_and_pay_for_every_gpu():
    df = infercast.sweep(
        models="deepseek-v3",
        gpus="h200",
        precisions="fp8",
        tps=[1, 8],
        eps=8,
        pps=[1, 2],
        attention_dps=[1, 8],
        batches=[1, 32],
        input_lens=[1024],
        output_lens=[64],
    )
    assert set(zip(df.tp, df.attention_dp, df.pp, strict=True)) == {
        (tp, dp, pp) for tp in (1, 8) for dp in (1, 8) for pp in (1, 2) if tp * dp >= 8
    }
    assert {s["field"] for s in df.attrs["skipped"]} == {"ep"}  # ep 8 on tp 1 x attention-dp 1
    assert (df.gpus == df.tp * df.attention_dp * df.pp).all()
    row = df[(df.tp == 1) & (df.pp == 2) & (df.batch == 32)].iloc[0]
    p = infercast.predict(
        "deepseek-v3",
        "h200",
        tp=1,
        ep=8,
        pp=2,
        attention_dp=8,
        precision="fp8",
        batch=32,
        input_len=1024,
        output_len=64,
    )
    assert row.ttft_s == pytest.approx(p.ttft_s, rel=1e-9) and row.tpot_s == pytest.approx(p.tpot_s, rel=1e-9)
    price = get_hardware("h200").price_per_hour_usd
    assert row.cost_per_mtok_usd == pytest.approx(16 * price / 3600 / row.output_throughput_tok_s * 1e6)


def test_pipeline_bubble_one_request_is_not_split_across_stages():
    """A step forms min(pp, sequences) micro-batches: one request crosses every stage whole, so pp neither
    speeds up its prefill nor its decode (stages idle: the bubble); at least pp sequences fill the pipeline."""
    kw = dict(input_len=4096, output_len=64)
    one = infercast.predict("llama-3.1-70b", "h200", tp=4, batch=1, **kw)
    two = infercast.predict("llama-3.1-70b", "h200", tp=4, pp=2, batch=1, **kw)
    assert two.prefill.time_s >= one.prefill.time_s and two.tpot_s >= one.tpot_s * 0.98
    m = StepCostModel(Deployment.resolve("llama-3.1-70b", "h200", tp=4, pp=2))
    single = StepBatch.from_items([(4096, 0)], [])
    pair = StepBatch.from_items([(2048, 0), (2048, 0)], [])
    # the same 4096 prompt tokens: as one sequence they cross the stages as one micro-batch, as two sequences
    # they form two micro-batches that overlap in the pipeline (about half the latency)
    assert float(m.step_time(single)[0]) > 1.6 * float(m.step_time(pair)[0])
    f = compile_scalar(m)
    for batch in (single, pair, StepBatch.uniform(decode_seqs=1, context=9000)):
        want = float(m.step_time(batch)[0])
        assert f(**dict(zip(FEATURES, batch.x[:, 0].tolist(), strict=True))) == pytest.approx(want, rel=1e-12)


def test_simulated_single_request_with_pipeline_matches_predict():
    from infercast.sim.api import simulate

    p = infercast.predict("llama-3.1-70b", "h200", tp=4, pp=2, batch=1, input_len=1024, output_len=32)
    res = simulate("llama-3.1-70b", "h200", tp=4, pp=2, input_len=1024, output_len=32, num_requests=1, rate=1.0)
    jitter = res.replicas[0].request_jitter  # the request's own varying overhead in place of the mean
    drawn = res["ttft_s"]["mean"] - jitter * float(res.table.intake[0])
    assert drawn == pytest.approx(p.ttft_s - jitter, rel=1e-6)
    assert res["tpot_s"]["mean"] == pytest.approx(p.tpot_s, rel=1e-6)


def test_wide_ep_charges_each_rank_only_its_own_routed_pairs():
    """With attention DP the dispatch delivers a rank the pairs of its own experts: the fused-MoE pair passes
    are 1/ep of those of expert parallelism over TP ranks (whose kernels pass over every routed pair)."""
    tp_ep = StepCostModel(Deployment.resolve("deepseek-v3", "h200", tp=8, ep=8, precision="fp8"))
    wide = StepCostModel(Deployment.resolve("deepseek-v3", "h200", tp=1, ep=8, attention_dp=8, precision="fp8"))
    if not tp_ep.per_token:
        pytest.skip("no fused-MoE fit for h200 fp8 in the installed kernel profile")
    # per-token terms also hold the dense 8-bit GEMMs' quantisation passes: take the routed experts' row
    a = dict(tp_ep.per_token)[tp_ep.names.index("experts_gate_up")]
    b = dict(wide.per_token)[wide.names.index("experts_gate_up")]
    assert b == pytest.approx(a / 8)


def test_resolve_shares_one_deployment_per_builtin_call_only():
    """Built-in ids with plain arguments: one Deployment object per distinct call (the caches keyed on its
    parts hit); a user-registered GPU re-registered under the same id is re-read, never served stale."""
    from infercast.specs import catalog
    from infercast.specs.catalog import get_hardware, register_hardware

    a = Deployment.resolve("llama-3.1-8b", "h100-sxm", tp=2)
    assert Deployment.resolve("llama-3.1-8b", "h100-sxm", tp=2) is a
    assert Deployment.resolve("llama-3.1-8b", "h100-sxm", tp=4) is not a
    base = get_hardware("h100-sxm")
    try:
        register_hardware(base.model_copy(update={"id": "user-gpu-test", "price_per_hour_usd": 1.0}))
        first = Deployment.resolve("llama-3.1-8b", "user-gpu-test")
        register_hardware(base.model_copy(update={"id": "user-gpu-test", "price_per_hour_usd": 2.0}))
        again = Deployment.resolve("llama-3.1-8b", "user-gpu-test")
        assert (first.hardware.price_per_hour_usd, again.hardware.price_per_hour_usd) == (1.0, 2.0)
    finally:
        catalog._user_hardware.pop("user-gpu-test", None)
    with pytest.raises(InfercastError, match="tp"):
        Deployment.resolve("llama-3.1-8b", "h100-sxm", tp=3)
    with pytest.raises(InfercastError, match="alias"):  # "h100" names the built-in h100-sxm: never shadowed
        register_hardware(base.model_copy(update={"id": "h100"}))
