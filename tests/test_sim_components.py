"""Simulator parts on their own: the paged KV cache with prefix caching, the running decode set's O(1)
bookkeeping, the inter-token-gap recorder, and the per-request metric and SLO definitions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infercast.errors import InfercastError
from infercast.sim.decode_set import DecodeSet
from infercast.sim.kv_cache import KVCache
from infercast.sim.metrics import EXACT_ITL_LIMIT, SLO, GapRecorder, request_metrics


# ----- KV cache ------------------------------------------------------------------------------------------------
def test_allocation_is_all_or_nothing():
    kv = KVCache(num_blocks=10, block_size=16, prefix_caching=False)
    assert kv.allocate(7) and kv.free == 3 and kv.used == 7
    assert not kv.allocate(4)
    assert kv.free == 3 and kv.used == 7  # a refused allocation changes nothing
    kv.release(7)
    assert kv.free == 10 and kv.used == 0


def test_prefix_cache_shares_full_blocks_of_a_common_prefix():
    kv = KVCache(num_blocks=100, block_size=16, prefix_caching=True, hash_block_size=16)
    prompt = np.array([11, 12, 13, 14], dtype=np.int64)  # 4 full hash blocks = 64 tokens
    assert kv.match(prompt, 70) == 0  # cold cache
    assert kv.allocate(5)  # 70 tokens -> 5 blocks, all private
    moved, pinned = kv.publish(prompt, 0, 70)
    assert moved == 4 and pinned == 4 and kv.cached_blocks == 4  # its 4 full blocks now live in the cache, pinned
    # a second request with the same first three blocks, then a different one
    other = np.array([11, 12, 13, 99], dtype=np.int64)
    assert kv.match(other, 64) == 3
    assert kv.refs[11] == 2
    # the chain matters: a different first block shares nothing, even if later hashes coincide
    assert kv.match(np.array([5, 12, 13], dtype=np.int64), 64) == 0
    # the last prompt token is always recomputed (its logits are needed): 64 tokens match at most 3 blocks
    assert kv.match(prompt, 64) == 3


def test_unreferenced_cache_blocks_are_evicted_least_recently_used_first():
    kv = KVCache(num_blocks=6, block_size=16, prefix_caching=True, hash_block_size=16)
    a, b = np.array([1, 2], dtype=np.int64), np.array([7, 8], dtype=np.int64)
    for h in (a, b):
        assert kv.allocate(2)
        kv.publish(h, 0, 32)
    kv.unpin(a, 2)  # a finishes first: its blocks become evictable
    kv.unpin(b, 2)
    assert kv.evictable == 4 and kv.free == 2 and kv.available == 6
    assert kv.allocate(4)  # needs 2 evictions: a's blocks go first
    assert kv.evictions == 2
    assert 1 not in kv.refs and 2 not in kv.refs and 7 in kv.refs
    assert kv.match(b, 40) == 2 and kv.match(a, 40) == 0


def test_prefix_caching_off_never_matches():
    kv = KVCache(num_blocks=10, block_size=16, prefix_caching=False)
    h = np.array([1, 2, 3], dtype=np.int64)
    assert kv.publish(h, 0, 48) == (0, 0) and kv.match(h, 48) == 0


# ----- running decode set --------------------------------------------------------------------------------------
def _brute_held(base: dict[int, int], D: int, bs: int) -> dict[int, int]:
    return {i: -(-(b + D - 1) // bs) for i, b in base.items()}


@given(
    contexts=st.lists(st.integers(1, 500), min_size=1, max_size=30),
    advance=st.integers(0, 40),
    k=st.integers(1, 100),
    bs=st.sampled_from([1, 16, 32]),
)
@settings(max_examples=150, deadline=None)
def test_block_growth_over_k_steps_matches_per_sequence_counting(contexts, advance, k, bs):
    run = DecodeSet(bs, None)
    for i, ctx in enumerate(contexts):
        run.join(i, ctx, remaining=10_000, t_last=0.0)
    run.advance(advance)
    before = _brute_held(run.base, run.D, bs)
    after = _brute_held(run.base, run.D + k, bs)
    assert run.growth_over(k) == sum(after.values()) - sum(before.values())
    assert run.held == sum(before.values())
    assert run.context_sum() == sum(b + run.D for b in run.base.values())


def test_window_sum_caps_each_context_at_the_window():
    run = DecodeSet(16, window=100)
    for i, ctx in enumerate((10, 60, 99, 250)):
        run.join(i, ctx, remaining=500, t_last=0.0)
    for steps in (0, 30, 45):
        run.advance(steps)
        expected = sum(min(b + run.D, 100) for b in run.base.values())
        assert run.window_sum() == expected
        assert run.steps_to_window() == min(
            (100 - b - run.D for b in run.base.values() if b + run.D < 100), default=1 << 60
        )


def test_completions_come_off_in_order_with_their_blocks():
    run = DecodeSet(16, None)
    run.join(0, ctx=100, remaining=5, t_last=0.0)
    run.join(1, ctx=30, remaining=2, t_last=0.0)
    run.join(2, ctx=17, remaining=9, t_last=0.0)
    assert run.steps_to_completion() == 2
    run.advance(2)
    done = run.remove_finished()
    assert done == [(1, -(-(30 + 2 - 1) // 16))]
    assert run.n == 2 and run.steps_to_completion() == 3
    assert run.victim() == 2  # the most recently joined live sequence is preempted first
    ctx, remaining, held, _ = run.remove(2)
    assert (ctx, remaining, held) == (19, 7, 2)
    assert run.victim() == 0


# ----- inter-token gaps ----------------------------------------------------------------------------------------
def _ramp_steps(const, line, j0, j1):
    a, da, b, db = line
    j = np.arange(j0, j1)
    return const + np.maximum(a + j * da, b + j * db)


def test_gap_statistics_are_exact_below_the_limit():
    rng = np.random.default_rng(0)
    rec = GapRecorder()
    expected = []
    for _ in range(300):
        v, w = float(rng.uniform(0.005, 0.03)), int(rng.integers(1, 5))
        rec.add(v, w)
        expected += [v] * w
        const, line = 0.001, (0.008, 1e-6, 0.009, 2e-7)
        j0, j1, n = int(rng.integers(0, 3)), int(rng.integers(3, 80)), int(rng.integers(1, 64))
        rec.add_ramp(const, [line], j0, j1, n)
        expected += np.repeat(_ramp_steps(const, line, j0, j1), n).tolist()
    stats = rec.stats()
    expected = np.array(expected)
    assert rec.count == expected.size
    assert stats["mean"] == pytest.approx(expected.mean(), rel=1e-12)
    for p in (50, 90, 99):
        assert stats[f"p{p}"] == pytest.approx(np.percentile(expected, p), rel=1e-12)


def test_gap_statistics_fold_into_a_fine_histogram_beyond_the_limit():
    rng = np.random.default_rng(1)
    values = rng.lognormal(np.log(0.01), 0.4, 20_000)
    weights = np.full(values.size, 2 * EXACT_ITL_LIMIT // values.size)
    rec = GapRecorder()
    rec.add_many(values, weights)
    stats = rec.stats()
    assert rec.hist is not None and rec.count == int(weights.sum())
    assert stats["mean"] == pytest.approx(values.mean(), rel=1e-9)  # sums stay exact
    for p in (50, 90, 99):
        assert stats[f"p{p}"] == pytest.approx(np.percentile(values, p), rel=0.004)  # 0.32% bins


# ----- request metrics and SLOs --------------------------------------------------------------------------------
def test_request_metrics_follow_vllm_definitions():
    arrival = np.array([0.0, 1.0, 2.0])
    first = np.array([0.2, 1.5, 2.1])
    finish = np.array([1.2, 1.5, 4.1])
    output = np.array([11, 1, 5])
    ttft, tpot, e2e = request_metrics(arrival, first, finish, output)
    np.testing.assert_allclose(ttft, [0.2, 0.5, 0.1])
    np.testing.assert_allclose(e2e, [1.2, 0.5, 2.1])
    assert tpot[0] == pytest.approx(0.1) and np.isnan(tpot[1]) and tpot[2] == pytest.approx(0.5)


def test_slo_parsing_and_attainment():
    slo = SLO.parse("ttft:200 tpot:50,e2el:3000")
    assert (slo.ttft_s, slo.tpot_s, slo.e2e_s) == (0.2, 0.05, 3.0)
    assert SLO.parse(["TTFT:100"]).ttft_s == 0.1 and SLO.parse(None) is None
    met = slo.met(np.array([0.1, 0.3, 0.1, 0.1]), np.array([0.04, 0.01, np.nan, 0.06]), np.array([1.0, 1.0, 1.0, 1.0]))
    assert met.tolist() == [True, False, True, False]  # a single-token request has no TPOT and passes it
    for bad in ("itl:5", "ttft:fast", "ttft:-1"):
        with pytest.raises(InfercastError) as err:
            SLO.parse(bad)
        assert err.value.field == "goodput"


# ----- prefix-cache units when hash and engine block sizes differ ---------------------------------------------
@pytest.mark.parametrize(
    "hash_bs,block_bs,unit,hashes_per_unit,blocks_per_unit",
    [(16, 16, 16, 1, 1), (16, 32, 32, 2, 1), (16, 64, 64, 4, 1), (512, 16, 512, 1, 32), (24, 16, 48, 2, 3)],
)
def test_cache_units_are_whole_hash_blocks_and_whole_engine_blocks(
    hash_bs, block_bs, unit, hashes_per_unit, blocks_per_unit
):
    kv = KVCache(num_blocks=10_000, block_size=block_bs, prefix_caching=True, hash_block_size=hash_bs)
    assert (kv.unit_tokens, kv.hashes_per_unit, kv.blocks_per_unit) == (unit, hashes_per_unit, blocks_per_unit)
    prompt = 10 * unit + 5
    hashes = np.arange(-(-prompt // hash_bs), dtype=np.int64)  # prefix-closed ids of every hash block
    assert kv.allocate(-(-prompt // block_bs))
    moved, pinned = kv.publish(hashes, 0, prompt)
    assert pinned == 10 and moved == 10 * blocks_per_unit == kv.cached_blocks
    # a unit is identified by its last hash block: a prompt diverging inside unit 4 shares units 0..3
    other = hashes.copy()
    other[4 * hashes_per_unit + hashes_per_unit - 1 :] += 1000
    assert kv.match(other, prompt) == 4
    kv.unpin(other, 4)
    kv.unpin(hashes, 10)
    assert kv.evictable == kv.cached_blocks == 10 * blocks_per_unit


# ----- step-count solver and window sums ---------------------------------------------------------------------
@given(
    base=st.floats(1e-4, 1.0),
    slope=st.floats(0.0, 1e-3),
    span=st.floats(-1.0, 50.0),
    cap=st.integers(1, 5000),
)
@settings(max_examples=300, deadline=None)
def test_steps_to_reach_is_the_fewest_steps_that_reach_the_span(base, slope, span, cap):
    from infercast.sim.decode_cost import steps_to_reach

    k = steps_to_reach(base, slope, span, cap)
    total = np.cumsum(base + slope * np.arange(cap))  # total[j] = time of steps 0..j

    def reach(steps: int) -> float:  # closed form, as the solver sums
        return steps * base + slope * steps * (steps - 1) / 2

    assert 1 <= k <= cap
    if span <= 0:
        assert k == 1
    elif reach(cap) < span:
        assert k == cap  # never reached: all the steps there are
    else:
        assert reach(k) >= span and (k == 1 or reach(k - 1) < span)
        assert total[k - 1] == pytest.approx(reach(k), rel=1e-9)


@given(c=st.integers(1, 5000), c0=st.integers(0, 20000), w=st.integers(1, 8192))
@settings(max_examples=300, deadline=None)
def test_replica_window_pairs_equal_the_cost_layer(c, c0, w):
    from infercast.cost.batch import window_pairs
    from infercast.sim.replica import _window_pairs

    assert _window_pairs(c, c0, w) == pytest.approx(float(window_pairs(c, c0, w)), rel=1e-12)
    assert _window_pairs(c, c0, w) == sum(min(p + 1, w) for p in range(c0, c0 + c))


def test_replicas_share_compiled_step_functions():
    from infercast.sim.api import simulate

    res = simulate("llama-3.1-8b", "h100-sxm", input_len=100, output_len=10, num_requests=20, rate=5, replicas=3)
    again = simulate("llama-3.1-8b", "h100-sxm", input_len=100, output_len=10, num_requests=20, rate=5)
    reps = [*res.replicas, *again.replicas]
    assert len({id(r.step_fn) for r in reps}) == 1 and len({id(r.decode_table) for r in reps}) == 1
    other = simulate("llama-3.1-8b", "h100-sxm", input_len=100, output_len=10, num_requests=20, rate=5, max_num_seqs=7)
    assert other.replicas[0].decode_table is not reps[0].decode_table and other.replicas[0].decode_table.max_n == 7
