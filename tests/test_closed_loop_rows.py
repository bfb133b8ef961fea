"""Closed-loop benchmark rows in aiconfigurator's silicon format: read directly by ``validate --data``, mapped
onto the catalogs (other GPUs, models, precisions and EP than the committed H100 rows), bad rows refused by
name."""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import pytest

from infercast.errors import InfercastError
from infercast.records.readers import load_records, read_records
from infercast.records.silicon_rows import (
    catalog_gpu_id,
    catalog_model_id,
    convert,
    convert_rows,
    drifting_runs,
    lockstep_ttft_bound,
)
from tests.cli_helpers import run, run_json

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "reference" / "closed_loop_h100.csv"
COMMITTED = ROOT / "data" / "measurements" / "closed_loop" / "h100-sxm.csv"
HEADER = "id,engine,engine_version,model,gpu,precision,tp,input_len,output_len,concurrency,ttft_ms_mean,tpot_ms_mean"


@pytest.mark.parametrize(
    ("repo", "catalog_id"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("Qwen/Qwen3-32B", "qwen3-32b"),
        ("Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b"),
        ("nvidia/DeepSeek-R1-FP4", "deepseek-r1"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1"),
        ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
        ("nvidia/Llama-3.3-70B-Instruct-FP8", "llama-3.3-70b"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"),
        ("openai/gpt-oss-120b", "gpt-oss-120b"),
        ("moonshotai/Kimi-K2.5", "kimi-k2.5"),
    ],
)
def test_hugging_face_repo_ids_map_onto_the_catalog(repo: str, catalog_id: str) -> None:
    assert catalog_model_id(repo) == catalog_id


def test_a_model_outside_the_catalog_is_refused_naming_it() -> None:
    with pytest.raises(InfercastError, match="Qwen2-VL-7B") as err:
        catalog_model_id("Qwen/Qwen2-VL-7B")
    assert err.value.field == "model" and "qwen3-32b" in (err.value.allowed or [])


@pytest.mark.parametrize(
    ("name", "gpu"),
    [
        ("h100-sxm", "h100-sxm"),
        ("h100_sxm", "h100-sxm"),
        ("h200_sxm", "h200"),
        ("b200-sxm", "b200"),
        ("gb200_sxm", "gb200"),
        ("a100_sxm", "a100-80gb"),
        ("l40s", "l40s"),
    ],
)
def test_benchmark_system_names_map_onto_the_hardware_catalog(name: str, gpu: str) -> None:
    assert catalog_gpu_id(name) == gpu


def test_an_unknown_system_is_refused_with_the_catalog() -> None:
    with pytest.raises(InfercastError, match="tpu_v5") as err:
        catalog_gpu_id("tpu_v5")
    assert err.value.field == "gpu"


def _row(**kw: str) -> dict[str, str]:
    row = dict(
        zip(
            HEADER.split(","),
            [
                "x_c16_tp2_epnone_1",
                "trtllm",
                "1.0.0rc3",
                "Qwen/Qwen3-32B",
                "h100-sxm",
                "fp8",
                "2",
                "1024",
                "128",
                "16",
                "300.0",
                "15.0",
            ],
            strict=True,
        )
    )
    return {**row, **kw}


def test_a_row_becomes_a_ttft_and_a_tpot_record_with_the_engine_readings() -> None:
    ttft, tpot = convert(_row())
    assert (ttft.kind, tpot.kind) == ("serving_ttft", "serving_tpot")
    assert (ttft.statistic, tpot.statistic) == ("mean", "mean")
    assert ttft.value_si == pytest.approx(0.3) and tpot.value_si == pytest.approx(0.015)
    assert ttft.concurrency == 16 and ttft.num_prompts == 160 and ttft.min_len_ratio == 1.0
    assert ttft.max_num_batched_tokens == 16 + 1024 + 500  # TensorRT-LLM: C + L + 500
    assert ttft.kv_precision == "fp8" and ttft.gpu_memory_utilization == 0.80
    vllm = convert(_row(engine="vllm", engine_version="0.12.0"))[0]
    assert vllm.max_num_batched_tokens == 16 + 1024 + 500  # the same generator rule as TensorRT-LLM's
    assert vllm.kv_precision == "bf16" and vllm.gpu_memory_utilization == 0
    assert "1540 tokens per step (aiconfigurator's generator rule C + L + 500)" in vllm.notes
    sglang = convert(_row(engine="sglang", engine_version="0.5.1.post1"))[0]
    assert sglang.max_num_batched_tokens == 16384  # SGLang: prefill batches of max_prefill_tokens (read from the data)
    assert "prefill batches of up to 16384 tokens (SGLang's max_prefill_tokens default" in sglang.notes
    fp4 = convert(_row(engine="vllm", model="nvidia/DeepSeek-R1-FP4", precision="nvfp4", gpu="b200_sxm", tp="8"))[0]
    assert (fp4.model, fp4.precision, fp4.kv_precision) == ("deepseek-r1", "nvfp4", "fp8")  # ModelOpt's FP8 KV
    assert "8-bit (TensorRT Model Optimizer's" in fp4.notes and "8-bit (read from the data)" in ttft.notes


def test_expert_parallelism_comes_from_the_id_or_an_ep_column_and_release_formats_from_the_model() -> None:
    moe = convert(_row(id="r_c32_tp8_ep8_1", model="Qwen/Qwen3-235B-A22B-FP8", tp="8"))[0]
    assert (moe.model, moe.tp, moe.ep) == ("qwen3-235b-a22b", 8, 8)
    assert convert(_row(id="r_c32_tp8_epnone_1", ep="4", model="Qwen/Qwen3-235B-A22B-FP8", tp="8"))[0].ep == 4
    wide = convert(_row(id="r_c256_tp1_ep8_1", model="deepseek-ai/DeepSeek-R1", tp="1", engine="sglang"))[0]
    assert (wide.tp, wide.ep, wide.attention_dp) == (1, 8, 8)  # experts over 8 GPUs, one attention copy each
    assert convert(_row(id="r_c256_tp2_ep8_dp2_1", model="deepseek-ai/DeepSeek-R1", tp="2"))[0].attention_dp == 2
    oss = convert(_row(model="openai/gpt-oss-120b", precision="mxfp4", engine="vllm", gpu="h200_sxm"))[0]
    assert (oss.precision, oss.gpu) == ("mxfp4-moe", "h200")
    # a bare fp4 row of a model released in FP4 runs that release; of a 16/8-bit release, an NVFP4 quantisation
    assert (
        convert(_row(model="openai/gpt-oss-120b", precision="fp4", engine="trtllm", gpu="h200_sxm"))[0].precision
        == "mxfp4-moe"
    )
    assert (
        convert(_row(model="deepseek-ai/DeepSeek-R1", precision="fp4", tp="8", gpu="b200_sxm"))[0].precision == "nvfp4"
    )


def test_the_committed_records_are_the_shared_rows_read_this_way() -> None:
    """scripts/import_closed_loop.py wrote data/measurements/closed_loop/ from the shared file with this module:
    reading the shared file directly gives the same records."""
    if not SHARED.is_file():
        pytest.skip("../shared/reference/closed_loop_h100.csv not beside the checkout")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        direct = read_records(SHARED)
    assert any("left out 7 rows" in str(w.message) for w in caught)
    assert [r.to_row() for r in direct] == [r.to_row() for r in load_records([COMMITTED])]


def _write(path: Path, rows: list[list[str]], header: str = HEADER) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header.split(","))
        writer.writerows(rows)
    return path


WHEEL_HEADER = (
    "id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,batch_size,"
    "tp_size,attention_dp_size,moe_ep_size,silicon_ttft_ms,silicon_tpot_ms"
)


def test_the_wheels_own_silicon_sample_layout_is_read_too(tmp_path: Path, capsys) -> None:
    """aiconfigurator-core's systems/silicon_sample.csv as shipped: its aggregated rows with a recorded
    concurrency are validated; disaggregated rows and rows without a concurrency are left out, saying so."""
    path = _write(
        tmp_path / "silicon_sample.csv",
        [
            [
                "a",
                "db; silicon_concurrency=16",
                "trtllm",
                "1.0.0rc3",
                "Qwen/Qwen3-32B",
                "h200_sxm",
                "fp8",
                "agg",
                "1024",
                "128",
                "16",
                "2",
                "",
                "1",
                "300.0",
                "15.0",
            ],
            [
                "b",
                "db; silicon_concurrency=8",
                "vllm",
                "0.12.0",
                "meta-llama/Llama-3.1-8B-Instruct",
                "h100_sxm",
                "",
                "agg",
                "1024",
                "256",
                "8",
                "1",
                "",
                "",
                "60.0",
                "7.0",
            ],
            [
                "c",
                "db; config_id=1",
                "vllm",
                "0.12.0",
                "Qwen/Qwen3-32B",
                "h100_sxm",
                "",
                "agg",
                "1024",
                "256",
                "8",
                "1",
                "",
                "",
                "60.0",
                "7.0",
            ],
            [
                "d",
                "db; silicon_concurrency=8",
                "sglang",
                "0.5.9",
                "Qwen/Qwen3-32B",
                "h100_sxm",
                "",
                "disagg",
                "1024",
                "256",
                "8",
                "1",
                "",
                "",
                "61.0",
                "7.0",
            ],
        ],
        header=WHEEL_HEADER,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = read_records(path)
    assert any(
        "left out 2 disaggregated rows" in str(w.message) and "without a recorded concurrency" in str(w.message)
        for w in caught
    )
    assert [(r.kind, r.model, r.gpu, r.precision, r.tp, r.concurrency) for r in records] == [
        ("serving_ttft", "qwen3-32b", "h200", "fp8", 2, 16),
        ("serving_tpot", "qwen3-32b", "h200", "fp8", 2, 16),
        ("serving_ttft", "llama-3.1-8b", "h100-sxm", "bf16", 1, 8),
        ("serving_tpot", "llama-3.1-8b", "h100-sxm", "bf16", 1, 8),
    ]
    out = run_json(capsys, "validate", "--data", str(path))
    assert out["summary"]["closed-loop ttft (mean)"]["points"] == 2
    bad = _write(
        tmp_path / "bad.csv",
        [
            [
                "e",
                "silicon_concurrency=8",
                "vllm",
                "0.12.0",
                "Qwen/Qwen3-32B",
                "h100_sxm",
                "",
                "agg",
                "1024",
                "256",
                "8",
                "two",
                "",
                "",
                "60.0",
                "7.0",
            ]
        ],
        header=WHEEL_HEADER,
    )
    code, _, err = run(capsys, "validate", "--data", str(bad))
    assert code == 2 and "bad.csv:2: not a number" in err and "Traceback" not in err


def test_validate_reads_the_format_and_reports_errors_with_bands(tmp_path: Path, capsys) -> None:
    path = _write(
        tmp_path / "heldout.csv",
        [
            [
                "a_c16_tp2_epnone_1",
                "trtllm",
                "1.0.0rc3",
                "Qwen/Qwen3-32B-FP8",
                "h200_sxm",
                "fp8",
                "2",
                "1024",
                "128",
                "16",
                "300.0",
                "15.0",
            ],
            [
                "b_c8_tp1_epnone_1",
                "vllm",
                "0.12.0",
                "meta-llama/Llama-3.1-8B-Instruct",
                "h100_sxm",
                "bf16",
                "1",
                "1024",
                "256",
                "8",
                "60.0",
                "7.0",
            ],
            [
                "c_c64_tp1_ep8_1",
                "sglang",
                "0.5.1.post1",
                "deepseek-ai/DeepSeek-R1",
                "h200_sxm",
                "fp8",
                "1",
                "1024",
                "256",
                "64",
                "500.0",
                "40.0",
            ],
        ],
    )
    out = run_json(capsys, "validate", "--data", str(path), "--points")
    assert {(p["gpu"], p["model"]) for p in out["points"]} == {
        ("h200", "qwen3-32b"),
        ("h100-sxm", "llama-3.1-8b"),
        ("h200", "deepseek-r1"),
    }
    for point in out["points"]:
        assert point["predicted"] > 0 and point["band_p90"] > 0
        assert point["error"] == pytest.approx(point["predicted"] / point["measured"] - 1)
    ttft = out["summary"]["closed-loop ttft (mean)"]
    assert ttft["points"] == 3 and ttft["banded_points"] == 3 and 0 <= ttft["within_p90_band"] <= 1
    grouped = run_json(capsys, "validate", "--data", str(path), "--by", "engine,load")["groups"]
    assert {(g["group"]["engine"], g["group"]["load"], g["metric"]) for g in grouped} == {
        (engine, load, f"closed-loop {m} (mean)")
        for engine, load in (("trtllm", "light"), ("vllm", "light"), ("sglang", "medium"))
        for m in ("ttft", "tpot")
    }
    assert all(g["points"] == 1 for g in grouped)
    parallel = run_json(capsys, "validate", "--data", str(path), "--points", "--workers", "2")
    assert parallel["points"] == out["points"] and parallel["summary"] == out["summary"]  # same answers, same order
    code, _, err = run(capsys, "validate", "--data", str(path), "--by", "engine,colour")
    assert code == 2 and "by: cannot group by colour" in err and "allowed: engine, model" in err


def test_rows_the_catalogs_cannot_place_or_predict_are_listed_and_the_rest_validated(tmp_path: Path, capsys) -> None:
    """A published table spans GPUs and layouts infercast refuses: those rows are named with the reason, the
    others still validate; a file of nothing else is an error naming the first reason."""
    ok = [
        "a_c8_tp1_epnone_1",
        "vllm",
        "0.12.0",
        "meta-llama/Llama-3.1-8B-Instruct",
        "h100_sxm",
        "bf16",
        "1",
        "1024",
        "256",
        "8",
        "60.0",
        "7.0",
    ]
    unknown_gpu = [
        "b_c16_tp2_epnone_1",
        "trtllm",
        "1.0",
        "Qwen/Qwen3-32B",
        "tpu_v5",
        "bf16",
        "2",
        "1024",
        "128",
        "16",
        "3",
        "1",
    ]
    too_big = [
        "c_c16_tp1_epnone_1",
        "vllm",
        "0.12.0",
        "meta-llama/Llama-3.1-405B-Instruct",
        "h100_sxm",
        "bf16",
        "1",
        "1024",
        "128",
        "16",
        "900",
        "40",
    ]
    mixed = _write(tmp_path / "mixed.csv", [ok, unknown_gpu, too_big])
    code, stdout, err = run(capsys, "validate", "--data", str(mixed), "--json")
    assert code == 0 and "left out 1 rows the catalogs cannot place" in err and f"{mixed}:3" in err and "tpu_v5" in err
    out = json.loads(stdout)
    assert out["summary"]["all"]["points"] == 2
    assert {u["where"] for u in out["unpredicted"]} == {f"{mixed}:4"}
    assert all("does not fit" in u["reason"] for u in out["unpredicted"])
    only_unknown = _write(tmp_path / "unknown.csv", [unknown_gpu])
    code, _, err = run(capsys, "validate", "--data", str(only_unknown))
    assert code == 2 and f"{only_unknown}:2" in err and "tpu_v5" in err
    only_too_big = _write(tmp_path / "big.csv", [too_big])
    code, _, err = run(capsys, "validate", "--data", str(only_too_big))
    assert code == 2 and "no point could be predicted" in err and "does not fit" in err


def test_bad_closed_loop_rows_are_refused_naming_file_row_and_field(tmp_path: Path, capsys) -> None:
    missing = _write(
        tmp_path / "missing.csv",
        [
            [
                "a_c16_tp2_epnone_1",
                "trtllm",
                "1.0",
                "Qwen/Qwen3-32B",
                "h100-sxm",
                "bf16",
                "2",
                "1024",
                "128",
                "16",
                "",
                "1",
            ],
        ],
    )
    code, _, err = run(capsys, "validate", "--data", str(missing))
    assert code == 2 and f"{missing}:2" in err and "ttft_ms_mean" in err
    only_unrecorded = _write(
        tmp_path / "nocount.csv",
        [
            [
                "a_c_tp2_epnone_1",
                "trtllm",
                "1.0",
                "Qwen/Qwen3-32B",
                "h100-sxm",
                "bf16",
                "2",
                "1024",
                "128",
                "16",
                "3",
                "1",
            ],
        ],
    )
    code, _, err = run(capsys, "validate", "--data", str(only_unrecorded))
    assert code == 2 and "with a recorded concurrency" in err


def test_a_vllm_release_from_0_14_on_reads_as_the_async_scheduling_preset() -> None:
    from infercast.records.silicon_rows import release_preset

    assert [release_preset("vllm", v) for v in ("0.12.0", "0.11.2", "", "garbage")] == ["vllm"] * 4
    assert [release_preset("vllm", v) for v in ("0.14.0", "0.19.0", "v0.15.1", "1.0", "nightly-5b8c30d")] == [
        "vllm-0.14"
    ] * 5
    assert release_preset("sglang", "0.5.9") == "sglang"
    assert [release_preset("trtllm", v) for v in ("1.0.0rc3", "", "1.1.0rc2.post2", "1.3.0rc5", "gpt-oss-dev")] == [
        "trtllm",
        "trtllm",
        "trtllm-1.1",
        "trtllm-1.1",
        "trtllm",
    ]


def test_a_sglang_run_set_faster_than_any_lockstep_wave_is_read_with_drifting_clients() -> None:
    # Qwen3-32B bf16 on 2 H100s: one 1024-token prompt is >= 2 x 31.2e9 x 1024 / (2 x 989e12) = 32 ms of linear
    # layers (no embedding, no LM head), so 16 clients sent together average >= 8.5 prompts' worth, 0.27 s
    fast = _row(engine="sglang", engine_version="0.5.6", precision="bf16", ttft_ms_mean="150.0")
    slow = _row(engine="sglang", engine_version="0.5.6", precision="bf16", ttft_ms_mean="900.0", id="x_c16_2")
    assert lockstep_ttft_bound(fast) == pytest.approx(0.274, rel=0.01)
    assert drifting_runs([fast, slow]) == [True, True]  # one set: its client held no lockstep
    assert drifting_runs([slow]) == [False]
    # engines that mix prompts into the decode steps keep fixed lengths; dated sweeps already vary theirs
    assert drifting_runs([{**fast, "engine": "vllm"}, {**fast, "min_len_ratio": "0.8"}]) == [False, False]
    records, _, _ = convert_rows([("a", fast), ("b", slow)])
    assert {r.min_len_ratio for r in records} == {0.8}
    assert all("clients drifting apart" in r.notes for r in records)
    # a malformed row is refused by its conversion, naming it, not by the screen
    with pytest.raises(InfercastError, match="b: not a number"):
        convert_rows([("a", fast), ("b", {**slow, "min_len_ratio": "x"})])
