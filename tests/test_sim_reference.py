"""The fast simulator agrees with the step-by-step reference (:mod:`infercast.sim.reference`) on every summary
metric and every request's timestamps, to 1e-9 relative, over generated configurations: all schedulers,
recompute and swap preemption under memory pressure, prefix caching, sliding windows, MoE, several replicas
behind each router, closed loops and disaggregated pools, with and without an overlap scheduler, with and without
an API server front-end that binds."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pytest

from infercast import memory_budget
from infercast.cost.profile import load_profile
from infercast.errors import InfercastError
from infercast.sim.api import config_from_keywords, run
from infercast.sim.config import DisaggConfig, KVLink, SimulationConfig
from infercast.sim.reference import reference_simulate
from infercast.specs.catalog import get_hardware

NUM_CASES = 360
RTOL = 1e-9
ATOL = 1e-12
"""Seconds: for quantities that are zero up to rounding (the spread of identical latencies)."""
PER_REQUEST = (
    "arrival",
    "visible",
    "scheduled",
    "first_token",
    "last_token",
    "finish",
    "preemptions",
    "cached_tokens",
    "replica",
    "prefill_replica",
)

MODELS = [("llama-3.1-8b", 0.6), ("gpt-oss-20b", 0.15), ("qwen3-0.6b", 0.15), ("gemma-2-9b", 0.1)]
"""Dense (most cases), MoE with 128-token sliding windows, a small model, 4096-token windows."""
WINDOWED_MODELS = [("gpt-oss-20b", 0.3), ("gemma-2-9b", 0.3), ("mistral-7b", 0.2), ("phi-3-mini", 0.2)]
"""Sliding layers beside full ones (1 + 1 layer groups), and every layer windowed (mistral: 4,096; phi-3: 2,047)."""
PRESSURE = {
    "llama-3.1-8b": (0.2343, 0.01),
    "qwen3-0.6b": (0.051, 0.012),
    "gemma-2-9b": (0.2765, 0.012),
    "gpt-oss-20b": (0.2055, 0.0013),
    "mistral-7b": (0.2034, 0.015),
    "phi-3-mini": (0.1283, 0.044),
}
"""gpu_memory_utilization ranges leaving about 200-800 KV blocks of every layer on an H100 (base, width); 150-450
for gpt-oss and gemma, whose window-capped sequences take fewer. At vLLM's large-GPU default of 1,024 sequences,
whose sampler reserve sizes the pool (a case that sets fewer sequences gets a larger pool)."""
BLOCK_SIZES = {"phi-3-mini": [None, 11, 31]}
"""Block sizes dividing phi-3's window - 1 (2,046): its last windowed block is taken at the window itself."""
LONG_PROMPTS = ("gemma-2-9b", "mistral-7b")
"""Models whose prompts reach past their 4,096-token window in half the unpressured cases."""


FRONT_ENDS = (0.0, 0.0, 5e-5, 3e-4)
"""Front-end time per streamed token (``stream_token_s``): half the cases without one, a quarter at 20k tokens/s,
a quarter at 3.3k tokens/s, a ceiling most loaded cases reach."""


def _case(rng: random.Random, models: list[tuple[str, float]] = MODELS) -> dict:
    """One random configuration (small: tens of requests, so the reference's per-step cost stays low)."""
    model = rng.choices([m for m, _ in models], [w for _, w in models])[0]
    scheduler = rng.choice(["chunked", "chunked", "prefill-first", "inflight", "static", "disagg"])
    long_prompts = model in LONG_PROMPTS and rng.random() < 0.5
    kw: dict = dict(
        model=model,
        scheduler=scheduler,
        num_requests=rng.randint(6, 28),
        input_len=f"uniform:{rng.randint(5, 200)},{rng.randint(300, 5000 if long_prompts else 2500)}",
        output_len=rng.choice([f"uniform:1,{rng.randint(2, 90)}", str(rng.randint(1, 60))]),
        seed=rng.randint(0, 10_000),
        block_size=rng.choice(BLOCK_SIZES.get(model, [None, 8, 16, 32])),
        prefix_caching=rng.random() < 0.85,
        preemption=rng.choice(["recompute", "swap"]),
    )
    load = rng.random()
    if load < 0.6:
        kw["rate"] = rng.choice([2.0, 10.0, 40.0, 200.0])
    elif load < 0.85:
        kw["concurrency"] = rng.randint(1, 12)
    else:
        kw["offline"] = True
    if rng.random() < 0.35:
        kw["prefix"] = (rng.randint(1, 4), rng.randint(16, 1500))
    if rng.random() < 0.45:  # memory pressure: a KV pool of 3k-12k tokens under a heavy load
        base, span = PRESSURE[model]
        kw["gpu_memory_utilization"] = base + rng.random() * span
        kw.pop("rate", None), kw.pop("concurrency", None), kw.pop("offline", None)
        kw.update(rng.choice([{"rate": 200.0}, {"offline": True}, {"concurrency": rng.randint(6, 16)}]))
        kw["input_len"] = f"uniform:{rng.randint(100, 800)},{rng.randint(1000, 2500)}"
        kw["output_len"] = f"uniform:{rng.randint(1, 40)},{rng.randint(60, 160)}"
    elif model == "gpt-oss-20b":
        kw["gpu_memory_utilization"] = 0.5
    if rng.random() < 0.3:
        kw["max_num_seqs"] = rng.randint(1, 16)
    if rng.random() < 0.4:
        kw["max_num_batched_tokens"] = rng.choice([64, 256, 700, 2048])
    if "gpu_memory_utilization" in kw and kw["gpu_memory_utilization"] != 0.5:
        kw["gpu_memory_utilization"] -= _unreserved(kw)  # the pressure ranges hold at the preset's limits
    if scheduler == "disagg":
        kw["disagg"] = DisaggConfig(
            rng.randint(1, 2), rng.randint(1, 2), decode_tp=rng.choice([None, 2]), link=KVLink(rng.choice([5e9, 50e9]))
        )
    elif rng.random() < 0.35:
        kw["replicas"] = rng.randint(2, 3)
        kw["router"] = rng.choice(["round_robin", "least_outstanding", "prefix_affinity"])
    if rng.random() < 0.2:
        kw["goodput"] = ["ttft:300", "tpot:40"]
    kw["overlap_scheduler"] = kw["seed"] % 3 == 0  # a third plan the next step while one runs (no new draw)
    kw["stream_token_s"] = FRONT_ENDS[kw["seed"] // 3 % len(FRONT_ENDS)]  # an API server that binds (no new draw)
    return kw


def _unreserved(kw: dict) -> float:
    """The fraction of an H100's memory that a case's own step budget and sequence limit leave out of the
    activation reserve, against the preset's (a smaller reserve would otherwise give a larger, pressure-free pool)."""
    if "max_num_seqs" not in kw and "max_num_batched_tokens" not in kw:
        return 0.0
    limits = {k: kw[k] for k in ("max_num_seqs", "max_num_batched_tokens") if k in kw}
    preset = memory_budget(kw["model"], "h100-sxm", gpu_memory_utilization=0.9)
    own = memory_budget(kw["model"], "h100-sxm", gpu_memory_utilization=0.9, **limits)
    return (preset.activation_bytes - own.activation_bytes) / get_hardware("h100-sxm").memory.usable


def _close(a: object, b: object) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
        return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= max(RTOL * max(abs(a), abs(b)), ATOL)
    return a == b


def _differences(fast, ref) -> list:
    out = []
    for key, value in fast.summary.items():
        other = ref.summary[key]
        if isinstance(value, dict):
            out += [(key, q, v, other[q]) for q, v in value.items() if not _close(v, other[q])]
        elif not _close(value, other):
            out.append((key, value, other))
    if set(fast.summary) != set(ref.summary):
        out.append(("keys", sorted(set(fast.summary) ^ set(ref.summary))))
    for name in PER_REQUEST:
        x, y = np.asarray(getattr(fast.table, name), float), np.asarray(getattr(ref.table, name), float)
        if not np.allclose(x, y, rtol=RTOL, atol=0, equal_nan=True):
            out.append((name, int(np.argmax(~np.isclose(x, y, rtol=RTOL, atol=0, equal_nan=True)))))
    return out


def _keywords(kw: dict) -> tuple[str, dict]:
    """A case's model and its other keywords, the API front-end's streaming cost put into the profile."""
    kw = dict(kw)
    model = kw.pop("model")
    stream = kw.pop("stream_token_s", 0.0)
    if stream:
        kw["profile"] = replace(load_profile("h100-sxm", "hopper", "vllm"), stream_token_s=stream)
    return model, kw


def _compare(kw: dict) -> tuple[object, list] | None:
    """Run case ``kw`` on both simulators: (fast result, differences), or None when both refuse it."""
    model, kw = _keywords(kw)
    try:
        config = config_from_keywords(model, "h100-sxm", **kw)
        fast = run(config)
    except InfercastError as exc:  # e.g. a request larger than the KV pool: the reference must refuse too
        with pytest.raises(InfercastError):
            reference_simulate(config)
        assert exc.field is not None
        return None
    return fast, _differences(fast, reference_simulate(config))


def test_fast_simulator_equals_the_reference_on_generated_cases():
    rng = random.Random(20261123)
    compared, refused = 0, 0
    seen = {"preemptions": 0, "prefix hits": 0, "swap": 0, "disagg": 0, "window": 0, "front-end": 0}
    failures = []
    for n in range(NUM_CASES):
        kw = _case(rng)
        model = kw["model"]
        outcome = _compare(kw)
        if outcome is None:
            refused += 1
            continue
        fast, diff = outcome
        if diff:
            failures.append((n, model, kw, diff[:4]))
        compared += 1
        s = fast.summary
        seen["preemptions"] += s.preemptions > 0
        seen["swap"] += s.preemptions > 0 and kw["preemption"] == "swap"
        seen["prefix hits"] += s.prefix_cache_hit_rate > 0
        seen["disagg"] += kw["scheduler"] == "disagg"
        seen["window"] += model in ("gpt-oss-20b", "gemma-2-9b")
        seen["front-end"] += kw["stream_token_s"] > 0
    assert not failures, failures[:3]
    assert compared >= 200, (compared, refused)
    assert min(seen.values()) >= 10, seen  # the generator reaches every mechanism
    print(f"{compared} cases agree ({refused} refused by both); cases with {seen}")


NUM_WINDOW_CASES = 100


def test_fast_simulator_equals_the_reference_with_windowed_kv():
    """Models with sliding layers, mostly without shared prefixes: their KV blocks are window-capped layer-group
    blocks (sim/blocks.BlockRule against memory.kv_blocks_per_sequence in the reference); with a prefix cache in use
    both count whole-context blocks. Plus Llama 4 Scout's chunked local layers (1 full + 3 windowed groups)."""
    rng = random.Random(20261124)
    cases = []
    for _ in range(NUM_WINDOW_CASES):
        kw = _case(rng, WINDOWED_MODELS)
        if "prefix" in kw and rng.random() < 0.7:
            del kw["prefix"]
        if kw["scheduler"] in ("prefill-first", "static") and rng.random() < 0.5:
            kw["scheduler"] = "chunked"  # the scheduler that runs out of blocks mid-decode most
        if kw.get("gpu_memory_utilization", 0.5) != 0.5:  # memory pressure (0.5: gpt-oss-20b's default)
            kw["output_len"] = f"uniform:{rng.randint(20, 100)},{rng.randint(200, 600)}"  # decodes outgrow the pool
        cases.append(kw)
    scout = dict(
        model="llama-4-scout",
        tp=4,
        scheduler="chunked",
        num_requests=16,
        input_len="uniform:2000,9000",
        output_len="uniform:20,200",
        offline=True,
        gpu_memory_utilization=0.664,
        seed=1,
    )
    cases += [scout, {**scout, "preemption": "swap", "block_size": 32}, {**scout, "scheduler": "static"}]
    compared, failures = 0, []
    seen = {
        "preemptions": 0,
        "swap": 0,
        "disagg": 0,
        "static": 0,
        "past the window": 0,
        "window at a boundary": 0,
        "prefix cache": 0,
    }
    for n, kw in enumerate(cases):
        outcome = _compare(kw)
        if outcome is None:
            continue
        fast, diff = outcome
        if diff:
            failures.append((n, kw, diff[:4]))
        compared += 1
        rep, s = fast.replicas[0], fast.summary
        seen["preemptions"] += s.preemptions > 0
        seen["swap"] += s.preemptions > 0 and kw["preemption"] == "swap"
        seen["disagg"] += kw["scheduler"] == "disagg"
        seen["static"] += kw["scheduler"] == "static"
        windowed = rep.blocks.rule.windowed
        seen["prefix cache"] += not windowed
        past = int((fast.table.prompt + fast.table.output).max()) > rep.blocks.rule.window
        seen["past the window"] += windowed and past
        seen["window at a boundary"] += windowed and rep.blocks.rule.growth_end > rep.blocks.rule.window
    assert not failures, failures[:3]
    assert compared >= 50, compared
    assert min(seen.values()) >= 3, seen
    print(f"{compared} windowed cases agree; cases with {seen}")


def test_reference_refuses_what_it_does_not_model():
    from infercast.sim.speculative import SpeculativeConfig

    config = config_from_keywords(
        "llama-3.1-8b",
        "h100-sxm",
        input_len=10,
        output_len=5,
        num_requests=2,
        rate=1,
        speculative=SpeculativeConfig(2, 0.5),
    )
    with pytest.raises(InfercastError, match="speculative"):
        reference_simulate(config)


def test_a_second_swapped_request_comes_back_after_one_decode_step():
    """The replica brings back one swapped-out request per step; with two at the head of the queue, a decode span
    must stop after its first step when the second fits then (it ran on to the next completion instead)."""
    kw = dict(
        scheduler="chunked",
        num_requests=14,
        input_len="uniform:673,1677",
        output_len="uniform:70,594",
        seed=2240,
        preemption="swap",
        rate=200.0,
        max_num_batched_tokens=256,
        gpu_memory_utilization=0.225,
    )
    config = config_from_keywords("llama-3.1-8b", "h100-sxm", **kw)
    fast = run(config)
    assert fast.summary.preemptions > 0
    assert not _differences(fast, reference_simulate(config))


def test_a_prefilled_request_joins_after_a_preemption_frees_blocks():
    """A disaggregated decode pool retries its inbox before every step; a preemption just before a decode span can
    free the blocks the inbox's head waits for, so the span must stop after its first step (it ran on to the next
    completion instead, 0.1 s late on this case; found with per-request jitter, which reorders the hand-offs)."""
    kw = dict(
        scheduler="disagg",
        num_requests=22,
        input_len="uniform:678,1171",
        output_len="uniform:37,115",
        seed=5923,
        block_size=8,
        prefix_caching=True,
        preemption="swap",
        gpu_memory_utilization=0.05485761,
        offline=True,
        disagg=DisaggConfig(1, 1, link=KVLink(5e9)),
    )
    config = config_from_keywords("qwen3-0.6b", "h100-sxm", **kw)
    fast = run(config)
    assert fast.summary.preemptions > 0
    assert not _differences(fast, reference_simulate(config))


def _generated_base(rng: random.Random) -> tuple[SimulationConfig, object] | None:
    """A generated case as a config (its front-end in the profile) and its fast run; None when it is refused."""
    model, kw = _keywords(_case(rng))
    try:
        base = config_from_keywords(model, "h100-sxm", **kw)
        return base, run(base)
    except InfercastError:
        return None


NUM_SCALED_CASES = 30


def test_fast_simulator_equals_the_reference_with_scaled_step_time_and_pool():
    """``step_time_scale`` (every step 10 % longer) and ``kv_pool_scale`` (the sensitivity runs) reach both
    simulators alike: over generated cases, speculative verify aside (the reference does not model it)."""
    rng = random.Random(20261128)
    compared, changed, failures = 0, 0, []
    for n in range(NUM_SCALED_CASES):
        generated = _generated_base(rng)
        if generated is None:
            continue
        base, fast_base = generated
        engine = replace(base.engine, step_time_scale=1.1, kv_pool_scale=(0.9, 1.0)[n % 2])
        config = replace(base, engine=engine)
        try:
            fast = run(config)
        except InfercastError:
            continue
        diff = _differences(fast, reference_simulate(config))
        if diff:
            failures.append((n, base.deployment.label, diff[:4]))
        compared += 1
        changed += fast.summary.to_dict()["e2e_s"]["mean"] > fast_base.summary.to_dict()["e2e_s"]["mean"]
    assert not failures, failures[:3]
    assert compared >= 15 and changed >= compared - 3, (compared, changed)


NUM_POLL_CASES = 80


def test_fast_simulator_equals_the_reference_with_a_recv_interval():
    """An engine that polls for new requests every N decode steps (SGLang ``--scheduler-recv-interval``) delays
    arrivals alike in both simulators: generated cases at N = 2..12 (those with arrivals during decode runs get
    later first tokens)."""
    rng = random.Random(20261129)
    compared, later, failures = 0, 0, []
    for n in range(NUM_POLL_CASES):
        generated = _generated_base(rng)
        if generated is None:
            continue
        base, fast_base = generated
        config = replace(base, engine=replace(base.engine, recv_interval=rng.randint(2, 12)))
        fast = run(config)
        diff = _differences(fast, reference_simulate(config))
        if diff:
            failures.append((n, base.deployment.label, config.engine.recv_interval, diff[:4]))
        compared += 1
        later += fast.summary.to_dict()["ttft_s"]["mean"] > fast_base.summary.to_dict()["ttft_s"]["mean"] * 1.001
    assert not failures, failures[:3]
    assert compared >= 40 and later >= 15, (compared, later)  # closed and open loops: offline runs see no poll


NUM_WAIT_CASES = 60


def test_fast_simulator_equals_the_reference_with_batch_waiting():
    """TensorRT-LLM batch waiting (prompts held up to N steps while decodes run, unless the step's tokens reach a
    share of the budget) holds prompts alike in both simulators: generated cases on the inflight scheduler."""
    rng = random.Random(20261130)
    compared, later, failures = 0, 0, []
    for n in range(NUM_WAIT_CASES):
        kw = _case(rng)
        if kw["scheduler"] == "disagg":
            continue
        kw["scheduler"] = "inflight"
        model = kw.pop("model")
        kw.pop("stream_token_s", 0.0)
        try:
            base = config_from_keywords(model, "h100-sxm", **kw)
            fast_base = run(base)
        except InfercastError:
            continue
        waits = replace(base.engine, batch_wait_iters=rng.randint(1, 30), batch_wait_ratio=rng.choice([0.3, 0.9]))
        config = replace(base, engine=waits)
        fast = run(config)
        diff = _differences(fast, reference_simulate(config))
        if diff:
            failures.append((n, model, waits.batch_wait_iters, kw, diff[:4]))
        compared += 1
        later += fast.summary.to_dict()["ttft_s"]["mean"] > fast_base.summary.to_dict()["ttft_s"]["mean"] * 1.001
    assert not failures, failures[:3]
    assert compared >= 30 and later >= 10, (compared, later)


NUM_BALANCE_CASES = 40


def test_fast_simulator_equals_the_reference_with_attention_dp_balancing():
    """TensorRT-LLM attention-DP balancing (prompts held until every rank has one, or a count that runs every step
    reaches its timeout) holds prompts alike in both simulators: generated MoE cases over 2-4 attention ranks."""
    rng = random.Random(20261131)
    compared, later, failures = 0, 0, []
    for n in range(NUM_BALANCE_CASES):
        ranks = rng.choice([2, 4])
        lengths = dict(
            input_len=f"uniform:{rng.randint(100, 600)},{rng.randint(700, 1500)}", output_len="uniform:20,150"
        )
        load = rng.choice([{"concurrency": rng.randint(2, 24)}, {"rate": rng.choice([5.0, 40.0])}])
        kw = dict(engine="trtllm", tp=1, attention_dp=ranks, ep=ranks, num_requests=rng.randint(20, 60), **lengths)
        base = config_from_keywords("gpt-oss-20b", "h100-sxm", seed=n, **kw, **load)
        fast_base = run(base)
        config = replace(base, engine=replace(base.engine, adp_balance_iters=rng.randint(2, 60)))
        fast = run(config)
        diff = _differences(fast, reference_simulate(config))
        if diff:
            failures.append((n, ranks, config.engine.adp_balance_iters, load, diff[:4]))
        compared += 1
        later += fast.summary.to_dict()["ttft_s"]["mean"] > fast_base.summary.to_dict()["ttft_s"]["mean"] * 1.001
    assert not failures, failures[:3]
    assert later >= compared // 2, (compared, later)
