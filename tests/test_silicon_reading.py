"""How a wheel row's batch size, layout and source become a record's clients, layout and lengths (issue 36)."""

from __future__ import annotations

import infercast
from infercast.records.silicon_rows import SWEEP_LENGTH_RATIO, convert, from_wheel_row


def _row(**over: str) -> dict[str, str]:
    row = {
        "id": "x",
        "silicon_data_source": "source_file=/data/b200_sxm/trtllm/1.3.0rc5/m.csv; silicon_concurrency=416",
        "backend": "trtllm",
        "backend_version": "1.3.0rc5",
        "model_path": "Qwen/Qwen3-32B",
        "system": "b200_sxm",
        "precision": "fp8",
        "mode": "agg",
        "isl": "4000",
        "osl": "500",
        "batch_size": "13",
        "tp_size": "2",
        "attention_dp_size": "",
        "moe_ep_size": "",
        "silicon_ttft_ms": "700",
        "silicon_tpot_ms": "13",
    }
    return {**row, **over}


def test_clients_beyond_one_engines_batch_are_spread_over_identical_engines() -> None:
    """416 clients at batch 13 on a dense TP 2 engine: 32 engines of 13 clients each, not 416 on one."""
    row = from_wheel_row(_row())
    assert row is not None
    assert (row["concurrency"], row["tp"], row["attention_dp"]) == ("13", "2", "1")


def test_an_moe_row_whose_clients_are_tp_batches_reads_as_attention_dp() -> None:
    """448 clients at batch 56 on TP 8 of an MoE model: attention DP 8 over the same 8 GPUs (tp 1 x dp 8)."""
    row = from_wheel_row(
        _row(model_path="deepseek-ai/DeepSeek-V3", batch_size="56", tp_size="8", moe_ep_size="8", **_clients(448))
    )
    assert row is not None
    assert (row["concurrency"], row["tp"], row["attention_dp"], row["ep"]) == ("448", "1", "8", "8")


def test_a_row_whose_batch_is_its_clients_is_read_as_before() -> None:
    row = from_wheel_row(_row(batch_size="16", **_clients(16)))
    assert row is not None
    assert (row["concurrency"], row["tp"]) == ("16", "2")
    assert "min_len_ratio" not in row  # aiconfigurator's own runs: fixed lengths


def test_the_dated_sweep_tables_draw_lengths_in_a_range() -> None:
    row = from_wheel_row(
        _row(batch_size="16", silicon_data_source="source_file=2026-04-06.csv; silicon_concurrency=16")
    )
    assert row is not None and row["min_len_ratio"] == str(SWEEP_LENGTH_RATIO)
    records = convert({**row, "engine": row["engine"], "model": row["model"], "gpu": row["gpu"]})
    assert {r.min_len_ratio for r in records} == {SWEEP_LENGTH_RATIO}


def test_engine_limits_bound_each_attention_dp_rank_where_the_engine_says_so() -> None:
    """TensorRT-LLM and vLLM schedule each attention-DP rank under the configured limits; SGLang splits them."""
    per_rank = {}
    for engine in ("trtllm", "sglang"):
        result = infercast.simulate(
            "deepseek-v3",
            "b200",
            engine=engine,
            precision="fp8",
            tp=1,
            ep=8,
            attention_dp=8,
            input_len=256,
            output_len=8,
            concurrency=8,
            max_num_batched_tokens=1024,
            max_num_seqs=64,
        )
        per_rank[engine] = (result.config["max_num_batched_tokens"], result.config["max_num_seqs"])
    assert per_rank == {"trtllm": (8192, 512), "sglang": (1024, 64)}


def _clients(n: int) -> dict[str, str]:
    return {"silicon_data_source": f"source_file=/data/b200_sxm/trtllm/1.3.0rc5/m.csv; silicon_concurrency={n}"}


def test_a_sweep_rows_id_names_its_gpus_where_its_columns_multiply_tp_by_ep() -> None:
    """``..._c64_tp8_ep8_937`` with tp_size 64: one 8-GPU node, TP 8 x EP 8, not 64 GPUs; an attention-DP row
    keeps DP over those 8 GPUs."""
    sweep = "source_file=2026-04-06.csv; silicon_concurrency=64"
    base = dict(model_path="deepseek-ai/DeepSeek-V3", silicon_data_source=sweep, moe_ep_size="8", batch_size="64")
    row = from_wheel_row(_row(id="2026_04_06_x_agg_1024x1024_c64_tp8_ep8_937", tp_size="64", **base))
    assert row is not None and (row["tp"], row["ep"], row["attention_dp"], row["concurrency"]) == ("8", "8", "1", "64")
    row = from_wheel_row(
        _row(id="2026_04_06_x_c64_tp8_ep8_9", tp_size="1", attention_dp_size="64", **{**base, "batch_size": "1"})
    )
    assert row is not None and (row["tp"], row["ep"], row["attention_dp"], row["concurrency"]) == ("1", "8", "8", "64")


def test_a_dated_sweeps_fp8_rows_run_an_8_bit_kv_cache_on_every_engine() -> None:
    sweep = "source_file=2026-04-06.csv; silicon_concurrency=16"
    own = "source_file=/data/h100_sxm/vllm/0.12.0/m.csv; silicon_concurrency=16"
    for source, kv in ((sweep, "fp8"), (own, "bf16")):
        row = from_wheel_row(
            _row(backend="vllm", backend_version="0.19.0", batch_size="16", silicon_data_source=source)
        )
        assert row is not None
        assert {r.kv_precision for r in convert(row)} == {kv}


def test_modelopt_fp8_checkpoints_carry_an_8_bit_kv_cache_like_its_nvfp4_ones() -> None:
    """NVIDIA's FP8 checkpoints come from TensorRT Model Optimizer, whose kv_cache_quant_algo defaults to FP8: vLLM's
    'auto' KV dtype follows it, as for its NVFP4 checkpoints; another origin's FP8 checkpoint keeps 16 bits."""
    own = "source_file=/data/h200_sxm/vllm/0.12.0/m.csv; silicon_concurrency=16"
    for path, kv in (("nvidia/Llama-3.1-8B-Instruct-FP8", "fp8"), ("Qwen/Qwen3-32B-FP8", "bf16")):
        row = from_wheel_row(
            _row(backend="vllm", backend_version="0.12.0", batch_size="16", silicon_data_source=own, model_path=path)
        )
        assert row is not None and {r.kv_precision for r in convert(row)} == {kv}


def test_a_dated_sweeps_tensorrt_llm_row_without_a_version_reads_as_a_later_release() -> None:
    sweep = "source_file=2026-04-06.csv; silicon_concurrency=16"
    row = from_wheel_row(_row(backend_version="", batch_size="16", silicon_data_source=sweep))
    assert row is not None and {r.engine for r in convert(row)} == {"trtllm-1.1"}
    own = from_wheel_row(_row(backend_version="", batch_size="16", **_clients(16)))
    assert own is not None and {r.engine for r in convert(own)} == {"trtllm"}


def test_a_length_range_alone_does_not_make_a_row_a_dated_sweeps() -> None:
    """A closed-loop CSV of the user's own with a length range keeps its engine's fp8 reading and release."""
    sweep = "source_file=2026-04-06.csv; silicon_concurrency=16"
    row = from_wheel_row(_row(backend="vllm", backend_version="", batch_size="16", silicon_data_source=sweep))
    assert row is not None
    own = {k: v for k, v in row.items() if k != "dated_sweep"}
    assert {r.kv_precision for r in convert(own)} == {"bf16"} and {r.min_len_ratio for r in convert(own)} == {0.8}
    assert {r.kv_precision for r in convert(row)} == {"fp8"}


def test_the_sweeps_results_database_rows_read_as_dated_sweeps() -> None:
    """``db-dump/`` rows (config-named ids, CI workflow runs) are the sweeps' own: a length range and 8-bit KV."""
    dump = (
        "db-dump/2026-04-27; config_id=733; silicon_concurrency=16; measured=2026-04-17T00:00:00.000Z; "
        "workflow_run_id=758; vllm/vllm-openai:v0.19.0-cu130"
    )
    row = from_wheel_row(_row(backend="vllm", backend_version="0.19.0", batch_size="16", silicon_data_source=dump))
    assert row is not None
    records = convert(row)
    assert {r.min_len_ratio for r in records} == {0.8} and {r.kv_precision for r in records} == {"fp8"}


def test_a_sweep_row_folding_tp_x_ep_past_one_node_reads_as_one_nodes_layout() -> None:
    """tp_size 64 = moe_tp 8 x moe_ep 8 on 8-GPU B200 nodes, no layout in the id: TP 8 x EP 8 on one node."""
    dump = "db-dump/2026-04-27; config_id=9; silicon_concurrency=4; measured=2026-03-01T00:00:00.000Z"
    over = dict(
        id="dsv3_b200_sglang_fp8_agg_1024x1024_c4_cfg9",
        backend="sglang",
        model_path="deepseek-ai/DeepSeek-V3",
        batch_size="4",
        tp_size="64",
        moe_tp_size="8",
        moe_ep_size="8",
        silicon_data_source=dump,
    )
    row = from_wheel_row(_row(**over))
    assert row is not None and (row["tp"], row["ep"], row["attention_dp"]) == ("8", "8", "1")
    own = from_wheel_row(_row(**{**over, "silicon_data_source": "source_file=/d/m.csv; silicon_concurrency=4"}))
    assert own is not None and own["tp"] == "64"  # aiconfigurator's own rows keep their columns


def _run(model: str, source: str, ttft: str, tpot: str = "10.02") -> dict[str, str]:
    """A wheel row of one B200 fp8 1k/1k run, as ``repeats`` reads it."""
    shape = {"system": "b200_sxm", "precision": "fp8", "isl": "1024", "osl": "1024", "model_path": model}
    return {**shape, "silicon_data_source": source, "silicon_ttft_ms": ttft, "silicon_tpot_ms": tpot}


def test_a_run_published_twice_counts_once_as_its_dated_copy() -> None:
    """The gap analysis rounds a dated table's run to 0.01 ms; the copy kept names its measured date (so its launch
    script is known). Another run of the same shape stays."""
    from infercast.records.silicon_rows import repeats

    dated = "source_file=2026-03-25.csv; measured=2026-03-20T22:08:23Z"
    rows = [
        _run("m", "source_file=gap.csv", "600.76"),
        _run("m", dated, "600.7576397375033", "10.023455404528836"),
        _run("m", "source_file=gap.csv", "612.0"),
    ]
    assert repeats(rows) == [True, False, False]


def test_a_run_named_by_another_model_of_the_same_architecture_counts_once() -> None:
    """The database dump names DeepSeek-R1's runs DeepSeek-V3 (the same architecture): one point, not two, kept as
    the dated table's copy (it names the model the sweep ran). A different architecture with the same times stays."""
    from infercast.records.silicon_rows import repeats

    rows = [
        _run("deepseek-ai/DeepSeek-V3", "db-dump/2026-04-27; measured=2026-02-05T00:00:00.000Z", "600.1"),
        _run("deepseek-ai/DeepSeek-R1", "source_file=2026-03-25.csv; measured=2026-02-05T06:42:10Z", "600.1"),
        _run("Qwen/Qwen3-32B", "db-dump/2026-04-27; measured=2026-02-05T00:00:00.000Z", "600.1"),
    ]
    assert repeats(rows) == [True, False, False]


def test_a_sweep_that_writes_gpu_totals_as_tp_is_left_out_whole() -> None:
    """GB200 DeepSeek-R1's 2025-11 table names 12-72 "TP" for 128-head models: GPU totals of multi-worker
    deployments. Its rows whose number divides the heads (32) are such deployments too; another day's sweep, or
    an id's TP that the tp x ep column hides (tp8_ep8 written 64), stays."""
    from infercast.records.silicon_rows import gpu_total_sweeps

    def row(tp: str, day: str, ident: str) -> dict[str, str]:
        source = f"source_file=2026-04-06.csv; model=DeepSeek-R1; measured={day}T00:00:00.000Z"
        shape = {"system": "gb200", "model_path": "deepseek-ai/DeepSeek-R1", "precision": "fp4", "tp_size": tp}
        return {**shape, "id": ident, "silicon_data_source": source}

    rows = [
        row("28", "2025-11-17", "x_c2150_tp28_ep1_1"),
        row("32", "2025-11-17", "x_c2150_tp32_ep1_2"),
        row("8", "2026-01-10", "x_c64_tp8_ep1_3"),
        row("64", "2026-01-11", "x_c64_tp8_ep8_4"),
    ]
    assert gpu_total_sweeps(rows) == [True, True, False, False]


def test_a_sweep_whose_clients_were_capped_outside_the_engine_is_left_out_at_that_client_count() -> None:
    """vLLM gpt-oss-120b on H100 at 512 clients held ~100 in flight at every TP and length although all 512 fit
    beside the weights: its means measure a cap outside the engine. That client count of that sweep goes (a TP 2
    row too, whose own KV would not have fitted); its 64-client runs, and a run that filled its KV pool, stay."""
    from infercast.records.silicon_rows import client_capped_sweeps

    def row(tp: str, clients: str, isl: str, ttft: str, tpot: str, model: str = "openai/gpt-oss-120b") -> dict:
        source = f"source_file=2026-04-06.csv; silicon_concurrency={clients}; measured=2025-12-08T00:00:00.000Z"
        precision = "fp4" if "gpt-oss" in model else ""  # a blank precision: the 16-bit checkpoint
        shape = {"system": "h100_sxm", "model_path": model, "precision": precision, "tp_size": tp, "osl": "1024"}
        ident = f"x_c{clients}_tp{tp}_ep1_{tp}{isl}"
        return {**shape, "isl": isl, "id": ident, "silicon_data_source": source, **_times(ttft, tpot)}

    rows = [
        row("8", "512", "1024", "22294.9", "5.33"),  # ~100 of 512 in flight, all fit: capped
        row("2", "512", "8192", "113500.1", "26.9"),  # same sweep and clients: left out with it
        row("8", "64", "1024", "150.0", "4.0"),  # the 64-client runs of the day stay
        row("1", "16", "2048", "88769.7", "26.3", "Qwen/Qwen3-32B"),  # 2 of 16 in flight: 64 GB of weights
    ]
    assert client_capped_sweeps(rows) == [True, True, False, False]


def _times(ttft: str, tpot: str) -> dict[str, str]:
    return {"silicon_ttft_ms": ttft, "silicon_tpot_ms": tpot}


def test_a_vllm_launch_script_without_a_kv_dtype_runs_the_checkpoints() -> None:
    """vLLM's 'auto' KV dtype is the checkpoint's: MiniMax-M2.5's FP8 release names no KV scheme, so its H100
    script of 2026-03-27, which sets none, runs a 16-bit cache; the B200 script of 2026-04-03 sets fp8."""

    def row(gpu: str, day: str) -> dict[str, str]:
        source = f"source_file=2026-04-06.csv; model=MiniMax-M2.5; silicon_concurrency=64; measured={day}T00:00:00Z"
        shape = dict(backend="vllm", backend_version="0.18.0", model_path="MiniMaxAI/MiniMax-M2.5", system=gpu)
        ident = f"2026_04_06_minimax_{gpu}_vllm_fp8_agg_8192x1024_c64_tp4_ep1_7"
        wheel = _row(**shape, id=ident, isl="8192", osl="1024", tp_size="4", silicon_data_source=source)
        converted = from_wheel_row(wheel)
        assert converted is not None
        return converted

    h100 = convert(row("h100_sxm", "2026-03-27"))
    assert {r.kv_precision for r in h100} == {"bf16"} and "the launch script sets no 8-bit cache" in h100[0].notes
    assert {r.kv_precision for r in convert(row("b200_sxm", "2026-04-05"))} == {"fp8"}
