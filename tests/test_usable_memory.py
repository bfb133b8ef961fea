"""The memory the engines size their KV caches against: the driver's figure, not the physical capacity."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from infercast import memory_budget
from infercast.specs.catalog import get_hardware, list_hardware
from infercast.specs.hardware import MemorySpec


def test_usable_memory_is_below_capacity_by_a_driver_reserve():
    for h in list_hardware():
        mem = h.memory
        assert 0 < mem.usable <= mem.capacity_bytes, h.id
        if mem.usable_bytes is not None:
            assert mem.usable_note, f"{h.id}: a recorded usable size cites its source"
            # a driver reserve of ~0.5-1 GiB, plus 1/16 of GDDR with ECC on: never a tenth of the chip
            assert mem.usable > 0.9 * mem.capacity_bytes, h.id


def test_ecc_gddr_exposes_less_than_hbm_of_the_same_generation():
    l4, h100 = get_hardware("l4").memory, get_hardware("h100-sxm").memory
    assert l4.usable / l4.capacity_bytes < 0.93  # ECC takes 1/16 of GDDR6, then the driver its reserve
    assert h100.usable / h100.capacity_bytes > 0.98  # HBM's ECC is out of band: only the reserve


def test_unrecorded_gpu_falls_back_to_the_physical_capacity():
    a10g = get_hardware("a10g").memory
    assert a10g.usable_bytes is None and a10g.usable == a10g.capacity_bytes


@pytest.mark.parametrize("usable", [17 * 2**30, 7 * 2**30, 1.0])
def test_usable_outside_half_to_all_of_capacity_is_refused(usable):
    with pytest.raises(ValidationError, match=r"usable_bytes .* must lie between half of capacity_bytes"):
        MemorySpec(capacity_bytes=16 * 2**30, capacity_as_sold="16 GB", bandwidth_bytes_s=3e11, usable_bytes=usable)


def test_kv_pool_is_sized_against_the_usable_memory():
    t4 = get_hardware("t4")
    b = memory_budget("llama-3.2-1b", "t4", precision="fp16", engine="vllm")
    assert b.capacity_bytes == t4.memory.usable < t4.memory.capacity_bytes
    # vLLM: 0.9 of what the driver exposes, less weights, activations and runtime
    pool = 0.9 * t4.memory.usable - b.weights_bytes - b.activation_bytes - b.runtime_overhead_bytes
    assert b.num_blocks == int(pool // b.block_bytes)


def test_activation_reserve_follows_the_runs_token_budget_and_sequence_limit():
    """vLLM profiles a dummy step of max_num_batched_tokens tokens and samples max_num_seqs sequences: a bigger
    budget reserves more activation memory and leaves a smaller KV pool; the reserve is linear in the tokens."""
    act = {
        t: memory_budget("llama-3.1-8b", "h100-sxm", max_num_batched_tokens=t).activation_bytes
        for t in (4096, 8192, 16384)
    }
    assert act[16384] - act[8192] == pytest.approx(2 * (act[8192] - act[4096]))
    preset = memory_budget("llama-3.1-8b", "h100-sxm")
    assert preset.activation_bytes == act[8192]  # vLLM's preset budget
    small = memory_budget("llama-3.1-8b", "h100-sxm", max_num_batched_tokens=2048, max_num_seqs=64)
    assert small.activation_bytes < act[4096] and small.num_blocks > preset.num_blocks
    big = memory_budget("llama-3.1-8b", "h100-sxm", max_num_batched_tokens=16384)
    assert big.num_blocks < preset.num_blocks


def test_the_simulated_pool_is_the_budget_at_the_runs_settings():
    from infercast.sim.api import simulate

    res = simulate(
        "llama-3.1-8b",
        "h100-sxm",
        input_len=512,
        output_len=16,
        num_requests=4,
        rate=10.0,
        max_num_batched_tokens=16384,
        max_num_seqs=32,
    )
    budget = memory_budget("llama-3.1-8b", "h100-sxm", max_num_batched_tokens=16384, max_num_seqs=32)
    preset = memory_budget("llama-3.1-8b", "h100-sxm")
    assert res.config["kv_blocks_per_replica"] == budget.num_blocks < preset.num_blocks
