"""Engine behaviour under load: the benchmark-faithful closed-loop client, closed-loop records, the per-engine
load fit's pieces, and error bands on predictions."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import yaml

from infercast.analysis.error_bands import (
    HELDOUT_REGIME,
    ErrorBand,
    Regime,
    _lookup,
    bands_table,
    calibration_scope,
    confidence,
    load_level,
)
from infercast.calibrate.load_fit import (
    LOAD_PARAMS,
    at_grid_edge,
    engine_versions,
    fit_load,
    front_end_candidates,
    median_cost,
    metric_errors,
    spread,
    write_engine_load,
)
from infercast.calibrate.profile_fit import FitResult, base_profile
from infercast.calibrate.serving import (
    ServingBench,
    closed_loop_rates,
    highest_served_rates,
    served_concurrency,
    simulate_serving,
)
from infercast.errors import InfercastError
from infercast.records.record import Record, check_record
from infercast.sim.workload import WorkloadSpec, length_range
from infercast.specs.catalog import get_model
from infercast.specs.deployment import Deployment
from infercast.specs.engine import get_engine
from infercast.specs.engine_launch import parse_launch


def simulate_closed_loop(dep, prof, clients, input_len, output_len, *, range_ratio=0.8, warm_up_rounds=0, **kw):
    """A closed loop of ``clients`` (10 requests each, lengths in [0.8 L, L] unless told) through the serving path."""
    bench = ServingBench(input_len, output_len, clients, range_ratio=range_ratio, warmup=warm_up_rounds * clients, **kw)
    return simulate_serving(dep, prof, bench)


def test_closed_loop_sends_ten_requests_per_client_by_default():
    closed = WorkloadSpec(input_len=100, output_len=10, concurrency=12).build()
    assert len(closed) == 120 and closed.closed_loop == 12
    assert len(WorkloadSpec(input_len=100, output_len=10, rate=5.0).build()) == 1000
    assert len(WorkloadSpec(input_len=100, output_len=10, concurrency=12, num_requests=7).build()) == 7


def test_length_range_is_the_benchmark_clients_range():
    spec = length_range(1024)
    assert spec.kind == "uniform" and spec.params == (820.0, 1024.0)  # ceil(0.8 * 1024) = 820
    assert length_range(128, 1.0).params == (128.0, 128.0)
    work = WorkloadSpec(input_len=length_range(1000), output_len=length_range(200), concurrency=4).build()
    assert work.prompt_len.min() >= 800 and work.prompt_len.max() <= 1000
    assert 850 < work.prompt_len.mean() < 950  # uniform: mean 0.9 L
    with pytest.raises(InfercastError, match="range_ratio"):
        length_range(100, 0.0)


def test_engine_presets_carry_their_documented_limits():
    vllm, sglang, trtllm = (get_engine(e) for e in ("vllm", "sglang", "trtllm"))
    assert (vllm.max_num_seqs, vllm.max_num_batched_tokens, vllm.scheduler) == (256, 2048, "chunked")
    # vLLM's get_batch_defaults (OpenAI server): larger limits where the device reports >= 70 GiB, A100 excepted
    on = {g: Deployment.resolve("llama-3.1-8b", g).engine for g in ("h100-sxm", "h200", "mi300x", "a100-80gb", "l40s")}
    assert {g: (e.max_num_seqs, e.max_num_batched_tokens) for g, e in on.items()} == {
        "h100-sxm": (1024, 8192),
        "h200": (1024, 8192),
        "mi300x": (1024, 8192),
        "a100-80gb": (256, 2048),
        "l40s": (256, 2048),
    }
    # SGLang's chunked_prefill_size by device memory: 2048 below 35 GiB, 8192 below 160 GiB, then 16384
    chunks = {
        g: Deployment.resolve("llama-3.1-8b", g, engine="sglang").engine.max_num_batched_tokens
        for g in ("l4", "l40s", "h100-sxm", "h200", "b200", "mi300x")
    }
    assert chunks == {"l4": 2048, "l40s": 8192, "h100-sxm": 8192, "h200": 8192, "b200": 16384, "mi300x": 16384}
    assert Deployment.resolve("llama-3.1-8b", "b200", engine="sglang").engine.max_num_seqs == sglang.max_num_seqs
    # SGLang's cuda_graph_max_bs by device memory and TP: its decode batches above it run eagerly
    graphs = {
        (g, tp): Deployment.resolve("qwen3-32b", g, tp=tp, engine="sglang").engine.graph_max_tokens
        for g in ("l4", "l40s", "h100-sxm", "b200")
        for tp in (1, 4)
    }
    assert graphs == {
        ("l4", 1): 24, ("l4", 4): 80, ("l40s", 1): 32, ("l40s", 4): 160,
        ("h100-sxm", 1): 256, ("h100-sxm", 4): 512, ("b200", 1): 512, ("b200", 4): 512,
    }  # fmt: skip
    assert "cuda_graph_max_bs" in sglang.sources["graph_max_tokens"] and vllm.graph_max_tokens is None
    launched = parse_launch("python -m sglang.launch_server --model-path m --tp 4 --cuda-graph-max-bs 64")
    mine = Deployment.resolve("qwen3-32b", "h100-sxm", tp=4, engine=launched.apply(sglang))
    assert mine.engine.graph_max_tokens == 64  # the launch's, not the tier's
    assert sglang.scheduler == "prefill-first"  # enable_mixed_chunk off: prefill batches run without decodes
    assert trtllm.max_num_seqs == 2048 and trtllm.max_num_batched_tokens == 8192
    assert trtllm.scheduler == "inflight"  # enable_chunked_prefill off: whole prompts beside the decodes
    for eng in (vllm, sglang, trtllm):
        assert {"max_num_seqs", "max_num_batched_tokens", "scheduler"} <= set(eng.sources)


def _closed(kind: str = "serving_ttft", **kw) -> Record:
    base = dict(
        model="llama-3.1-8b",
        gpu="h100-sxm",
        engine="vllm",
        concurrency=16,
        statistic="mean",
        min_len_ratio=0.8,
        input_len=1024,
        output_len=128,
        value=100.0,
        unit="ms",
    )
    return Record(kind=kind, **(base | kw))


def test_closed_loop_records_are_validated():
    check_record(_closed())
    check_record(_closed("serving_tpot", min_len_ratio=1.0))
    with pytest.raises(InfercastError, match="output_len"):
        check_record(_closed("serving_tpot", output_len=1))
    with pytest.raises(InfercastError, match="min_len_ratio"):
        check_record(_closed(min_len_ratio=1.5))
    with pytest.raises(InfercastError, match="gpu_memory_utilization"):
        check_record(_closed(gpu_memory_utilization=1.2))
    check_record(_closed(spec_tokens=3, spec_acceptance=0.7))
    with pytest.raises(InfercastError, match="spec_acceptance"):
        check_record(_closed(spec_tokens=3, spec_acceptance=1.5))
    with pytest.raises(InfercastError, match=r"spec_acceptance.*spec_tokens"):
        check_record(_closed(spec_acceptance=0.7))
    check_record(_closed(moe_backend="marlin"))
    with pytest.raises(InfercastError, match="moe_backend") as caught:
        check_record(_closed(moe_backend="cutlass"))
    assert caught.value.field == "moe_backend"


def test_a_record_that_drafted_with_mtp_is_simulated_with_it():
    """An MTP run's record (3 drafts per step, acceptance 0.75) predicts a shorter TPOT than the same run without
    drafts: each step emits ~2.7 tokens for one verify pass of 4 per sequence."""
    from infercast.calibrate.predict import predict_record

    plain = _closed("serving_tpot", model="deepseek-r1", gpu="h200", engine="trtllm-1.1", precision="fp8", tp=8)
    drafted = replace(plain, spec_tokens=3, spec_acceptance=0.75)
    assert predict_record(drafted, None) < 0.75 * predict_record(plain, None)


def test_fixed_lengths_keep_closed_loop_clients_in_waves():
    """Equal lengths: all C requests finish in one step and the next C arrive together, so each waits for the
    whole wave's prefill; lengths in [0.8 L, L] spread the completions and TTFT falls towards one prefill."""
    dep = Deployment.resolve("llama-3.1-8b", "h100-sxm", engine="vllm")
    prof = base_profile("h100-sxm", "vllm")
    ranged = simulate_closed_loop(dep, prof, 32, 2048, 128)
    fixed = simulate_closed_loop(dep, prof, 32, 2048, 128, range_ratio=1.0)
    assert fixed.ttft_mean_s > 1.5 * ranged.ttft_mean_s
    assert math.isclose(fixed.tpot_mean_s, ranged.tpot_mean_s, rel_tol=0.35)
    assert simulate_closed_loop(dep, prof, 32, 2048, 128) is ranged  # cached per profile values and shape


def test_closed_loop_settings_reach_the_run_and_its_cache_key():
    """A client warm-up left out of the means (aiperf's) drops the first burst of C simultaneous prefills, so mean
    TTFT falls and TPOT barely moves; the overlap option and another scheduler reach the simulated engine, each
    a run of its own (not the cached default's)."""
    dep = Deployment.resolve("llama-3.1-8b", "h100-sxm", engine="vllm")
    prof = base_profile("h100-sxm", "vllm")
    plain = simulate_closed_loop(dep, prof, 32, 2048, 128)
    steady = simulate_closed_loop(dep, prof, 32, 2048, 128, warm_up_rounds=2)
    assert steady.ttft_mean_s < 0.9 * plain.ttft_mean_s
    assert math.isclose(steady.tpot_mean_s, plain.tpot_mean_s, rel_tol=0.1)
    lagged = simulate_closed_loop(dep, prof, 32, 2048, 128, overlap_scheduler=True)
    assert lagged.ttft_mean_s > plain.ttft_mean_s
    whole = simulate_closed_loop(dep, prof, 32, 2048, 128, scheduler="prefill-first")
    assert whole is not plain and whole.ttft_mean_s != plain.ttft_mean_s


def test_step_budget_staggers_a_wave_of_prompts():
    """A wave of 8 fixed-length 1k prompts: a budget of 8192 tokens prefills them in one step (each first token
    waits for all eight), a budget of 2048 two at a time (the first ones come out early): mean TTFT falls, and
    a record's ``max_num_batched_tokens`` reaches the simulated engine."""
    from infercast.calibrate.predict import predict_record

    dep = Deployment.resolve("qwen3-32b", "h100-sxm", tp=2, engine="vllm")
    prof = base_profile("h100-sxm", "vllm")
    whole = simulate_closed_loop(dep, prof, 8, 1024, 128, range_ratio=1.0, max_num_batched_tokens=8192)
    staggered = simulate_closed_loop(dep, prof, 8, 1024, 128, range_ratio=1.0, max_num_batched_tokens=2048)
    assert staggered.ttft_mean_s < 0.8 * whole.ttft_mean_s
    rec = _closed(model="qwen3-32b", tp=2, concurrency=8, input_len=1024, output_len=128, min_len_ratio=1.0)
    budgeted = predict_record(replace(rec, max_num_batched_tokens=2048))
    assert budgeted != predict_record(replace(rec, max_num_batched_tokens=8192))
    installed = simulate_closed_loop(dep, _installed(dep), 8, 1024, 128, range_ratio=1.0, max_num_batched_tokens=2048)
    assert budgeted == pytest.approx(installed.ttft_mean_s)


def test_one_slot_fewer_than_clients_makes_one_client_wait():
    """C clients on C - 1 sequence slots: one client always waits for a request to finish, so mean TTFT gains
    about one request's decode time over C, and more with longer outputs; a record's ``max_num_seqs`` reaches
    the simulated engine, and the CSV keeps it."""
    from infercast.calibrate.predict import predict_record

    dep = Deployment.resolve("llama-3.1-8b", "h100-sxm", engine="trtllm")
    prof = base_profile("h100-sxm", "trtllm")
    gain = {}
    for out in (128, 512):
        free = simulate_closed_loop(dep, prof, 8, 1024, out)
        short = simulate_closed_loop(dep, prof, 8, 1024, out, max_num_seqs=7)
        decode = out * 0.9 * short.tpot_mean_s  # mean output of [0.8 L, L]
        gain[out] = short.ttft_mean_s - free.ttft_mean_s
        assert 0.5 * decode / 8 < gain[out] < 2 * decode / 8
    assert gain[512] > 2.5 * gain[128]
    rec = _closed(engine="trtllm", concurrency=8, input_len=1024, output_len=512)
    assert predict_record(replace(rec, max_num_seqs=7)) > predict_record(rec) + 0.5 * gain[512]


def test_a_records_memory_fraction_reaches_the_engine_and_decides_when_reservations_queue():
    """TensorRT-LLM reserves prompt + output per request: Qwen3-32B FP8 at TP 1 in 0.80 of free memory holds
    128 x (2048 + 128) reserved tokens but not 128 x (2048 + 256), so the second queues (measured: 1.6 -> 2.5 s);
    in 0.90 of free memory both fit."""
    from infercast.calibrate.predict import predict_record

    rec = _closed(
        model="qwen3-32b",
        engine="trtllm",
        precision="fp8",
        kv_precision="fp8",
        tp=1,
        concurrency=128,
        input_len=2048,
        min_len_ratio=1.0,
        max_num_batched_tokens=128 + 2048 + 500,
    )
    fits, queues = replace(rec, output_len=128), replace(rec, output_len=256)
    tight = {n: predict_record(replace(r, gpu_memory_utilization=0.8)) for n, r in (("fits", fits), ("queues", queues))}
    loose = {n: predict_record(replace(r, gpu_memory_utilization=0.9)) for n, r in (("fits", fits), ("queues", queues))}
    assert tight["fits"] == pytest.approx(loose["fits"], rel=0.02)
    assert tight["queues"] > 1.4 * loose["queues"] and tight["queues"] > 1.4 * tight["fits"]


def test_records_keep_the_sequence_limit(tmp_path):
    from infercast.records.readers import read_records
    from infercast.records.record import write_records

    path = tmp_path / "r.csv"
    write_records(path, [_closed(max_num_seqs=7)], "test")
    assert read_records(path)[0].max_num_seqs == 7


def _installed(dep: Deployment):
    from infercast.calibrate.predict import profile_for

    return profile_for(_closed(model=dep.model.id, gpu=dep.hardware.id, engine=dep.engine.id), None)


def test_load_fit_starts_from_installed_kernels_and_engine_priors():
    fitted = base_profile("h100-sxm", "vllm", "kernels")
    prior = base_profile("h100-sxm", "vllm", "prior")
    for name in LOAD_PARAMS:
        assert getattr(fitted, name) == getattr(prior, name)
    with pytest.raises(InfercastError, match="base"):
        base_profile("h100-sxm", "vllm", "other")


def test_median_cost_sums_each_metrics_median_and_ignores_outliers():
    kinds = np.array(["serving_ttft"] * 5 + ["serving_tpot"] * 3)
    errors = np.log([1.1, 0.9, 1.2, 9.0, 0.1, 1.05, 0.95, 3.0])  # two wild TTFT points, one wild TPOT point
    assert median_cost(errors, kinds) == pytest.approx(np.log(1.2) - np.log(0.95))


def test_load_fit_recovers_the_overheads_a_synthetic_engine_ran_with():
    """Records made by the simulator itself at a known fixed overhead and jitter: the least-median grid search
    finds those values again (they lie on its grid), whatever the priors."""
    from infercast.calibrate.predict import predict_located
    from infercast.calibrate.profile_fit import build_profiles

    truth = {"vllm:request_overhead_s": 0.02, "vllm:request_jitter_s": 0.003, "vllm:stream_token_s": 0.0}
    profiles = build_profiles([("h100-sxm", "vllm")], truth, "truth", "kernels")
    shapes = [
        dict(concurrency=c, input_len=i, output_len=16, min_len_ratio=1.0) for c, i in ((8, 512), (8, 2048), (4, 1024))
    ]
    records = []
    for kind in ("serving_ttft", "serving_tpot"):
        for shape in shapes:
            rec = _closed(kind, **shape)
            records.append(replace(rec, value=predict_located(rec, profiles) * 1e3))
    result = fit_load(records, "vllm")
    assert result.values == pytest.approx(truth)
    assert at_grid_edge(result.values) == []
    assert at_grid_edge({"vllm:request_jitter_s": 0.001 / 1.5}) == ["vllm:request_jitter_s"]
    assert np.abs(result.after).max() < 1e-9 < np.abs(result.before).max()


def test_load_fit_finds_the_front_end_a_loaded_synthetic_engine_streamed_through():
    """Records made by the simulator with an API server that streams at most 10k tokens/s: three light points
    never reach that ceiling, a loaded one (128 clients at TP 8) does. The median fit finds the per-request
    times on the light points, the front-end fit the time per token on the loaded one; without the front-end the
    loaded point's TTFT comes out more than 10 % too short."""
    from infercast.calibrate.predict import predict_located
    from infercast.calibrate.profile_fit import build_profiles

    truth = {"vllm:request_overhead_s": 0.02, "vllm:request_jitter_s": 0.003, "vllm:stream_token_s": 1e-4}
    profiles = build_profiles([("h100-sxm", "vllm")], truth, "truth", "kernels")
    shapes = [
        dict(concurrency=8, input_len=512, output_len=16),
        dict(concurrency=8, input_len=2048, output_len=16),
        dict(concurrency=4, input_len=1024, output_len=16),
        dict(concurrency=128, input_len=256, output_len=64, tp=8),
    ]
    records = [
        _closed(kind, min_len_ratio=1.0, **shape) for kind in ("serving_ttft", "serving_tpot") for shape in shapes
    ]
    records = [replace(r, value=predict_located(r, profiles) * 1e3) for r in records]
    result = fit_load(records, "vllm")
    assert result.values == pytest.approx(truth)
    assert "front-end 100 us per token" in result.message
    off = build_profiles([("h100-sxm", "vllm")], truth | {"vllm:stream_token_s": 0.0}, "off", "kernels")
    loaded = records[3]
    assert predict_located(loaded, off) * 1e3 < 0.9 * loaded.value


def test_the_front_end_is_at_its_edge_at_the_slowest_value_the_measured_rates_allow():
    """A point that streamed 9.2k output tokens/s (128 clients, 13.9 ms TPOT) rules out 120 us per token, so
    100 us is the slowest the fit tried: at its edge there, though not at the grid's top."""
    loaded = [_closed("serving_ttft", concurrency=128, value=1.0), _closed("serving_tpot", concurrency=128, value=13.9)]
    assert front_end_candidates(loaded, "vllm", 0.0) == [0.0, 6e-5, 8e-5, 1e-4]
    assert at_grid_edge({"vllm:stream_token_s": 1e-4}, loaded) == ["vllm:stream_token_s"]
    assert at_grid_edge({"vllm:stream_token_s": 8e-5}, loaded) == []
    assert at_grid_edge({"vllm:stream_token_s": 1e-4}) == []  # without records: the grid's top, 120 us
    assert at_grid_edge({"vllm:stream_token_s": 0.0}, loaded) == []  # off is a value, not an edge


def test_load_fit_decides_on_all_records_not_the_screening_subset(monkeypatch):
    """The grid is screened on a subset, but the shortlist and the refinement are scored on every record: a
    subset made at other overheads (here: the whole grid shortlisted) cannot move the fit off the truth, while
    with a shortlist of one the subset alone decides."""
    from infercast.calibrate import load_fit
    from infercast.calibrate.predict import predict_located
    from infercast.calibrate.profile_fit import build_profiles

    def made_at(values: dict[str, float]) -> list:
        profiles = build_profiles([("h100-sxm", "vllm")], values, "truth", "kernels")
        shapes = [dict(concurrency=c, input_len=i, output_len=16, min_len_ratio=1.0) for c, i in ((8, 512), (4, 1024))]
        recs = [_closed(kind, **shape) for kind in ("serving_ttft", "serving_tpot") for shape in shapes]
        return [replace(r, value=predict_located(r, profiles) * 1e3) for r in recs]

    truth = {"vllm:request_overhead_s": 0.02, "vllm:request_jitter_s": 0.003, "vllm:stream_token_s": 0.0}
    decoy = {"vllm:request_overhead_s": 0.1, "vllm:request_jitter_s": 0.05, "vllm:stream_token_s": 0.0}
    records, misleading = made_at(truth), made_at(decoy)
    monkeypatch.setattr(load_fit, "spread", lambda recs: misleading)
    monkeypatch.setattr(load_fit, "SHORTLIST", 1000)
    assert fit_load(records, "vllm").values == pytest.approx(truth)
    monkeypatch.setattr(load_fit, "SHORTLIST", 1)
    assert fit_load(records, "vllm").values != pytest.approx(truth)


def test_spread_keeps_whole_points_across_regimes():
    recs = [
        _closed(k, tp=tp, concurrency=c)
        for tp in (1, 2, 4, 8)
        for c in (8, 16, 32, 64, 128)
        for k in ("serving_ttft", "serving_tpot")
    ]
    chosen = spread(recs, limit=6)
    points = {(r.tp, r.concurrency) for r in chosen}
    assert len(points) == 6 and len(chosen) == 12  # both records of each point
    assert {tp for tp, _ in points} == {1, 2, 4, 8}
    assert spread(recs, limit=6) == chosen


def test_load_fit_summary_gives_each_metric_its_own_median(tmp_path):
    """engine_load.yaml's summary reports TTFT and TPOT separately: pooled over both metrics' records, the median
    rose here (TPOT records crowd the middle) while each metric's own median, what the fit minimises, fell."""
    ttft = [_closed("serving_ttft", concurrency=c) for c in (8, 16, 32)]
    recs = ttft + [_closed("serving_tpot", concurrency=c, notes="vllm 0.12.0; x") for c in (8, 16, 32)]
    before = np.log([1.50, 1.40, 1.02, 1.05, 1.06, 1.07])
    after = np.log([1.20, 1.10, 1.09, 1.03, 1.04, 1.08])
    res = FitResult(
        {"vllm:request_overhead_s": 0.01}, {"vllm:request_overhead_s": 0.005}, {}, recs, before, after, message="grid"
    )
    pooled = [float(np.median(np.abs(np.expm1(e)))) for e in (before, after)]
    assert pooled[1] > pooled[0]
    summary = metric_errors(res)
    assert summary["ttft"] == pytest.approx({"before": 0.40, "after": 0.10})
    assert summary["tpot"] == pytest.approx({"before": 0.06, "after": 0.04})
    path = tmp_path / "engine_load.yaml"
    write_engine_load({"vllm": res}, recs, path, "test.csv")
    data = yaml.safe_load(path.read_text())
    assert data["engines"]["vllm"] == {"request_overhead_s": 0.01}
    entry = data["load_fit"]["engines"]["vllm"]
    assert entry["median_abs_error"] == summary and entry["points"] == 6 and entry["versions"] == ["0.12.0"]


def test_engine_versions_come_from_the_notes():
    recs = [_closed(notes="vllm 0.12.0; closed loop"), _closed(engine="sglang", notes="sglang 0.5.1.post1; x")]
    assert engine_versions(recs) == {"sglang": ["0.5.1.post1"], "vllm": ["0.12.0"]}


# ----- error bands -------------------------------------------------------------------------------------------
def test_load_levels():
    assert [load_level(c) for c in (1, 16, 17, 64, 65)] == ["light", "light", "medium", "medium", "heavy"]


def test_bands_pick_the_most_specific_row_with_enough_points(monkeypatch):
    rows = [
        {"metric": "tpot", "gpu": "fitted", "typical": 0.10, "p90": 0.3, "points": 100},
        {"metric": "tpot", "gpu": "fitted", "engine": "vllm", "typical": 0.05, "p90": 0.2, "points": 40},
        {
            "metric": "tpot",
            "gpu": "fitted",
            "engine": "vllm",
            "load": "heavy",
            "typical": 0.02,
            "p90": 0.1,
            "points": 3,
        },  # too few points: not used
    ]
    monkeypatch.setattr("infercast.analysis.error_bands.bands_table", lambda: {"bands": rows})
    regime = {"gpu": "fitted", "engine": "vllm", "load": "heavy", "tp": "1-2"}
    assert _lookup("tpot", regime, False) == ErrorBand("tpot", 0.05, 0.2, 40, {"gpu": "fitted", "engine": "vllm"})
    assert _lookup("tpot", regime | {"engine": "trtllm"}, False).typical == 0.10
    assert _lookup("ttft", regime, False) is None


def test_outside_the_calibration_the_held_out_bands_answer(monkeypatch):
    cv = [{"metric": "tpot", "gpu": "fitted", "typical": 0.04, "p90": 0.13, "points": 500}]
    held = [
        {"metric": "tpot", "typical": 0.17, "p90": 0.56, "points": 2989},
        {"metric": "tpot", "engine": "sglang", "typical": 0.15, "p90": 0.52, "points": 824},
        {"metric": "tpot", "engine": "sglang", "load": "heavy", "typical": 0.18, "p90": 0.44, "points": 135},
    ]
    monkeypatch.setattr("infercast.analysis.error_bands.bands_table", lambda: {"bands": cv})
    monkeypatch.setattr("infercast.analysis.error_bands.heldout_table", lambda: {"bands": held})
    regime = {"gpu": "fitted", "engine": "sglang", "load": "heavy", "tp": "1-2"}
    assert _lookup("tpot", regime, False).typical == 0.04  # inside: the cross-validated band
    band = _lookup("tpot", regime, True)
    assert (band.typical, band.p90) == (0.18, 0.44)
    assert band.regime == {"data": HELDOUT_REGIME, "engine": "sglang", "load": "heavy"}
    assert _lookup("tpot", regime | {"engine": "trtllm"}, True).typical == 0.17  # coarser row when no engine row
    monkeypatch.setattr("infercast.analysis.error_bands.heldout_table", lambda: {})
    assert _lookup("tpot", regime, True).typical == 0.04  # no held-out table: the cross-validated band


def test_predictions_outside_the_calibration_print_the_held_out_band():
    scope = calibration_scope()
    inside = confidence(Regime(scope["gpus"][0], "vllm", concurrency=8, model=scope["models"][0]))
    assert inside.bands["ttft"].regime.get("data") is None
    for kw in ({"gpu": "h200"}, {"model": "llama-3.1-70b"}, {"gpu": "mi300x"}):
        conf = confidence(
            Regime(kw.get("gpu", scope["gpus"][0]), "vllm", concurrency=8, model=kw.get("model", scope["models"][0]))
        )
        for metric in ("ttft", "tpot"):
            assert conf.bands[metric].regime["data"] == HELDOUT_REGIME, kw
            assert conf.bands[metric].p90 > inside.bands[metric].p90  # measured outside, wider


def test_out_of_calibration_scenarios_are_flagged():
    conf = confidence(Regime("mi300x", "vllm", tp=16, ep=8, concurrency=8, moe=True), saturated=True)
    text = " ".join(conf.warnings)
    assert "mi300x has no fitted kernel profile" in text
    measured = " ".join(confidence(Regime("b200", "vllm")).warnings)  # aiconfigurator's B200 tables, no end-to-end fit
    assert "b200: kernel parameters measured" in measured and "priors only" not in measured
    assert "tp 16 / ep 8" in text and "MoE" in text and "saturation" in text
    assert not any("attention" in w for w in confidence(Regime("h100-sxm", "vllm", attention="GQA")).warnings)
    v4 = confidence(Regime("h100-sxm", "vllm", attention=get_model("deepseek-v4-flash").attention_kind)).warnings
    assert any("compressed" in w and "not in the calibration data" in w for w in v4)


def test_a_gpu_or_model_the_serving_data_never_measured_is_flagged():
    scope = calibration_scope()
    seen_gpu, seen_model = scope["gpus"][0], scope["models"][0]

    def unseen(**kw):
        return unseen_in(confidence(Regime(kw.pop("gpu", seen_gpu), "vllm", **kw)))

    assert not unseen(model=seen_model)
    assert not unseen()  # no model given: nothing to check
    (one,) = unseen(model="llama-3.1-70b")
    assert "model llama-3.1-70b" in one and seen_gpu in one and seen_model in one
    (both,) = unseen(gpu="h200", model="llama-3.1-70b")  # h200 has a fitted kernel profile, no serving runs
    assert "GPU h200 and model llama-3.1-70b" in both
    (prior,) = unseen(gpu="mi300x", model=seen_model)  # a prior-only GPU: never measured under load either
    assert "GPU mi300x never measured" in prior
    assert not unseen_in(
        confidence(Regime(seen_gpu, "torch", model="llama-3.1-70b"))
    )  # its bands come from its harness
    from infercast import predict

    # predictions pass their model
    assert unseen_in(predict("llama-3.1-70b", "h100-sxm", tp=2, input_len=512, output_len=64).confidence)
    assert not unseen_in(predict(seen_model, seen_gpu, input_len=512, output_len=64).confidence)


def unseen_in(conf) -> list[str]:
    return [w for w in conf.warnings if "never measured under load (calibrated on serving runs" in w]


def test_closed_loop_rates_follow_littles_law():
    # 128 clients, 2 s to the first token, then 511 tokens at 10 ms: a 7.11 s cycle
    running, requests, tokens = closed_loop_rates(128, 2.0, 0.010, 512)
    assert requests == pytest.approx(128 / 7.11)
    assert running == pytest.approx(128 * 5.11 / 7.11)  # the rest wait for their first token
    assert tokens == pytest.approx(running / 0.010)
    with pytest.raises(ValueError):
        closed_loop_rates(8, 0.1, 0.0, 128)


def test_highest_served_rates_take_each_engines_best_complete_point():
    def point(engine, tp, ttft, tpot, c=64, osl=256):
        shape = dict(
            engine=engine,
            model="m",
            gpu="h100-sxm",
            precision="bf16",
            tp=tp,
            concurrency=c,
            input_len=1024,
            output_len=osl,
        )
        return [
            Record(kind="serving_ttft", value=ttft, unit="s", statistic="mean", **shape),
            Record(kind="serving_tpot", value=tpot, unit="s", statistic="mean", **shape),
        ]

    records = [*point("a", 1, 0.5, 0.020), *point("a", 2, 0.2, 0.010), *point("b", 1, 0.3, 0.015)]
    records.append(
        Record(
            kind="serving_ttft",
            value=1e-6,
            unit="s",
            engine="b",
            model="m",
            gpu="h100-sxm",
            precision="bf16",
            tp=8,
            concurrency=64,
            input_len=1024,
            output_len=256,
        )
    )
    rates = highest_served_rates(records)
    assert set(rates) == {"a", "b"}  # the TTFT-only point (no TPOT) is skipped, not read as a huge rate
    _, req, tok = closed_loop_rates(64, 0.2, 0.010, 256)
    assert rates["a"] == {"requests_per_s": round(req, 2), "output_tokens_per_s": round(tok, 1)}
    assert rates["b"]["requests_per_s"] == round(closed_loop_rates(64, 0.3, 0.015, 256)[1], 2)


def test_rates_above_the_highest_measured_are_flagged(monkeypatch):
    table = {
        "calibrated": {
            "gpus": ["h100-sxm"],
            "engines": ["trtllm", "vllm"],
            "rates": {"trtllm": {"requests_per_s": 40.0, "output_tokens_per_s": 9000.0}},
        },
        "bands": [],
    }
    monkeypatch.setattr("infercast.analysis.error_bands.bands_table", lambda: table)
    monkeypatch.setattr("infercast.analysis.error_bands.calibration_scope", lambda: table["calibrated"])
    warned = confidence(
        Regime("h100-sxm", "trtllm"), rates={"requests_per_s": 60.0, "output_tokens_per_s": 9500.0}
    ).warnings
    flagged = [w for w in warned if "calibration data (" in w]
    assert len(flagged) == 1  # 9,500 tokens/s is within 10 % of the 9,000 measured; 60 requests/s is not
    assert flagged[0].startswith("60 requests/s per server") and "40 on one h100-sxm server" in flagged[0]
    unmeasured = confidence(Regime("h100-sxm", "vllm"), rates={"requests_per_s": 1e6}).warnings  # no rates recorded
    assert not any("calibration data (" in w for w in unmeasured)


def test_loads_below_the_fewest_clients_measured_are_flagged(monkeypatch):
    """The closed-loop points give each engine's span of clients; a prediction below it says its per-request
    time was fitted on waves of clients, and more strongly where that fit ended on the largest value it tried
    (above its prior). Engines without a span, or at or above its start, are not flagged."""
    ttft = dict(kind="serving_ttft", value=0.1, unit="s")
    points = [Record(engine="a", concurrency=c, **ttft) for c in (16, 128, 32)]
    points += [Record(engine="b", concurrency=8, **ttft), Record(engine="b", num_prompts=8, **ttft)]
    assert served_concurrency(points) == {"a": [16, 128], "b": [8, 8]}
    table = {
        "calibrated": {
            "gpus": ["h100-sxm"],
            "engines": ["sglang", "vllm"],
            "concurrency": {"sglang": [16, 128], "vllm": [8, 128]},
        },
        "bands": [],
    }
    monkeypatch.setattr("infercast.analysis.error_bands.bands_table", lambda: table)
    monkeypatch.setattr("infercast.analysis.error_bands.calibration_scope", lambda: table["calibrated"])
    fit = {
        "engines": {
            "sglang": {"at_edge": ["sglang:request_overhead_s"], "priors": {"sglang:request_overhead_s": 0.005}},
            "vllm": {"at_edge": [], "priors": {"vllm:request_overhead_s": 0.005}},
        }
    }
    monkeypatch.setattr("infercast.analysis.error_bands.load_fit", lambda: fit)
    values = {"sglang": {"request_overhead_s": 0.15}, "vllm": {"request_overhead_s": 0.0015}}
    monkeypatch.setattr("infercast.analysis.error_bands.fitted_engine_values", lambda: values)

    def below(engine, concurrency):
        return [
            w for w in confidence(Regime("h100-sxm", engine, concurrency=concurrency)).warnings if "is below the" in w
        ]

    (lone,) = below("sglang", 1)
    assert lone.startswith("1 concurrent request is below the 16-128 clients sglang") and "(150 ms)" in lone
    (few,) = below("vllm", 4)
    assert "8-128 clients vllm" in few and "largest value" not in few
    assert not below("sglang", 16) and not below("vllm", 8) and not below("trtllm", 1)


@pytest.mark.skipif(not calibration_scope().get("rates"), reason="no committed calibrated rates")
def test_simulations_and_predictions_past_the_measured_rates_say_so():
    from infercast import predict
    from infercast.sim.api import simulate

    def rate_warnings(conf):
        return [w for w in conf.warnings if "served in the calibration data" in w]

    rates = calibration_scope()["rates"]
    # TensorRT-LLM at TP 8 would stream ~14k tokens/s here; its fitted API-server front-end holds the simulation
    # near the ~9.3k its best point sustained, so nothing is said
    kw = dict(tp=8, input_len=1024, output_len=512, max_num_seqs=127, num_requests=256)
    capped = simulate("llama-3.1-8b", "h100-sxm", concurrency=128, engine="trtllm", **kw)
    assert capped.summary.output_throughput_tok_s < 1.1 * rates["trtllm"]["output_tokens_per_s"]
    assert not rate_warnings(capped.confidence)
    # vLLM (no front-end fitted: its points never reach a ceiling) simulates far more than it ever sustained
    busy = simulate("llama-3.1-8b", "h100-sxm", concurrency=128, engine="vllm", **kw)
    assert busy.summary.output_throughput_tok_s > 1.1 * rates["vllm"]["output_tokens_per_s"]
    assert any("output tokens/s per server" in w for w in rate_warnings(busy.confidence))
    assert not rate_warnings(simulate("llama-3.1-8b", "h100-sxm", concurrency=8, engine="vllm", **kw).confidence)
    # a static batch of 256: vLLM's is far past what it sustained; TensorRT-LLM's front-end paces it as above
    big = predict("llama-3.1-8b", "h100-sxm", tp=8, engine="vllm", input_len=1024, output_len=512, batch=256)
    assert rate_warnings(big.confidence)
    paced = predict("llama-3.1-8b", "h100-sxm", tp=8, engine="trtllm", input_len=1024, output_len=512, batch=256)
    assert paced.output_throughput_tok_s < 1e4 and not rate_warnings(paced.confidence)
    assert not rate_warnings(predict("llama-3.1-8b", "h100-sxm", input_len=1024, output_len=512).confidence)
    from infercast.analysis.sweep import sweep

    rows = sweep(
        models=["llama-3.1-8b"],
        gpus=["h100-sxm"],
        engines=["vllm", "trtllm"],
        tps=[8],
        batches=[1, 256],
        input_lens=[1024],
        output_lens=[512],
    )
    flags = dict(zip(zip(rows.engine, rows.batch, strict=True), rows.within_calibrated_rates, strict=True))
    assert flags == {("vllm", 1): True, ("vllm", 256): False, ("trtllm", 1): True, ("trtllm", 256): True}


@pytest.mark.skipif(not bands_table(), reason="no committed error bands")
def test_predictions_carry_error_bands():
    from infercast import predict
    from infercast.analysis.sweep import sweep

    pred = predict("llama-3.1-8b", "h100-sxm", input_len=1024, output_len=128, batch=8).to_dict()
    assert {"ttft", "tpot"} <= set(pred["error_bands"])
    assert 0 < pred["error_bands"]["tpot"]["typical_pct"] <= pred["error_bands"]["tpot"]["p90_pct"]
    df = sweep(batches=[1, 32, 256])
    assert np.isfinite(df["tpot_error"]).all() and (df["tpot_error"] > 0).all()


def test_vllm_from_0_14_hides_its_per_step_cpu_work_and_shares_vllms_fitted_load_parameters():
    from infercast import predict
    from infercast.cost.profile import fitted_as, load_profile

    sync, async_ = (load_profile("h100-sxm", "hopper", e) for e in ("vllm", "vllm-0.14"))
    assert sync.step_overhead_s > 0 and sync.seq_overhead_s > 0
    assert async_.step_overhead_s == 0 and async_.seq_overhead_s == 0  # overlapped with the GPU step
    for key in ("request_overhead_s", "request_jitter_s", "stream_token_s", "hbm_efficiency"):
        assert getattr(async_, key) == getattr(sync, key), key
    assert fitted_as("vllm-0.14") == "vllm" and fitted_as("sglang") == "sglang"
    kw = dict(input_len=512, output_len=64, batch=32)
    a, b = predict("llama-3.1-8b", "h100-sxm", **kw), predict("llama-3.1-8b", "h100-sxm", engine="vllm-0.14", **kw)
    step = sync.step_overhead_s + sync.seq_overhead_s * 32
    assert a.tpot_s - b.tpot_s == pytest.approx(step, rel=0.02)  # the decode step less vllm's CPU work
    conf = b.confidence
    assert all(
        band.regime == {"data": HELDOUT_REGIME, "engine": "vllm-0.14", "load": "medium"} for band in conf.bands.values()
    )
    (note,) = [w for w in conf.warnings if w.startswith("engine vllm-0.14")]
    assert "per-request ones vllm's fitted values" in note and "published serving runs" in note


def test_a_releases_silicon_fit_is_its_own_not_the_release_it_takes_fitted_values_from():
    """vLLM 0.14's per-token all-reduce time comes from ``silicon_fit.yaml`` (fitted on the public silicon rows,
    bounded as every time), named as such; vllm, whose other fitted values it shares, keeps none."""
    from infercast.cost.profile import load_profile, silicon_fit

    fitted = silicon_fit()["engines"]["vllm-0.14"]["allreduce_token_s"]
    assert 0 < fitted <= 60e-9  # benchmarks/allreduce_token_fit.py's grid
    for gpu, arch in (("h100-sxm", "hopper"), ("b200", "blackwell")):
        new, old = load_profile(gpu, arch, "vllm-0.14"), load_profile(gpu, arch, "vllm")
        assert new.allreduce_token_s == fitted and old.allreduce_token_s == 0.0
        assert "silicon_sample.csv" in new.provenance["allreduce_token_s"]


def test_one_serving_family_says_its_load_size_and_statistic():
    """Closed-loop and vllm-bench rows are one family: the former closed-loop kinds are refused with the mapping,
    an open-loop or offline row must give its size, and a throughput row has no statistic."""
    with pytest.raises(InfercastError, match="now 'serving_ttft' with concurrency"):
        check_record(_closed("closed_loop_ttft"))
    with pytest.raises(InfercastError, match="num_prompts"):
        check_record(_closed(concurrency=0))
    check_record(_closed(concurrency=0, num_prompts=10))
    with pytest.raises(InfercastError, match="statistic"):
        check_record(_closed("serving_throughput", statistic="mean", unit="tok/s"))
    with pytest.raises(InfercastError, match="statistic"):
        check_record(_closed(statistic="p99"))
    rec = _closed(concurrency=8)
    assert (rec.prompts, rec.in_flight, rec.closed_loop) == (80, 8, True)
    offline = _closed(concurrency=0, num_prompts=10)
    assert (offline.prompts, offline.in_flight, offline.closed_loop) == (10, 10, False)


def test_a_runs_records_share_one_simulation_and_its_statistics():
    """TTFT, TPOT and throughput records of one benchmark are one cached run; a median TPOT and a mean TPOT are
    two statistics of it, both predicted."""
    from infercast.calibrate import serving
    from infercast.calibrate.predict import predict_record

    serving._CACHE.clear()
    mean = _closed("serving_tpot", concurrency=8, output_len=64)
    median = replace(mean, statistic="median")
    ttft = replace(mean, kind="serving_ttft")
    tput = replace(mean, kind="serving_throughput", statistic="", unit="tok/s")
    values = [predict_record(r) for r in (mean, median, ttft, tput)]
    assert len(serving._CACHE) == 1
    assert all(v > 0 for v in values) and values[0] != values[1]
    res = next(iter(serving._CACHE.values()))
    assert values == [res.tpot_mean_s, res.tpot_median_s, res.ttft_mean_s, res.output_tok_s]
