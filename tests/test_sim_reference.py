"""The fast simulator agrees with the step-by-step reference (:mod:`infercast.sim.reference`) on every summary
metric and every request's timestamps, to 1e-9 relative, over generated configurations: all schedulers,
recompute and swap preemption under memory pressure, prefix caching, sliding windows, MoE, several replicas
behind each router, closed loops and disaggregated pools."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from infercast.errors import InfercastError
from infercast.sim.api import run, simulation_config
from infercast.sim.config import DisaggConfig, KVLink
from infercast.sim.reference import reference_simulate

NUM_CASES = 240
RTOL = 1e-9
ATOL = 1e-12
"""Seconds: for quantities that are zero up to rounding (the spread of identical latencies)."""
PER_REQUEST = ("arrival", "visible", "scheduled", "first_token", "last_token", "finish", "preemptions",
               "cached_tokens", "replica", "prefill_replica")  # fmt: skip

MODELS = [("llama-3.1-8b", 0.6), ("gpt-oss-20b", 0.15), ("qwen3-0.6b", 0.15), ("gemma-2-9b", 0.1)]
"""Dense (most cases), MoE with 128-token sliding windows, a small model, 4096-token windows."""
PRESSURE = {"llama-3.1-8b": (0.225, 0.01), "qwen3-0.6b": (0.04, 0.012), "gemma-2-9b": (0.262, 0.03),
            "gpt-oss-20b": (0.19, 0.006)}  # fmt: skip
"""gpu_memory_utilization ranges leaving about 200-800 KV blocks on an H100 (base, width)."""


def _case(rng: random.Random) -> dict:
    """One random configuration (small: tens of requests, so the reference's per-step cost stays low)."""
    model = rng.choices([m for m, _ in MODELS], [w for _, w in MODELS])[0]
    scheduler = rng.choice(["chunked", "chunked", "prefill-first", "static", "disagg"])
    long_prompts = model == "gemma-2-9b" and rng.random() < 0.5
    kw: dict = dict(
        model=model,
        scheduler=scheduler,
        num_requests=rng.randint(6, 28),
        input_len=f"uniform:{rng.randint(5, 200)},{rng.randint(300, 5000 if long_prompts else 2500)}",
        output_len=rng.choice([f"uniform:1,{rng.randint(2, 90)}", str(rng.randint(1, 60))]),
        seed=rng.randint(0, 10_000),
        block_size=rng.choice([None, 8, 16, 32]),
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
    if scheduler == "disagg":
        kw["disagg"] = DisaggConfig(rng.randint(1, 2), rng.randint(1, 2), decode_tp=rng.choice([None, 2]),
                                    link=KVLink(rng.choice([5e9, 50e9])))  # fmt: skip
    elif rng.random() < 0.35:
        kw["replicas"] = rng.randint(2, 3)
        kw["router"] = rng.choice(["round_robin", "least_outstanding", "prefix_affinity"])
    if rng.random() < 0.2:
        kw["goodput"] = ["ttft:300", "tpot:40"]
    return kw


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


def test_fast_simulator_equals_the_reference_on_generated_cases():
    rng = random.Random(20261123)
    compared, refused, seen = 0, 0, {"preemptions": 0, "prefix hits": 0, "swap": 0, "disagg": 0, "window": 0}
    failures = []
    for n in range(NUM_CASES):
        kw = _case(rng)
        model = kw.pop("model")
        try:
            config = simulation_config(model, "h100-sxm", **kw)
            fast = run(config)
        except InfercastError as exc:  # e.g. a request larger than the KV pool: the reference must refuse too
            with pytest.raises(InfercastError):
                reference_simulate(config)
            refused += 1
            assert exc.field is not None
            continue
        ref = reference_simulate(config)
        diff = _differences(fast, ref)
        if diff:
            failures.append((n, model, kw, diff[:4]))
        compared += 1
        s = fast.summary
        seen["preemptions"] += s.preemptions > 0
        seen["swap"] += s.preemptions > 0 and kw["preemption"] == "swap"
        seen["prefix hits"] += s.prefix_cache_hit_rate > 0
        seen["disagg"] += kw["scheduler"] == "disagg"
        seen["window"] += model in ("gpt-oss-20b", "gemma-2-9b")
    assert not failures, failures[:3]
    assert compared >= 200, (compared, refused)
    assert min(seen.values()) >= 10, seen  # the generator reaches every mechanism
    print(f"{compared} cases agree ({refused} refused by both); cases with {seen}")


def test_reference_refuses_what_it_does_not_model():
    from infercast.sim.speculative import SpeculativeConfig

    config = simulation_config("llama-3.1-8b", "h100-sxm", input_len=10, output_len=5, num_requests=2, rate=1,
                               speculative=SpeculativeConfig(2, 0.5))  # fmt: skip
    with pytest.raises(InfercastError, match="speculative"):
        reference_simulate(config)


def test_a_second_swapped_request_comes_back_after_one_decode_step():
    """The replica brings back one swapped-out request per step; with two at the head of the queue, a decode span
    must stop after its first step when the second fits then (it ran on to the next completion instead)."""
    kw = dict(scheduler="chunked", num_requests=14, input_len="uniform:673,1677", output_len="uniform:70,594",
              seed=2240, preemption="swap", rate=200.0, max_num_batched_tokens=256, gpu_memory_utilization=0.225)
    config = simulation_config("llama-3.1-8b", "h100-sxm", **kw)
    fast = run(config)
    assert fast.summary.preemptions > 0
    assert not _differences(fast, reference_simulate(config))
