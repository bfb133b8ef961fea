"""Dated sweep rows read with their launch script's settings, by the script version in effect (sweep_launches)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infercast.errors import InfercastError
from infercast.files import load_yaml
from infercast.records.record import Record
from infercast.records.silicon_rows import convert, from_wheel_row
from infercast.records.sweep_launches import SweepRow, launch_for, launches, parse_launches


def _wheel(measured: str, **over: str) -> dict[str, str]:
    """A dated sweep row of the wheel's silicon_sample.csv: SGLang, DeepSeek-R1 fp8 on 8 B200, 1k/1k."""
    clients = over.pop("clients", "64")
    row = {
        "id": f"2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x1024_c{clients}_tp8_0_ep1_0_1",
        "silicon_data_source": f"source_file=2026-03-25.csv; model=DeepSeek-R1; silicon_concurrency={clients}; "
        f"measured={measured}; wip=False",
        "backend": "sglang",
        "backend_version": "0.5.9",
        "model_path": "deepseek-ai/DeepSeek-R1",
        "system": "b200_sxm",
        "precision": "fp8",
        "mode": "agg",
        "isl": "1024",
        "osl": "1024",
        "batch_size": clients,
        "tp_size": "8",
        "attention_dp_size": "1",
        "moe_ep_size": "1",
        "silicon_ttft_ms": "300",
        "silicon_tpot_ms": "12",
    }
    return {**row, **over}


def _records(row: dict[str, str]) -> list[Record]:
    read = from_wheel_row(row)
    assert read is not None
    return convert(read)


def test_an_sglang_row_gets_its_scripts_recv_interval_prefill_batch_and_limits() -> None:
    """dsr1_fp8_b200.sh (2026-03-11) at TP 8: poll every 30 decode steps from 16 clients, 32k prefill batches,
    128 running requests, --mem-fraction-static 0.82 (the old reading: poll every step, 16k batches)."""
    rec = _records(_wheel("2026-03-25T16:34:14Z"))[0]
    assert rec.scheduler_recv_interval == 30
    assert rec.max_num_batched_tokens == 32768
    assert (rec.max_num_seqs, rec.gpu_memory_utilization) == (128, 0.82)
    assert "launch: benchmarks/single_node/dsr1_fp8_b200.sh @ 64c20b6b5 (2026-03-11)" in rec.notes
    light = _records(_wheel("2026-03-25T16:34:14Z", clients="8"))[0]
    assert light.scheduler_recv_interval == 10


def test_points_of_the_mtp_config_take_the_mtp_script() -> None:
    """256 clients were the DeepSeek-R1 MTP config's points then (the plain config ran 4-64): they take its script
    of the same date (2 EAGLE steps, 512 running requests, 16k prefill batches), not the plain script's 128."""
    rec = _records(_wheel("2026-03-25T16:34:14Z", clients="256"))[0]
    assert "launch: benchmarks/single_node/dsr1_fp8_b200_mtp.sh @ 64c20b6b5 (2026-03-11)" in rec.notes
    assert (rec.spec_tokens, rec.max_num_seqs, rec.max_num_batched_tokens) == (2, 512, 16384)
    assert rec.scheduler_recv_interval == 30
    plain = _records(_wheel("2026-03-25T16:34:14Z", clients="64"))[0]
    assert plain.spec_tokens == 0 and plain.max_num_seqs == 128


def test_the_scripts_branches_on_tp_apply() -> None:
    """The same script at TP 4 (8k/1k only): 8k prefill batches, 32 running requests, 0.95, poll every 10."""
    rec = _records(_wheel("2026-03-25T16:34:14Z", tp_size="4", isl="8192", clients="32", id="x_c32_tp4_0_ep1_0_1"))[0]
    assert (rec.max_num_batched_tokens, rec.max_num_seqs, rec.gpu_memory_utilization) == (8192, 32, 0.95)
    assert rec.scheduler_recv_interval == 10


def test_the_measured_date_picks_the_script_version() -> None:
    """TensorRT-LLM DeepSeek-R1 fp8 on H200: max_num_tokens = C + ISL + 64 rounded up to 64 in October 2025's
    script, at least 8192 from 2026-01-27's; the old reading was C + L + 500 for both."""
    over = {"backend": "trtllm", "backend_version": "", "system": "h200_sxm", "clients": "4"}
    early = _records(_wheel("2025-11-02T00:00:00.000Z", **over))[0]
    late = _records(_wheel("2026-01-28T06:18:44Z", **over))[0]
    assert early.max_num_batched_tokens == 1152 and late.max_num_batched_tokens == 8192
    assert early.gpu_memory_utilization == late.gpu_memory_utilization == 0.75
    assert "dsr1_fp8_h200_trt_slurm.sh @ 9596d23d7" in early.notes and "dsr1_fp8_h200_trt.sh @ b30c3398a" in late.notes


def test_a_vllm_script_with_async_scheduling_reads_as_the_async_preset() -> None:
    """Llama-3.1-70B fp8 on H200, vLLM without a recorded version (2025-10-29): 8192 tokens per step, C sequences,
    async-scheduling on in the script's config (the old reading: the synchronous 0.12 preset, C + L + 500)."""
    rec = _records(
        _wheel(
            "2025-10-29T00:00:00.000Z",
            backend="vllm",
            backend_version="",
            model_path="meta-llama/Llama-3.1-70B",
            system="h200_sxm",
            silicon_data_source="source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=8; "
            "measured=2025-10-29T00:00:00.000Z",
            clients="8",
            tp_size="1",
            id="x_c8_tp1_ep1_1",
        )
    )[0]
    assert rec.engine == "vllm-0.14"
    assert (rec.max_num_batched_tokens, rec.max_num_seqs, rec.gpu_memory_utilization) == (8192, 8, 0.9)


def test_a_vllm_gpt_oss_hopper_script_that_exports_marlin_runs_its_experts_through_marlin() -> None:
    """gptoss_fp4_h200.sh @ cec542a9a (2026-03-27) exports VLLM_MXFP4_USE_MARLIN=1: its rows carry the Marlin
    kernel, their deployment prices the experts with it and the notes say so; the 2025 script set nothing."""
    from infercast.calibrate.predict import deployment_of

    def row(measured: str) -> dict[str, str]:
        return _wheel(
            measured,
            backend="vllm",
            backend_version="0.18.0",
            model_path="openai/gpt-oss-120b",
            system="h200_sxm",
            precision="fp4",
            silicon_data_source="source_file=2026-04-06.csv; model=GPT-OSS-120B; silicon_concurrency=8; "
            f"measured={measured}",
            clients="8",
            id="x_c8_tp4_ep1_1",
            tp_size="4",
        )

    rec = _records(row("2026-03-28T00:00:00.000Z"))[0]
    assert rec.moe_backend == "marlin" and "MXFP4 experts through Marlin (VLLM_MXFP4_USE_MARLIN=1)" in rec.notes
    dep = deployment_of(rec)
    assert dep.engine.moe_backend == "marlin" and dep.engine.sources["moe_backend"].startswith("user launch")
    assert _records(row("2025-11-01T00:00:00.000Z"))[0].moe_backend == ""


@pytest.mark.parametrize(
    ("system", "backend", "words"),
    [
        ("h200_sxm", "triton", "MXFP4 experts through OpenAI's Triton kernels"),
        ("b200_sxm", "trtllm", "trtllm-gen kernels (moe_config backend TRTLLM)"),
    ],
)
def test_trtllm_gpt_oss_configs_carry_their_moe_backend(system: str, backend: str, words: str) -> None:
    """gptoss_fp4_h200_trt*.sh write ``moe_config: backend: TRITON`` in every version, gptoss_fp4_b200_trt*.sh
    ``TRTLLM``: the rows carry it, and their notes say so in TensorRT-LLM's words."""

    rec = _records(
        _wheel(
            "2026-02-10T00:00:00.000Z",
            backend="trtllm",
            backend_version="1.2.0rc6",
            model_path="openai/gpt-oss-120b",
            system=system,
            precision="fp4",
            silicon_data_source="source_file=2026-04-06.csv; model=GPT-OSS-120B; silicon_concurrency=8; "
            "measured=2026-02-10T00:00:00.000Z",
            clients="8",
            id="x_c8_tp4_ep1_1",
            tp_size="4",
        )
    )[0]
    assert rec.moe_backend == backend and words in rec.notes


def test_minimax_fp8_b200_scripts_that_turn_flashinfer_and_deepgemm_off_run_triton_experts() -> None:
    """minimaxm2.5_fp8_b200.sh exported VLLM_USE_FLASHINFER_MOE_FP8=0 and VLLM_MOE_USE_DEEP_GEMM=0 from 2026-03-11
    to 2026-04-02 (f342df18e, 626932a11); bddbf4031 dropped both."""

    def row(measured: str) -> dict[str, str]:
        return _wheel(
            measured,
            id="2026_04_06_minimax_m2_5_b200_sxm_vllm_fp8_agg_1024x1024_c64_tp4_ep1_7",
            silicon_data_source="source_file=2026-04-06.csv; model=MiniMax-M2.5; silicon_concurrency=64; "
            f"measured={measured}; wip=False",
            backend="vllm",
            backend_version="0.18.0",
            model_path="MiniMaxAI/MiniMax-M2.5",
            tp_size="4",
            moe_tp_size="4",
        )

    rec = _records(row("2026-03-20T00:00:00.000Z"))[0]
    assert rec.moe_backend == "triton" and "FP8 experts through vLLM's Triton kernel" in rec.notes
    assert _records(row("2026-04-10T00:00:00.000Z"))[0].moe_backend == ""


def test_a_database_dump_row_names_its_model_by_its_config_prefix() -> None:
    """db-dump rows carry no model=: their id's config prefix (dsr1_) names the family; 2026-04-17 on B300 is the
    first version of dsr1_fp4_b300.sh (SGLang: 256 running requests, --mem-fraction-static 0.85)."""
    rec = _records(
        _wheel(
            "2026-04-17T00:00:00.000Z",
            id="dsr1_b300_sglang_fp4_agg_1024x1024_c64_cfg12",
            silicon_data_source="db-dump/2026-04-27; config_id=12; silicon_concurrency=64; "
            "measured=2026-04-17T00:00:00.000Z; workflow_run_id=7; lmsysorg/sglang:v0.5.10.post1-cu130",
            model_path="deepseek-ai/DeepSeek-V3",
            system="b300_sxm",
            precision="fp4",
        )
    )[0]
    assert "launch: benchmarks/single_node/dsr1_fp4_b300.sh @ 9ebeafb4e (2026-04-17)" in rec.notes
    assert (rec.max_num_seqs, rec.gpu_memory_utilization, rec.scheduler_recv_interval) == (256, 0.85, 30)


def test_rows_without_a_version_on_their_date_keep_the_readers_settings() -> None:
    """A date before the family's first script version, and one of aiconfigurator's own runs: no launch."""
    before = _records(_wheel("2025-09-01T00:00:00Z"))[0]
    assert "launch:" not in before.notes and before.max_num_batched_tokens == 16384
    assert before.scheduler_recv_interval == 0
    own_source = "source_file=/data/b200/sglang/m.csv; silicon_concurrency=64"
    own = _records(_wheel("2026-03-25T16:34:14Z", silicon_data_source=own_source))[0]
    assert "launch:" not in own.notes and own.scheduler_recv_interval == 0


def test_every_packaged_expression_evaluates() -> None:
    """Each family's versions, tried at the sweeps' loads and lengths, give whole budgets and fractions <= 1."""
    for (engine, model, precision, gpu), versions in launches().items():
        for version in versions:
            for clients in (4, 64, 256):
                for isl, osl in ((1024, 1024), (1024, 8192), (8192, 1024)):
                    for tp in (4, 8):
                        row = SweepRow(engine, model, precision, gpu, version.date, clients, isl, osl, tp=tp)
                        launch = launch_for(row)
                        same_day = [v for v in versions if v.date == version.date]
                        if launch is None:  # outside the points of every script of that date (the MTP config's)
                            assert all(v.points is not None for v in same_day)
                            continue
                        assert launch.source in {v.source for v in same_day}
                        assert launch.budget >= 0 and 0 <= launch.memory_fraction <= 1


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"budget": "__import__('os')"}, "settings.budget"),
        ({"budget": "C +"}, "settings.budget"),
        ({"recv_every": 10}, "settings.recv_every"),
        ({"kv_cache": "fp4"}, "settings.kv_cache"),
    ],
)
def test_a_malformed_entry_is_refused_on_one_line_naming_it(settings: dict[str, object], named: str) -> None:
    raw = {"sglang": {"DeepSeek-R1 fp8 b200": [{"source": "a.sh @ abcdef1 (2026-01-01)", "settings": settings}]}}
    with pytest.raises(InfercastError) as err:
        parse_launches(raw)
    assert err.value.field == "sweep_launches" and named in str(err.value) and "\n" not in str(err.value)


def test_a_bad_source_or_a_bad_file_is_refused_on_one_line(tmp_path: Path) -> None:
    raw = {"vllm": {"Kimi-K2.5 int4 h200": [{"source": "a.sh (2026-01-01)", "settings": {}}]}}
    with pytest.raises(InfercastError, match=r"Kimi-K2.5 int4 h200\[0\]\.source must read"):
        parse_launches(raw)
    bad = tmp_path / "sweep_launches.yaml"
    bad.write_text("sglang: [unclosed\n")
    with pytest.raises(InfercastError) as err:
        parse_launches(load_yaml(bad, "sweep_launches"))
    assert "\n" not in str(err.value) and str(err.value).startswith("sweep_launches:")
    bad.write_text(yaml.safe_dump({"sglang": {"DeepSeek-R1 fp8": []}}))
    with pytest.raises(InfercastError, match="must read '<model> <precision> <gpu>'"):
        parse_launches(load_yaml(bad, "sweep_launches"))


def test_a_tensorrt_llm_llama_row_at_1k_1k_below_tp_8_holds_prompts_in_batch_waits() -> None:
    """70b_fp8_h200_trt_slurm.sh (2025-10-29) adds batch_wait_timeout_iters 20 and batch_wait_max_tokens_ratio 0.9
    at 1k/1k below TP 8 only: the TP 4 row waits, the TP 8 and the 1k/8k rows do not."""

    def row(tp: str, osl: str) -> dict[str, str]:
        return _wheel(
            "2025-10-29T00:00:00.000Z",
            id=f"2026_04_06_llama_3_1_70b_h200_sxm_trtllm_fp8_agg_1024x{osl}_c4_tp{tp}_ep1_1",
            silicon_data_source="source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=4; "
            "measured=2025-10-29T00:00:00.000Z; wip=False",
            backend="trtllm",
            backend_version="",
            model_path="meta-llama/Llama-3.1-70B-Instruct",
            system="h200_sxm",
            osl=osl,
            batch_size="4",
            tp_size=tp,
            clients="4",
        )

    waits = _records(row("4", "1024"))[0]
    assert (waits.batch_wait_iters, waits.batch_wait_ratio) == (20, 0.9)
    for tp, osl in (("8", "1024"), ("4", "8192")):
        rec = _records(row(tp, osl))[0]
        assert (rec.batch_wait_iters, rec.batch_wait_ratio) == (0, 0.0)


def test_tensorrt_llm_deepseek_rows_with_attention_dp_balance_their_prompts() -> None:
    """dsr1_fp8_h200_trt.sh adds attention_dp_config (enable_balance, timeout_iters 60) with attention DP: a
    TP 1 x DP 8 row holds prompts up to 60 steps, a TP 8 row of the same script does not."""
    dp = launch_for(SweepRow("trtllm", "DeepSeek-R1", "fp8", "h200", "2026-02-10", 256, 1024, 1024, 1, 8, 8))
    tp = launch_for(SweepRow("trtllm", "DeepSeek-R1", "fp8", "h200", "2026-02-10", 32, 1024, 1024, 8, 8, 1))
    assert dp is not None and tp is not None
    assert (dp.adp_balance_iters, tp.adp_balance_iters) == (60, 0)


def test_rows_measured_at_an_mtp_configs_merge_draft_with_mtp() -> None:
    """bf3456727 (2026-01-14) added the DeepSeek-R1 TensorRT-LLM -mtp configs and started their sweeps: those
    rows draft 3 tokens per step (1 with attention DP, whose per-rank batch is C / 8); the plain script's rows of
    2026-01-29 draft none."""
    mtp = launch_for(SweepRow("trtllm", "DeepSeek-R1", "fp8", "b200", "2026-01-14", 16, 1024, 1024, 8, 8, 1))
    dp = launch_for(SweepRow("trtllm", "DeepSeek-R1", "fp8", "h200", "2026-01-14", 256, 1024, 1024, 1, 8, 8))
    plain = launch_for(SweepRow("trtllm", "DeepSeek-R1", "fp8", "b200", "2026-01-29", 16, 1024, 1024, 8, 1, 1))
    assert mtp is not None and dp is not None and plain is not None
    assert (mtp.spec_tokens, mtp.max_seqs, mtp.budget) == (3, 16, 1152)  # roundup(4 x 16 + 1024 + 64, 64)
    assert (dp.spec_tokens, dp.max_seqs, dp.memory_fraction) == (1, 32, 0.75)
    assert plain.spec_tokens == 0


def test_an_mtp_row_carries_its_draft_length_and_the_fitted_acceptance() -> None:
    over = {"backend": "trtllm", "backend_version": "1.1.0rc2.post2", "clients": "16", "moe_ep_size": "8"}
    rec = _records(_wheel("2026-01-14T22:26:21Z", **over))[0]
    assert rec.spec_tokens == 3 and 0.4 <= rec.spec_acceptance <= 0.95
    assert "MTP draft tokens 3" in rec.notes
    plain = _records(_wheel("2026-01-29T15:27:29Z", **over))[0]
    assert (plain.spec_tokens, plain.spec_acceptance) == (0, 0.0)


def test_the_sglang_qwen35_mtp_merge_rows_draft_with_their_models_acceptance() -> None:
    """qwen3.5_fp8_b200_mtp.sh @ 35d4bb367 (merged 2026-03-20T22:08Z): EAGLE on the MTP head, 3 steps; the rows
    take Qwen3.5's own fitted acceptance, not DeepSeek-R1's."""
    from infercast.records.sweep_launches import mtp_acceptances

    rec = _records(
        _wheel(
            "2026-03-20T22:08:23Z",
            clients="16",
            id="2026_03_25_qwen3_5_397b_b200_sxm_sglang_fp8_agg_1024x1024_c16_tp4_0_ep1_0_473",
            silicon_data_source="source_file=2026-03-25.csv; model=Qwen3.5-397B; silicon_concurrency=16; "
            "measured=2026-03-20T22:08:23Z; wip=False",
            model_path="Qwen/Qwen3.5-397B-A17B",
            tp_size="4",
        )
    )[0]
    assert "qwen3.5_fp8_b200_mtp.sh @ 35d4bb367" in rec.notes
    assert rec.spec_tokens == 3 and rec.spec_acceptance == mtp_acceptances()["qwen3.5-397b-a17b"]
    assert (rec.scheduler_recv_interval, rec.max_num_seqs) == (30, 16)


def _kimi(**over: str) -> dict[str, str]:
    """A Kimi-K2.5 NVFP4 vLLM row of the 2026-04-06 table: config TP 4 x EP 4 that the wheel writes as attention DP 4
    with 16-way experts."""
    row = _wheel(
        "2026-03-27T00:00:00.000Z",
        clients="4",
        id="2026_04_06_kimi_k2_5_b200_sxm_vllm_fp4_agg_1024x1024_c4_tp4_ep4_1294",
        silicon_data_source="source_file=2026-04-06.csv; model=Kimi-K2.5; silicon_concurrency=4; "
        "measured=2026-03-27T00:00:00.000Z; wip=False",
        backend="vllm",
        backend_version="0.17.0",
        model_path="moonshotai/Kimi-K2.5",
        precision="fp4",
        batch_size="1",
        tp_size="4",
        attention_dp_size="4",
        moe_tp_size="1",
        moe_ep_size="16",
    )
    return {**row, **over}


def test_a_vllm_script_without_expert_parallel_runs_tp_over_the_configs_gpus() -> None:
    """kimik2.5_fp4_b200.sh passes only --tensor-parallel-size: TP 4 on 4 GPUs, experts split tensor-parallel, all
    clients on one server (not attention DP 4, nor 16 GPUs as the database dump's columns read)."""
    for row in (_kimi(), _kimi(id="kimik2_5_b200_vllm_fp4_agg_1024x1024_c4_cfg635")):
        rec = _records(row)[0]
        assert (rec.tp, rec.ep, rec.attention_dp, rec.concurrency) == (4, 1, 1, 4)
        assert "TP 4, experts split tensor-parallel" in rec.notes


def test_a_vllm_script_with_expert_parallel_and_dp_attention_lays_out_as_launched() -> None:
    """minimaxm2.5_fp8_b200.sh @ 626932a11 passes --enable-expert-parallel on every run (EP_SIZE >= 1); the fp4
    script runs the master config's dp-attn points (TP 2 x EP 2, 1k/1k, >= 512 clients) as TP 1 x DP 2."""
    fp8 = _wheel(
        "2026-03-28T00:00:00.000Z",
        id="2026_04_06_minimax_m2_5_b200_sxm_vllm_fp8_agg_1024x1024_c64_tp2_ep1_7",
        silicon_data_source="source_file=2026-04-06.csv; model=MiniMax-M2.5; silicon_concurrency=64; "
        "measured=2026-03-28T00:00:00.000Z; wip=False",
        backend="vllm",
        backend_version="0.18.0",
        model_path="MiniMaxAI/MiniMax-M2.5",
        tp_size="2",
        moe_tp_size="2",
    )
    rec = _records(fp8)[0]
    assert (rec.tp, rec.ep, rec.attention_dp) == (2, 2, 1)
    dp = {
        **fp8,
        "id": "minimaxm2_5_b200_vllm_fp4_agg_1024x1024_c512_cfg707",
        "silicon_data_source": "db-dump/2026-04-27; config_id=707; silicon_concurrency=512; "
        "measured=2026-04-10T00:00:00.000Z; workflow_run_id=1; vllm/vllm-openai:v0.19.0",
        "precision": "fp4",
        "attention_dp_size": "2",
        "moe_tp_size": "1",
        "moe_ep_size": "4",
        "batch_size": "256",
    }
    rec = _records(dp)[0]
    assert (rec.tp, rec.ep, rec.attention_dp, rec.concurrency) == (1, 2, 2, 512)
    plain = {
        **dp,
        "silicon_data_source": dp["silicon_data_source"].replace("=512", "=256"),
        "id": "minimaxm2_5_b200_vllm_fp4_agg_1024x1024_c256_cfg706",
    }
    rec = _records(plain)[0]
    assert (rec.tp, rec.ep, rec.attention_dp) == (2, 2, 1)


def test_tensorrt_llm_deepseek_rows_carry_their_scripts_cuda_graphs() -> None:
    """dsr1_fp8_b200_trt.sh @ ec7bafaae captures generation batches up to the clients (cuda_graph_config) and,
    at 1k/1k from 64 clients, piecewise graphs up to max_num_tokens that replay prompt steps too: the rows carry
    both, and the notes say which."""
    over = {"backend": "trtllm", "backend_version": "1.2.0rc6.post3"}
    light = _records(_wheel("2026-01-29T15:27:29Z", clients="8", **over))[0]
    loaded = _records(_wheel("2026-01-29T15:27:29Z", clients="64", **over))[0]
    assert (light.cuda_graphs, light.graph_max_tokens) == ("decode", 8)
    assert (loaded.cuda_graphs, loaded.graph_max_tokens) == ("tokens", 8192)
    assert "decode CUDA graphs up to 8 sequences" in light.notes
    assert "piecewise CUDA graphs up to 8192 tokens" in loaded.notes
