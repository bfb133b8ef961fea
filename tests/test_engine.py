"""The real engine (infercast.harness.engine): outputs equal a cache-free forward pass on every path (paged,
chunked, prefix-cached, preempted), the simulator's schedulers make the same decisions in both executors
given the same step times, and no KV block leaks. CPU, tiny model, seconds."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402

from infercast.cost.batch import StepBatch  # noqa: E402
from infercast.cost.step import StepCostModel, cost_model  # noqa: E402
from infercast.errors import InfercastError  # noqa: E402
from infercast.harness.engine.block_pool import BlockPool, chain_hashes  # noqa: E402
from infercast.harness.engine.clock import ModelClock, WallClock  # noqa: E402
from infercast.harness.engine.cpu import Sweep, cpu_base_profile, cpu_hardware, fit_profile, sweep_points  # noqa: E402
from infercast.harness.engine.loadgen import replay, workload_prompts  # noqa: E402
from infercast.harness.engine.paged import PagedKV  # noqa: E402
from infercast.harness.engine.runtime import Engine  # noqa: E402
from infercast.harness.engine.sim_twin import HarnessEngineConfig, deployment, simulate_engine  # noqa: E402
from infercast.harness.torch_model import TransformerModel  # noqa: E402
from infercast.sim.decode_cost import compiled_costs  # noqa: E402
from infercast.sim.workload import WorkloadSpec  # noqa: E402
from infercast.specs.model import MLASpec, ModelSpec  # noqa: E402
from tests.tiny_models import TINY  # noqa: E402

SCHEDULERS = ("static", "prefill-first", "chunked", "inflight")
_BASE = TINY
SPEC = ModelSpec(**_BASE)
HW = cpu_hardware({"fp32": 5e10, "bf16": 1e11, "bandwidth_bytes_s": 1e10, "threads": 2})


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny tensors: one thread is fastest, and a shared machine's other cores stay free."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def model() -> TransformerModel:
    return TransformerModel(SPEC, precision="fp32", seed=3)


def _workload(n: int = 16, rate: float = 300.0):
    """Requests sharing two 32-token system prompts, arriving fast enough to batch, chunk and preempt."""
    return WorkloadSpec(input_len=40, output_len=12, num_requests=n, rate=rate, prefix=(2, 32), seed=1).build()


def _engine(model: TransformerModel, scheduler: str, **kw: object) -> Engine:
    opts = dict(num_blocks=20, block_size=16, max_num_seqs=6, max_num_batched_tokens=32)
    return Engine(model, scheduler=scheduler, **{**opts, **kw})


def _assert_matches_reference(model: TransformerModel, engine: Engine) -> None:
    """Every generated token is the argmax of a cache-free forward pass over prompt + tokens before it, and
    the engine's logits equal that pass's."""
    for seq in engine.seqs.values():
        full = torch.tensor([seq.prompt + seq.generated])
        with torch.inference_mode():
            ref = model(full)[0]
        p = len(seq.prompt)
        rows = ref[p - 1 : p - 1 + len(seq.generated)]
        assert rows.argmax(-1).tolist() == seq.generated
        assert seq.logits is not None and len(seq.logits) >= len(seq.generated)
        # after a preemption the re-prefill samples again from the last position: compare the last logits seen
        got = torch.stack(seq.logits[-len(seq.generated) :]) if not seq.preemptions else None
        if got is not None:
            torch.testing.assert_close(got, rows, atol=3e-5, rtol=1e-5)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_outputs_equal_full_forward_pass(model: TransformerModel, scheduler: str) -> None:
    engine = _engine(model, scheduler, max_num_batched_tokens=96, record_logits=True)
    run = replay(engine, _workload(rate=3000.0), WallClock())
    assert run.summary["completed"] == 16
    assert run.summary["prefix_cache_hit_rate"] > 0.2  # the prefix-cached path ran
    ragged = any(len(s.prefill) > 1 or s.decodes for s in engine.steps if s.prefill)
    assert ragged or scheduler == "static"  # several sequences in one step (static: one prompt per step)
    assert max(s.decodes for s in engine.steps) > 1  # batched decodes
    _assert_matches_reference(model, engine)
    assert engine.pool.used == 0
    engine.check_blocks()


def test_chunked_prefill_and_preemption_paths(model: TransformerModel) -> None:
    """Tiny token budget (every prompt split in chunks) and few blocks (running sequences preempted)."""
    engine = _engine(model, "chunked", num_blocks=12, max_num_batched_tokens=8, record_logits=True)
    replay(engine, _workload(10, rate=1000.0), WallClock())
    assert max(s.preemptions for s in engine.seqs.values()) > 0
    assert all(c <= 8 for step in engine.steps for _, c in step.prefill)
    _assert_matches_reference(model, engine)
    engine.check_blocks()
    assert engine.pool.used == 0


@pytest.mark.parametrize(
    "spec",
    [
        ModelSpec(**{**_BASE, "num_layers": 3, "sliding_window": 8, "num_sliding_layers": 2}),
        ModelSpec(**{**_BASE, "num_kv_heads": 1, "qk_norm": True, "qkv_bias": True, "tie_word_embeddings": True}),
    ],
    ids=["sliding", "mqa"],
)
def test_other_attention_layouts_equal_full_forward_pass(spec: ModelSpec) -> None:
    m = TransformerModel(spec, precision="fp32", seed=5)
    engine = Engine(
        m,
        scheduler="chunked",
        num_blocks=24,
        block_size=16,
        max_num_seqs=4,
        max_num_batched_tokens=24,
        record_logits=True,
    )
    replay(engine, _workload(6), WallClock())
    _assert_matches_reference(m, engine)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_same_decisions_as_the_simulator_given_the_same_step_times(model: TransformerModel, scheduler: str) -> None:
    profile = cpu_base_profile()
    config = HarnessEngineConfig(
        SPEC,
        precision="fp32",
        scheduler=scheduler,
        num_blocks=20,
        block_size=16,
        max_num_seqs=6,
        max_num_batched_tokens=32,
    )
    work = _workload()
    sim = simulate_engine(config, HW, profile, work, skip=False, trace_steps=10_000)
    step_fn = compiled_costs(cost_model(deployment(config, HW), profile), config.max_num_seqs)[0]
    engine = _engine(model, scheduler)
    run = replay(engine, work, ModelClock(step_fn, profile.request_overhead_s))
    sim_steps = sim.recorder.steps
    assert len(sim_steps) == len(engine.steps) > 40
    for s, e in zip(sim_steps, engine.steps, strict=True):
        assert tuple(s.prefill_ids) == tuple(i for i, _ in e.prefill)
        assert s.prefill_tokens == sum(c for _, c in e.prefill)
        assert s.decode_seqs == e.decodes
        assert s.start == pytest.approx(e.start, rel=1e-9, abs=1e-12)
    assert run.summary["preemptions"] == sim.summary["preemptions"]
    assert run.summary["prefix_cache_hit_rate"] == pytest.approx(sim.summary["prefix_cache_hit_rate"])
    for key in ("ttft_s", "tpot_s", "e2e_s", "itl_s"):
        assert run.summary[key]["mean"] == pytest.approx(sim.summary[key]["mean"], rel=1e-9)
    if scheduler != "static":  # static reserves whole requests: nothing to preempt
        assert sim.summary["preemptions"] > 0 or sim.summary["prefix_cache_hit_rate"] > 0.2


def test_block_pool_refcounts_prefix_hits_and_lru_eviction() -> None:
    pool = BlockPool(4, 2)
    tokens = [1, 2, 3, 4, 5]
    hashes = chain_hashes(tokens, 2)
    assert len(hashes) == 2 and chain_hashes([9, 2, 3, 4], 2)[1] != hashes[1]  # chained: prefix decides
    a = pool.allocate(3)
    assert a is not None and pool.free == 1
    assert pool.publish(a, hashes, 0) == []
    pool.release(a)
    assert pool.free == 2 and pool.evictable == 2  # published blocks stay cached
    hit = pool.match(hashes, len(tokens))
    assert hit == a[:2] and pool.evictable == 0
    pool.release(hit)
    assert pool.allocate(5) is None  # nothing changes on failure
    b = pool.allocate(3)  # evicts the least recently released cached block
    assert b is not None and pool.evictions == 1
    pool.release(b)
    pool.check([])
    with pytest.raises(RuntimeError):
        pool.release([b[0]])


def test_leaks_are_detected(model: TransformerModel) -> None:
    engine = _engine(model, "chunked")
    replay(engine, _workload(4), WallClock())
    engine.pool.allocate(1)  # a block nobody holds
    with pytest.raises(RuntimeError, match="references"):
        engine.check_blocks()


def test_prompts_share_tokens_exactly_where_the_workload_shares_hash_blocks() -> None:
    work = _workload(8)
    prompts = workload_prompts(work, 97)
    assert [len(p) for p in prompts] == work.prompt_len.tolist()
    for i in range(8):
        for j in range(8):
            same = list(work.block_hashes[i][:2]) == list(work.block_hashes[j][:2])
            assert (prompts[i][:32] == prompts[j][:32]) == same
            assert i == j or prompts[i][32:] != prompts[j][32:]


def test_mla_models_are_refused_with_one_clear_error() -> None:
    spec = ModelSpec(
        **{
            **_BASE,
            "num_kv_heads": 4,
            "mla": MLASpec(q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16),
        }
    )
    with pytest.raises(InfercastError, match="MLA"):
        PagedKV(TransformerModel(spec, precision="fp32"), 4, 16)


def test_cpu_fit_recovers_the_step_times_of_a_known_profile() -> None:
    """Step times generated by a known profile over the sweep's shapes are fitted back to within 2 %."""
    config = HarnessEngineConfig(SPEC, precision="fp32")
    truth = cpu_base_profile().with_values(
        {
            "gemm_eff_max.fp32": 0.3,
            "gemm_m_half.fp32": 12.0,
            "hbm_efficiency": 0.4,
            "step_overhead_s": 4e-4,
            "seq_overhead_s": 3e-5,
        },
        "truth",
    )
    cols = [StepBatch.from_items(p, d, prefill_samples=len(p)).x[:, 0] for p, d in sweep_points()]
    features = np.array(cols).T
    seconds = StepCostModel(deployment(config, HW), truth).step_time(StepBatch(features))
    profile, stats = fit_profile(Sweep(features, seconds), config, HW)
    assert stats["max_abs_rel_error"] < 0.02
    assert profile.hardware == "cpu" and "fitted" in profile.provenance["hbm_efficiency"]


# ----- CPU calibration and the commands ------------------------------------------------------------------------
@pytest.fixture
def tiny_config(tmp_path):
    import json

    path = tmp_path / "tiny" / "config.json"
    path.parent.mkdir()
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
        "vocab_size": 97,
        "max_position_embeddings": 1024,
    }
    path.write_text(json.dumps(config))
    return path


def test_measured_peaks_make_a_cpu_hardware_spec_with_provenance() -> None:
    from infercast.harness.engine.cpu import measure_peaks

    peaks = measure_peaks(1, 1, n=128, copy_mib=4)
    hw = cpu_hardware(peaks)
    assert hw.peak("fp32") > 1e8 and hw.peak("bf16") > 1e7 and hw.memory.bandwidth_bytes_s > 1e8
    assert peaks["date"] in hw.sources["peak_flops"] and str(peaks["loadavg"]) in hw.sources["memory"]


def test_calibrate_cpu_then_validate_sim_commands(tiny_config, tmp_path, capsys, monkeypatch) -> None:
    from functools import partial

    import infercast.harness.engine.cpu as cpu
    from tests.cli_helpers import run, run_json

    monkeypatch.setattr(cpu, "measure_peaks", partial(cpu.measure_peaks, n=128, copy_mib=4))  # small, fast
    cal = tmp_path / "cpu.yaml"
    out = run_json(
        capsys,
        "calibrate-cpu",
        "--model",
        str(tiny_config),
        "--precision",
        "fp32",
        "--repeats",
        "1",
        "--rounds",
        "1",
        "--out",
        str(cal),
    )
    assert cal.is_file() and out["profile"]["hbm_efficiency"] > 0 and out["fit_mean_abs_rel_error"] >= 0
    plot = tmp_path / "cdf.png"
    res = run_json(
        capsys,
        "validate-sim",
        "--model",
        str(tiny_config),
        "--precision",
        "fp32",
        "--calibration",
        str(cal),
        "--rate",
        "100",
        "--num-requests",
        "12",
        "--input-len",
        "uniform:20,60",
        "--output-len",
        "8",
        "--prefix-tokens",
        "32",
        "--num-blocks",
        "40",
        "--plot",
        str(plot),
    )
    rows = {(r["metric"], r["stat"]): r for r in res["rows"]}
    for key in (("ttft_s", "p90"), ("tpot_s", "mean"), ("itl_s", "p99"), ("e2e_s", "p50")):
        assert rows[key]["measured"] > 0 and rows[key]["simulated"] > 0
    assert rows[("prefix_cache_hit_rate", "")]["measured"] > 0
    assert plot.is_file() and res["steps"] > 0 and res["loadavg_before"]
    code, _, err = run(
        capsys, "validate-sim", "--model", str(tiny_config), "--calibration", str(tmp_path / "no.yaml"), "--rate", "1"
    )
    assert code == 2 and "calibrate-cpu" in err and "Traceback" not in err
    code, _, err = run(
        capsys,
        "validate-sim",
        "--model",
        str(tiny_config),
        "--calibration",
        str(cal),
        "--rate",
        "1",
        "--precision",
        "fp8",
    )
    assert code == 2 and "precision" in err and len(err.strip().splitlines()) == 1


def test_speed_probe_scaling_multiplies_every_step_time() -> None:
    from infercast.harness.engine.cpu import scaled_profile

    config = HarnessEngineConfig(SPEC, precision="fp32")
    cols = [StepBatch.from_items(p, d, prefill_samples=len(p)).x[:, 0] for p, d in sweep_points()]
    batch = StepBatch(np.array(cols).T)
    base = cpu_base_profile()
    slow = scaled_profile(base, 1.7)
    model = StepCostModel(deployment(config, HW), base)
    np.testing.assert_allclose(
        StepCostModel(deployment(config, HW), slow).step_time(batch), 1.7 * model.step_time(batch), rtol=1e-9
    )
    assert "speed probe" in slow.provenance["hbm_efficiency"]


# ----- the OpenAI-compatible endpoint ----------------------------------------------------------------------------
def test_openai_compatible_endpoint_streams_the_engines_greedy_tokens(model: TransformerModel) -> None:
    import json
    import threading
    import urllib.error
    import urllib.request

    from infercast.harness.engine.server import EngineServer

    server = EngineServer(_engine(model, "chunked"), port=0).start()
    base = f"http://127.0.0.1:{server.port}/v1"

    def post(body: dict) -> urllib.request.Request:
        return urllib.request.Request(
            f"{base}/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )

    try:
        prompt = [5, 17, 42, 8, 9, 60, 61, 3] * 5
        results: dict[str, object] = {}

        def plain() -> None:
            with urllib.request.urlopen(post({"prompt": prompt, "max_tokens": 6}), timeout=60) as r:
                results["plain"] = json.loads(r.read())

        thread = threading.Thread(target=plain)
        thread.start()  # two requests in flight at once: batched by the engine
        with urllib.request.urlopen(post({"prompt": prompt, "max_tokens": 6, "stream": True}), timeout=60) as r:
            events = [line[6:] for line in r.read().decode().splitlines() if line.startswith("data: ")]
        thread.join(60)
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e)["choices"][0] for e in events[:-1]]
        streamed = [int(c["text"]) for c in chunks if c["text"]]
        assert len(streamed) == 6 and chunks[-1]["finish_reason"] == "length"
        body = results["plain"]
        assert body["usage"] == {"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46}
        assert [int(t) for t in body["choices"][0]["text"].split()] == streamed  # same prompt, same greedy tokens
        with torch.inference_mode():
            ref = model(torch.tensor([prompt + streamed]))[0]
        assert ref[39:45].argmax(-1).tolist() == streamed
        with urllib.request.urlopen(f"{base}/models", timeout=10) as r:
            assert json.loads(r.read())["data"][0]["id"] == "tiny"
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(post({"prompt": prompt, "max_tokens": 0}), timeout=10)
        assert bad.value.code == 400 and "max_tokens" in bad.value.read().decode()
        assert server.engine.pool.used == 0 and not server.engine.seqs
    finally:
        server.stop()
