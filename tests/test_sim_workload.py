"""Workload layer of the simulator: distributions, arrival processes, traces, shared prefixes."""

from __future__ import annotations

import json
from importlib import resources
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from infercast.errors import InfercastError
from infercast.sim.workload import (
    LengthSpec,
    MultiTurnSpec,
    Workload,
    arrivals,
    builtin_trace,
    from_frame,
    lengths,
    load_mooncake_jsonl,
    load_trace,
    load_trace_csv,
    multi_turn,
    synthetic,
    with_system_prompts,
)


def assert_prefix_closed(hashes: list[np.ndarray]) -> None:
    """Each id always sits at the same position after the same predecessor (so it determines its prefix)."""
    seen: dict[int, tuple[int, int | None]] = {}
    for h in hashes:
        ids = h.tolist()
        for j, x in enumerate(ids):
            key = (j, ids[j - 1] if j else None)
            assert seen.setdefault(x, key) == key, f"id {x} appears after different prefixes"


def shared_blocks(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


# ----- length distributions --------------------------------------------------------------------------------
def test_fixed_and_uniform_bounds() -> None:
    rng = np.random.default_rng(0)
    assert (lengths(512, 1000, rng) == 512).all()
    assert (lengths("fixed:512", 10, rng) == 512).all()
    x = lengths("uniform:100,1024", 100_000, rng)
    assert x.dtype == np.int64
    assert x.min() == 100 and x.max() == 1024  # both ends inclusive
    assert abs(x.mean() - 562) < 5


def test_normal_and_lognormal_means() -> None:
    rng = np.random.default_rng(1)
    x = lengths("normal:500,100", 100_000, rng)
    assert x.dtype == np.int64 and x.min() >= 1
    assert abs(x.mean() - 500) < 2
    clamped = lengths("normal:5,20", 100_000, rng)  # heavy mass below 1: clamped, never < 1
    assert clamped.min() == 1
    y = lengths("lognormal:1000,0.5", 100_000, rng)
    assert y.min() >= 1
    assert abs(np.median(y) - 1000) / 1000 < 0.02
    assert abs(y.mean() - 1000 * np.exp(0.5**2 / 2)) / y.mean() < 0.02


def test_max_clip_and_spec_object() -> None:
    rng = np.random.default_rng(2)
    assert lengths("lognormal:1000,1.5,max=2048", 50_000, rng).max() == 2048
    assert lengths("uniform:1,100", 1000, rng, max=10).max() == 10
    spec = LengthSpec.parse("uniform:100,1024")
    assert spec == LengthSpec("uniform", (100.0, 1024.0))
    assert LengthSpec.parse(str(spec)) == spec


def test_empirical(tmp_path: Path) -> None:
    path = tmp_path / "lens.csv"
    pd.DataFrame({"tokens": [10, 20, 30], "other": [1, 1, 1]}).to_csv(path, index=False)
    x = lengths(f"empirical:{path}:tokens", 30_000, np.random.default_rng(3))
    assert set(np.unique(x)) == {10, 20, 30}
    assert abs(x.mean() - 20) < 0.3
    with pytest.raises(InfercastError, match="no column"):
        lengths(f"empirical:{path}:missing", 10)
    with pytest.raises(InfercastError, match="name one"):
        lengths(f"empirical:{path}", 10)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("zipf:1.2", "unknown value 'zipf'"),
        ("unifrom:1,2", "did you mean uniform"),
        ("uniform:10", "takes 2"),
        ("uniform:20,10", "low <= high"),
        ("normal:abc,1", "cannot read numbers"),
        ("fixed:0", ">= 1"),
        ("lognormal:-5,1", "median > 0"),
        ("", "expected a length"),
    ],
)
def test_distribution_errors(spec: str, message: str) -> None:
    with pytest.raises(InfercastError, match=message) as info:
        lengths(spec, 10)
    assert info.value.field in ("length", "distribution")


def test_unknown_distribution_lists_allowed() -> None:
    with pytest.raises(InfercastError) as info:
        lengths("zipf:1.2", 10, field="input_len")
    assert info.value.field == "input_len"
    assert info.value.allowed is not None and "lognormal" in info.value.allowed
    assert "lognormal" in str(info.value)


# ----- arrival processes -----------------------------------------------------------------------------------
@pytest.mark.parametrize("burstiness", [0.5, 1.0, 4.0])
def test_gamma_rate_and_cv(burstiness: float) -> None:
    n, rate = 200_000, 20.0
    raw = arrivals("gamma", n, rate=rate, burstiness=burstiness, rng=5, normalize=False)
    assert (np.diff(raw) >= 0).all()
    assert abs(n / raw[-1] - rate) / rate < 0.02
    gaps = np.diff(raw, prepend=0.0)
    cv = gaps.std() / gaps.mean()
    assert abs(cv - 1 / np.sqrt(burstiness)) < 0.03
    scaled = arrivals("gamma", n, rate=rate, burstiness=burstiness, rng=5)  # vLLM: last arrival at n / rate
    assert scaled[-1] == pytest.approx(n / rate)
    assert scaled[0] > 0  # the first request goes after one gap, as in vllm bench serve
    assert np.allclose(scaled, raw * (n / rate) / raw[-1])


def test_burstiness_one_is_poisson() -> None:
    n, rate = 200_000, 8.0
    gamma = arrivals("gamma", n, rate=rate, burstiness=1.0, rng=7, normalize=False)
    poisson = arrivals("poisson", n, rate=rate, rng=7, normalize=False)
    assert np.array_equal(gamma, poisson)
    gaps = np.diff(poisson, prepend=0.0)
    assert stats.kstest(gaps, "expon", args=(0, 1 / rate)).pvalue > 0.01
    bursty = np.diff(arrivals("gamma", n, rate=rate, burstiness=0.5, rng=7, normalize=False), prepend=0.0)
    assert stats.kstest(bursty, "expon", args=(0, 1 / rate)).pvalue < 1e-6


def test_constant_and_offline() -> None:
    assert np.allclose(arrivals("constant", 4, rate=2.0), [0.5, 1.0, 1.5, 2.0])
    assert (arrivals("offline", 5) == 0).all()
    assert (arrivals("poisson", 5, rate=float("inf")) == 0).all()  # vLLM's default rate=inf: all at once


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rate": 0}, "rate"),
        ({"rate": -1.0}, "rate"),
        ({"rate": float("nan")}, "rate"),
        ({"rate": None}, "rate"),
        ({"rate": 1.0, "burstiness": 0}, "burstiness"),
        ({"rate": 1.0, "n": 0}, "num_requests"),
        ({"rate": 1.0, "kind": "bursty"}, "arrival"),
    ],
)
def test_arrival_errors(kwargs: dict, field: str) -> None:
    args = {"kind": "poisson", "n": 10, **kwargs}
    with pytest.raises(InfercastError) as info:
        arrivals(args.pop("kind"), args.pop("n"), **args)
    assert info.value.field == field


# ----- synthetic -------------------------------------------------------------------------------------------
def test_synthetic_open_closed_offline() -> None:
    w = synthetic(1000, "uniform:10,20", 50, rate=10.0, seed=1)
    assert len(w) == 1000 and w.closed_loop is None
    assert w.prompt_len.min() >= 10 and (w.output_len == 50).all()
    assert w.total_output_tokens == 50_000
    assert w.summary()["rate_rps"] == pytest.approx(10.0, rel=0.01)
    again = synthetic(1000, "uniform:10,20", 50, rate=10.0, seed=1)
    assert np.array_equal(w.arrival, again.arrival) and np.array_equal(w.prompt_len, again.prompt_len)
    closed = synthetic(100, 128, 128, concurrency=8)
    assert closed.closed_loop == 8 and (closed.arrival == 0).all()
    offline = synthetic(100, 128, 128, arrival="offline")
    assert (offline.arrival == 0).all() and offline.summary()["rate_rps"] is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rate": 0.0}, "rate"),
        ({"concurrency": 0}, "concurrency"),
        ({"rate": 5.0, "concurrency": 4}, "rate"),
        ({"rate": 5.0, "burstiness": -1.0}, "burstiness"),
        ({"rate": 5.0, "num_requests": 0}, "num_requests"),
        ({"rate": 5.0, "input_len": 0}, "input_len"),
        ({"rate": 5.0, "output_len": "gauss:1,2"}, "output_len"),
    ],
)
def test_synthetic_errors(kwargs: dict, field: str) -> None:
    args = {"num_requests": 10, "input_len": 100, "output_len": 10, **kwargs}
    with pytest.raises(InfercastError) as info:
        synthetic(**args)
    assert info.value.field == field
    assert "\n" not in str(info.value)


def test_one_million_requests() -> None:
    w = synthetic(1_000_000, "lognormal:1000,0.8,max=8192", "uniform:10,500", rate=100.0, burstiness=0.5)
    assert len(w) == 1_000_000
    assert w.arrival.dtype == np.float64 and w.prompt_len.dtype == np.int64
    assert (np.diff(w.arrival) >= 0).all()


def test_synthetic_prefix() -> None:
    w = synthetic(200, 100, 10, rate=1.0, prefix=64)
    assert (w.prompt_len == 164).all()
    assert w.block_hashes is not None
    assert all(np.array_equal(h, np.arange(4)) for h in w.block_hashes)
    w = synthetic(200, 100, 10, rate=1.0, prefix=(3, 64, 0.5))
    assert (w.prompt_len == 164).sum() == 100


# ----- Workload object -------------------------------------------------------------------------------------
def test_workload_validation_and_sorting() -> None:
    w = Workload(np.array([2.0, 0.0, 1.0]), [10, 20, 30], [1, 2, 3], [np.array([5]), np.array([7]), np.array([9])])
    assert np.array_equal(w.arrival, [0.0, 1.0, 2.0])
    assert np.array_equal(w.prompt_len, [20, 30, 10])
    assert [int(h[0]) for h in w.block_hashes] == [7, 9, 5]
    bad = [
        ({"prompt_len": [0, 1, 1]}, "prompt_len"),
        ({"output_len": [1, -1, 1]}, "output_len"),
        ({"arrival": [0.0, np.nan, 1.0]}, "arrival"),
        ({"arrival": [-1.0, 0.0, 1.0]}, "arrival"),
        ({"output_len": [1, 1]}, "workload"),
        ({"block_hashes": [np.arange(5), np.arange(0), np.arange(0)]}, "block_hashes"),
    ]
    for change, field in bad:
        args = {"arrival": [0.0, 1.0, 2.0], "prompt_len": [16, 16, 16], "output_len": [1, 1, 1], **change}
        with pytest.raises(InfercastError) as info:
            Workload(**args)
        assert info.value.field == field
    with pytest.raises(InfercastError, match="no requests"):
        Workload(np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))


def test_block_hashes_of_any_integer_form_are_normalised() -> None:
    args = {"arrival": [0.0, 1.0, 2.0], "prompt_len": [40, 40, 40], "output_len": [1, 1, 1]}
    w = Workload(**args, block_hashes=[[1, 2], np.array([1.0, 3.0]), None])
    assert all(type(h) is np.ndarray and h.dtype == np.int64 and h.ndim == 1 for h in w.block_hashes)
    assert [h.tolist() for h in w.block_hashes] == [[1, 2], [1, 3], []]
    same = [np.arange(2, dtype=np.int64)] * 3  # the fast path: every entry already a 1-D int64 array
    assert Workload(**args, block_hashes=same).block_hashes[2] is same[2]
    for bad, field in (
        ([[1, 2], [1.5], []], "block_hashes[1]"),
        ([[1], ["x"], []], "block_hashes[1]"),
        ([[1, 2, 3, 4]] * 3, "block_hashes"),
    ):
        with pytest.raises(InfercastError) as info:
            Workload(**args, block_hashes=bad)
        assert info.value.field == field


def test_head_tile_frame_roundtrip() -> None:
    w = with_system_prompts(synthetic(50, "uniform:10,40", 5, rate=2.0, seed=4), 2, 40, fraction=0.5, seed=1)
    assert len(w.head(10)) == 10 and len(w.head(100)) == 50
    df = w.to_frame()
    back = from_frame(df)
    assert np.array_equal(back.arrival, w.arrival) and np.array_equal(back.prompt_len, w.prompt_len)
    assert back.name == w.name and back.hash_block_size == w.hash_block_size
    assert all(np.array_equal(a, b) for a, b in zip(back.block_hashes, w.block_hashes, strict=True))
    renamed = df.rename(columns={"arrival": "arrived_at", "prompt_len": "num_prefill_tokens"})
    assert np.array_equal(Workload.from_frame(renamed).prompt_len, w.prompt_len)
    t = w.tile(3)
    assert len(t) == 150 and (np.diff(t.arrival) > 0).all()
    for c in range(3):  # sharing within a copy, none across copies
        part = t.block_hashes[50 * c : 50 * (c + 1)]
        assert [shared_blocks(a, b) for a, b in pairwise(part)] == [
            shared_blocks(a, b) for a, b in pairwise(w.block_hashes)
        ]
    first, second = np.concatenate(t.block_hashes[:50]), np.concatenate(t.block_hashes[50:100])
    assert np.intersect1d(first, second).size == 0
    with pytest.raises(InfercastError) as info:
        w.tile(0)
    assert info.value.field == "copies"


# ----- trace replay ----------------------------------------------------------------------------------------
def test_azure_conv_trace(tmp_path: Path) -> None:
    w = builtin_trace("azure_conv")  # the trace bundled with the package
    assert len(w) == 19366
    assert w.arrival[0] == 0 and (np.diff(w.arrival) >= 0).all()
    assert abs(np.median(w.prompt_len) - 1020) < 30
    assert abs(np.median(w.output_len) - 129) < 10
    assert 3400 < w.duration < 3600
    t = w.tile(3)
    assert len(t) == 3 * 19366 and (np.diff(t.arrival) >= 0).all()
    assert t.duration == pytest.approx(3 * w.duration + 2 * w.duration / (len(w) - 1))
    # the same file read by path, as load_trace and load_trace_csv read any trace
    copy = tmp_path / "azure_conv_2023.csv"
    copy.write_bytes(resources.files("infercast").joinpath("data", "traces", "azure_conv_2023.csv").read_bytes())
    fast = load_trace(copy, time_scale=0.5, max_requests=100)
    assert len(fast) == 100 and np.allclose(fast.arrival, w.arrival[:100] * 0.5)
    by_path = load_trace_csv(copy)
    assert np.array_equal(by_path.prompt_len, w.prompt_len) and np.array_equal(by_path.arrival, w.arrival)


def test_builtin_traces() -> None:
    code = builtin_trace("azure_code")
    assert len(code) == 8819 and abs(np.median(code.output_len) - 13) < 3
    with pytest.raises(InfercastError) as info:
        builtin_trace("azure_chat")
    assert info.value.field == "trace" and "azure_conv" in str(info.value)


def test_csv_trace_sorted_and_errors(tmp_path: Path) -> None:
    good = tmp_path / "t.csv"
    good.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n5.0,10,2\n3.0,20,3\n4.0,30,4\n")
    w = load_trace_csv(good)
    assert np.array_equal(w.arrival, [0.0, 1.0, 2.0]) and np.array_equal(w.prompt_len, [20, 30, 10])
    cases = {
        "": "empty",
        "arrived_at,num_prefill_tokens,num_decode_tokens\n": "no requests",
        "arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,2\n1,abc,2\n": "line 3",
        "arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,2\n1,10,2,9,9\n": "malformed CSV",
        "arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,2\n1,10,0\n": "line 3: output length",
        "arrived_at,num_prefill_tokens,num_decode_tokens\n-1,10,2\n": "line 2: arrival",
        "arrived_at,num_prefill_tokens,num_decode_tokens\n,10,2\n": "line 2",
        "time,prompt,output\n0,10,2\n": "missing column",
    }
    for i, (text, message) in enumerate(cases.items()):
        path = tmp_path / f"bad{i}.csv"
        path.write_text(text)
        with pytest.raises(InfercastError, match=message) as info:
            load_trace_csv(path)
        assert info.value.field == "path" and path.name in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(InfercastError, match="no such file"):
        load_trace(tmp_path / "nope.csv")
    with pytest.raises(InfercastError, match="extension"):
        load_trace(tmp_path / "trace.parquet")
    with pytest.raises(InfercastError) as info:
        load_trace_csv(good, time_scale=0)
    assert info.value.field == "time_scale"


MOONCAKE_ROWS = [
    {"timestamp": 0, "input_length": 1500, "output_length": 20, "hash_ids": [0, 1, 2]},
    {"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [0, 1, 3]},
    {"timestamp": 3052, "input_length": 600, "output_length": 7, "hash_ids": [0, 4]},
    {"timestamp": 6104, "input_length": 300, "output_length": 9, "hash_ids": [5]},
]


def test_mooncake_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "mooncake_trace.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in MOONCAKE_ROWS) + "\n\n")
    w = load_trace(path)
    assert len(w) == 4 and w.hash_block_size == 512
    assert np.allclose(w.arrival, [0.0, 0.0, 3.052, 6.104])
    assert np.array_equal(w.prompt_len, [1500, 1100, 600, 300]) and np.array_equal(w.output_len, [20, 5, 7, 9])
    assert shared_blocks(w.block_hashes[0], w.block_hashes[1]) == 2
    assert shared_blocks(w.block_hashes[0], w.block_hashes[3]) == 0
    assert len(load_mooncake_jsonl(path, max_requests=2, time_scale=2.0)) == 2
    unshared = tmp_path / "unshared.jsonl"
    unshared.write_text(json.dumps({"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": [1]}))
    assert load_mooncake_jsonl(unshared).block_hashes is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"timestamp": 0, "input_length": 10, "output_length": 1}\n{"timestamp": 1, "input_length": 1', "line 2"),
        ('{"timestamp": 0, "input_length": 10}\n', "missing key 'output_length'"),
        ('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": "x"}\n', "hash_ids"),
        ("[1, 2]\n", "JSON object"),
        ("", "empty trace"),
    ],
)
def test_mooncake_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(InfercastError, match=message) as info:
        load_mooncake_jsonl(path)
    assert info.value.field == "path" and "bad.jsonl" in str(info.value)


# ----- shared prefixes -------------------------------------------------------------------------------------
def test_system_prompts() -> None:
    base = synthetic(400, "uniform:1,200", 8, rate=5.0, seed=2)
    w = with_system_prompts(base, num_prompts=3, prompt_tokens=100, fraction=0.75, seed=9)
    grew = w.prompt_len - base.prompt_len
    assert set(np.unique(grew)) == {0, 100} and (grew == 100).sum() == 300
    firsts = {}
    for h, g in zip(w.block_hashes, grew, strict=True):
        if g == 0:
            assert len(h) == 0
        else:
            assert len(h) == 100 // 16
            firsts.setdefault(int(h[0]), h)
            assert np.array_equal(firsts[int(h[0])], h)  # same prompt -> identical ids
    assert len(firsts) == 3
    heads = list(firsts.values())
    assert all(shared_blocks(a, b) == 0 for i, a in enumerate(heads) for b in heads[i + 1 :])
    assert_prefix_closed(w.block_hashes)
    with pytest.raises(InfercastError) as info:
        with_system_prompts(base, 0, 100)
    assert info.value.field == "num_prompts"


def test_system_prompts_on_hashed_trace(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in MOONCAKE_ROWS))
    trace = load_mooncake_jsonl(path)
    for tokens in (1024, 700):  # whole blocks, and a shift that misaligns the old blocks
        w = with_system_prompts(trace, 1, tokens, seed=0)
        assert_prefix_closed(w.block_hashes)
        m = tokens // 512
        assert shared_blocks(w.block_hashes[0], w.block_hashes[1]) == m + 2
        assert shared_blocks(w.block_hashes[0], w.block_hashes[3]) == m
        assert not set(w.block_hashes[0][m:].tolist()) & set(trace.block_hashes[0].tolist())
    mixed = with_system_prompts(trace, 2, 1024, fraction=0.5, seed=3)
    assert_prefix_closed(mixed.block_hashes)


def test_multi_turn_single_session() -> None:
    w = multi_turn(MultiTurnSpec(1, 5, "uniform:20,60", "uniform:10,90", think_time=3.0, hash_block_size=16, seed=1))
    assert len(w) == 5 and (np.diff(w.arrival) > 0).all()
    for t in range(4):
        prev, nxt = w.block_hashes[t], w.block_hashes[t + 1]
        assert w.prompt_len[t + 1] >= w.prompt_len[t] + w.output_len[t] + 20
        assert len(prev) == w.prompt_len[t] // 16
        assert np.array_equal(nxt[: len(prev)], prev)  # the whole previous prompt is a cached prefix
        assert len(nxt) > len(prev)


def test_multi_turn_sessions_interleave() -> None:
    w = multi_turn(
        MultiTurnSpec(
            30, "uniform:2,6", 100, 50, session_rate=2.0, think_time=10.0, system_prompt_tokens=64, num_system_prompts=2
        )
    )
    assert (np.diff(w.arrival) >= 0).all()
    assert_prefix_closed(w.block_hashes)
    # system prompt blocks are shared across sessions: at most 2 distinct 4-block heads
    heads = {tuple(h[:4].tolist()) for h in w.block_hashes}
    assert len(heads) <= 2
    # sessions own distinct continuations: the 5th id identifies the session
    sessions = {int(h[4]) for h in w.block_hashes}
    assert len(sessions) == 30
    capped = multi_turn(MultiTurnSpec(30, 6, 100, 50, max_context=500, seed=2))
    assert (capped.prompt_len + capped.output_len <= 500).all()
    with pytest.raises(InfercastError) as info:
        multi_turn(MultiTurnSpec(3, 2, 100, 50, max_context=10))
    assert info.value.field == "max_context"


def test_multi_turn_spec_validates_on_construction() -> None:
    """A MultiTurnSpec names its bad field when built, before any draw."""
    for kwargs, field in (
        (dict(num_sessions=0), "num_sessions"),
        (dict(think_time=-1.0), "think_time"),
        (dict(system_prompt_tokens=-5), "system_prompt_tokens"),
        (dict(max_context=0), "max_context"),
    ):
        with pytest.raises(InfercastError) as info:
            MultiTurnSpec(**{"num_sessions": 3, "turns": 2, "input_len": 100, "output_len": 50, **kwargs})
        assert info.value.field == field


def test_retime_trace_lengths() -> None:
    trace = builtin_trace("azure_code", max_requests=500)
    w = synthetic(len(trace), trace.prompt_len, trace.output_len, arrival="gamma", rate=4.0, burstiness=0.5)
    assert np.array_equal(w.prompt_len, trace.prompt_len) and np.array_equal(w.output_len, trace.output_len)
    assert w.arrival[-1] == pytest.approx(500 / 4.0)
    with pytest.raises(InfercastError) as info:
        synthetic(10, trace.prompt_len, 5, rate=1.0)
    assert info.value.field == "input_len"
    assert (lengths([5, 600, 7], 3, max=100) == [5, 100, 7]).all()
