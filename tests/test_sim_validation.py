"""Every simulator option is validated where it is given: a bad or ignored value is an InfercastError naming
the option, never a raw TypeError/ZeroDivisionError or a silent default."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infercast.errors import InfercastError
from infercast.sim.api import DisaggConfig, config_from_keywords, simulate, simulation_config
from infercast.sim.cluster import KVLink
from infercast.sim.config import ClusterConfig, EngineConfig, ObserveConfig, SimulationConfig
from infercast.sim.metrics import SLO
from infercast.sim.scheduler import make_scheduler
from infercast.sim.speculative import SpeculativeConfig
from infercast.sim.workload import WorkloadSpec, builtin_trace, retime, synthetic
from infercast.specs.deployment import Deployment

MODEL, GPU = "llama-3.1-8b", "h100-sxm"
SMALL = dict(input_len=200, output_len=20, num_requests=20, rate=5)


def _field(fn, *args, **kwargs) -> str | None:
    with pytest.raises(InfercastError) as info:
        fn(*args, **kwargs)
    assert "\n" not in str(info.value)
    return info.value.field


# ----- engine limits -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["max_num_seqs", "max_num_batched_tokens", "block_size"])
@pytest.mark.parametrize("value", [0, -1, 2.5, True, "x"])
def test_engine_limits_must_be_positive_integers(name, value):
    assert _field(simulate, MODEL, GPU, **{name: value}, **SMALL) == name


def test_engine_limits_are_applied_not_replaced_by_defaults():
    res = simulate(MODEL, GPU, max_num_seqs=3, max_num_batched_tokens=1000, **SMALL)
    assert res.config["max_num_seqs"] == 3 and res.config["max_num_batched_tokens"] == 1000
    assert res.occupancy()["running"].max() <= 3


def test_replica_config_validates_on_construction():
    dep = Deployment.resolve(MODEL, GPU)
    assert _field(EngineConfig, max_num_seqs=0) == "max_num_seqs"
    assert _field(EngineConfig, scheduler="disagg") == "scheduler"  # a pool's replicas run one scheduler
    assert _field(EngineConfig, preemption="drop") == "preemption"
    assert _field(EngineConfig, gpu_memory_utilization=1.5) == "gpu_memory_utilization"
    assert EngineConfig(max_num_seqs=8.0).max_num_seqs == 8
    for name in ("step_time_scale", "kv_pool_scale"):
        for bad in (0, -1.0, float("nan"), float("inf"), "fast", True):
            assert _field(EngineConfig, **{name: bad}) == name
    assert _field(ClusterConfig, replicas=0) == "replicas"
    assert _field(ClusterConfig, router="random") == "router"
    assert _field(ObserveConfig, goodput="latency:3") == "goodput"
    work = WorkloadSpec(input_len=10, output_len=5, rate=1.0)
    assert _field(SimulationConfig, "llama", work) == "deployment"
    assert (
        _field(
            SimulationConfig,
            dep,
            work,
            engine=EngineConfig(scheduler="static"),
            cluster=ClusterConfig(disagg=DisaggConfig()),
        )
        == "scheduler"
    )
    assert _field(WorkloadSpec, input_len=10, output_len=5, rate=1.0, seed=-1) == "seed"


@pytest.mark.parametrize("scheduler", ["", 3, "fifo"])
def test_unknown_schedulers(scheduler):
    assert _field(simulate, MODEL, GPU, scheduler=scheduler, **SMALL) == "scheduler"
    assert _field(make_scheduler, scheduler) == "scheduler"


def test_router_must_be_known():
    assert _field(simulate, MODEL, GPU, router=None, replicas=2, **SMALL) == "router"


# ----- disaggregation ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(prefill_instances=0), "prefill_instances"),
        (dict(decode_instances=0), "decode_instances"),
        (dict(prefill_tp=0), "prefill_tp"),
        (dict(link="fast"), "link"),
    ],
)
def test_disagg_config_validation(kwargs, field):
    assert _field(DisaggConfig, **kwargs) == field


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(bandwidth_bytes_s=0), "bandwidth_bytes_s"),
        (dict(bandwidth_bytes_s=math.nan), "bandwidth_bytes_s"),
        (dict(latency_s=-1e-6), "latency_s"),
    ],
)
def test_kv_link_validation(kwargs, field):
    assert _field(KVLink, **kwargs) == field


def test_disagg_needs_its_scheduler_and_reports_it():
    assert _field(simulate, MODEL, GPU, disagg=DisaggConfig(), **SMALL) == "disagg"
    assert _field(simulate, MODEL, GPU, scheduler="disagg", replicas=2, **SMALL) == "replicas"
    res = simulate(MODEL, GPU, scheduler="disagg", disagg=DisaggConfig(2, 1), **SMALL)
    cfg = res.config
    assert cfg["scheduler"] == "disagg" and cfg["replicas"] == 3
    assert (cfg["prefill_instances"], cfg["decode_instances"]) == (2, 1)
    assert set(res.table.prefill_replica.tolist()) <= {0, 1} and set(res.table.replica.tolist()) == {2}


# ----- workload options ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(trace="azure_conv", num_requests=0), "num_requests"),  # not "replay everything"
        (dict(trace="azure_conv", num_requests=10**6), "num_requests"),  # more than the trace has
        (dict(trace="azure_conv", rate=5, concurrency=4), "rate"),
        (dict(trace="azure_conv", burstiness=0.5), "burstiness"),  # no --rate: nothing to shape
        (dict(trace="azure_conv", arrival="constant"), "arrival"),
        (dict(input_len=100, output_len=10, concurrency=4, burstiness=2.0), "burstiness"),
        (dict(input_len=100, output_len=10, offline=True, burstiness=2.0), "burstiness"),
        (dict(input_len=100, output_len=10, rate=2, arrival="offline"), "arrival"),
        (dict(input_len=100, output_len=10, rate=2, arrival="bursty"), "arrival"),
        (dict(input_len=100, output_len=10, rate=2, seed=-1), "seed"),
        (dict(input_len=100, rate=2), "output_len"),
        (dict(workload=synthetic(10, 10, 10, rate=1), input_len=5, output_len=5, rate=1), "workload"),
        (dict(workload=synthetic(10, 10, 10, rate=1), num_requests=11), "num_requests"),
        (dict(workload=[1, 2, 3]), "workload"),
        (dict(trace="azure_chat"), "trace"),
        (dict(trace="missing.csv"), "trace"),
    ],
)
def test_conflicting_or_ignored_workload_options(kwargs, field):
    assert _field(lambda **kw: WorkloadSpec(**kw).build(), **kwargs) == field
    assert _field(simulate, MODEL, GPU, **kwargs) == field


def test_builtin_trace_names_are_spelled_as_builtin_trace_accepts():
    for name in ("azure_conv", "AZURE_CONV", "azure_conv_2023.csv"):
        work = WorkloadSpec(trace=name, num_requests=5).build()
        assert np.array_equal(work.prompt_len, builtin_trace("azure_conv").prompt_len[:5])
    with pytest.raises(InfercastError, match="azure_conv") as info:
        simulate(MODEL, GPU, trace="azure_chat")
    assert info.value.allowed == ["azure_code", "azure_conv"]


def test_trace_options_take_effect():
    trace = builtin_trace("azure_conv")
    work = WorkloadSpec(trace="azure_conv", num_requests=300, rate=4.0, prefix=(2, 512), seed=3).build()
    assert len(work) == 300
    assert work.summary()["rate_rps"] == pytest.approx(4.0, rel=0.02)  # re-timed to the rate
    assert np.array_equal(work.prompt_len - 512, trace.prompt_len[:300])  # same requests, prefix added in front
    assert work.block_hashes is not None and all(len(h) == 512 // 16 for h in work.block_hashes)
    closed = WorkloadSpec(trace="azure_conv", num_requests=50, concurrency=4).build()
    assert closed.closed_loop == 4 and (closed.arrival == 0).all()
    own = WorkloadSpec(trace="azure_conv", num_requests=50).build()  # no load given: the trace's own arrivals
    assert np.array_equal(own.arrival, trace.arrival[:50])


def test_workload_object_options_take_effect():
    base = synthetic(100, "uniform:100,500", 20, arrival="offline", seed=4)
    cut = WorkloadSpec(workload=base, num_requests=40, rate=8.0, seed=4).build()
    assert len(cut) == 40 and cut.arrival[-1] > 0
    # re-timing an offline synthetic workload at a rate gives that synthetic workload at the rate
    same = synthetic(100, "uniform:100,500", 20, rate=8.0, seed=4)
    assert np.array_equal(retime(base, rate=8.0, seed=4).arrival, same.arrival)
    res = simulate(MODEL, GPU, workload=base, prefix=(1, 320))
    assert res.table.cached_tokens.max() == 320 and res["prefix_cache_hit_rate"] > 0.3


def test_retime_keeps_block_hashes_and_needs_one_load():
    work = synthetic(50, 100, 10, arrival="offline", prefix=(2, 64), seed=1)
    fast = retime(work, rate=3.0, seed=2)
    assert all(a is b for a, b in zip(work.block_hashes, fast.block_hashes, strict=True))
    assert _field(retime, work) == "rate"
    assert _field(retime, work, rate=1.0, offline=True) == "rate"


def test_simulate_keeps_its_keyword_api():
    res = simulate(
        MODEL,
        GPU,
        input_len=300,
        output_len=30,
        num_requests=60,
        rate=10,
        burstiness=0.5,
        arrival="gamma",
        prefix=(2, 256),
        seed=3,
    )
    assert res["num_requests"] == 60 and res["prefix_cache_hit_rate"] > 0


def test_unknown_simulate_keywords_are_named_in_one_line():
    """A misspelt keyword is an InfercastError naming it (with the nearest keywords), not a TypeError."""
    with pytest.raises(InfercastError) as info:
        simulate(MODEL, GPU, num_request=20, input_len=200, output_len=20, rate=5)
    assert info.value.field == "num_request" and "num_requests" in str(info.value)
    assert "\n" not in str(info.value)


def test_simulation_config_takes_typed_parts():
    """The seam below ``simulate``'s keywords: a Deployment and the typed parts, the same run as the keywords."""
    dep = Deployment.resolve(MODEL, GPU, tp=2)
    spec = WorkloadSpec(input_len=200, output_len=20, num_requests=20, rate=5.0)
    config = simulation_config(dep, spec, EngineConfig(max_num_seqs=8), observe=ObserveConfig(trace_steps=10))
    assert config == config_from_keywords(MODEL, GPU, tp=2, max_num_seqs=8, trace_steps=10, **SMALL)
    pooled = Deployment.resolve(MODEL, GPU, pp=2)
    disagg = ClusterConfig(disagg=DisaggConfig())
    assert _field(simulation_config, pooled, spec, EngineConfig("chunked"), disagg) == "pp"


# ----- speculative decoding, SLOs ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args,field",
    [
        ((True, 0.5), "spec_tokens"),
        ((0, 0.5), "spec_tokens"),
        ((2.5, 0.5), "spec_tokens"),
        ((4, "x"), "spec_acceptance"),
        ((4, None), "spec_acceptance"),
        ((4, 1.2), "spec_acceptance"),
        ((4, math.nan), "spec_acceptance"),
        ((4, 0.5, 7), "draft_model"),
        ((4, 0.5, None, -0.1), "draft_cost"),
    ],
)
def test_speculative_config_validation(args, field):
    assert _field(SpeculativeConfig, *args) == field


def test_speculative_config_bounds_are_inclusive():
    assert SpeculativeConfig(1, 0.0).acceptance == 0.0 and SpeculativeConfig(1, 1).acceptance == 1.0


@pytest.mark.parametrize(
    "spec", ["ttft:nan", "ttft:inf", "tpot:0", "ttft:", "ttft:100 ttft:200", [200], 200, ["ttft:100", None]]
)
def test_bad_slos(spec):
    assert _field(SLO.parse, spec) == "goodput"


def test_slo_text():
    slo = SLO.parse(" ttft:200 , tpot:50")
    assert slo.describe() == "ttft ≤ 200 ms, tpot ≤ 50 ms"
    assert SLO.parse(None) is None
    for empty in ([], "", " , "):  # an empty SLO is refused, never silently dropped (issue 10)
        with pytest.raises(InfercastError, match="at least one SLO"):
            SLO.parse(empty)


# ----- other simulate options ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(trace_steps=-1), "trace_steps"),
        (dict(sample_interval=-1.0), "sample_interval"),
        (dict(replicas=0), "replicas"),
        (dict(prefix_caching="yes"), "prefix_caching"),
        (dict(speculative=(4, 0.5)), "speculative"),
    ],
)
def test_other_simulate_options(kwargs, field):
    assert _field(simulate, MODEL, GPU, **kwargs, **SMALL) == field


def test_scheduler_names_say_the_policy_and_engines_choose_one():
    assert simulate(MODEL, GPU, **SMALL).config["scheduler"] == "chunked"  # vLLM V1 preset: chunked prefill
    assert simulate(MODEL, GPU, engine="vllm-0.6", **SMALL).config["scheduler"] == "prefill-first"
    for old, new in (("sarathi", "chunked"), ("vllm", "prefill-first"), ("Static", "static")):
        assert simulate(MODEL, GPU, scheduler=old, **SMALL).config["scheduler"] == new
    torch = SimulationConfig(Deployment.resolve(MODEL, GPU, engine="torch"), WorkloadSpec(**SMALL))
    assert torch.scheduler == "prefill-first" and torch.engine.scheduler is None
