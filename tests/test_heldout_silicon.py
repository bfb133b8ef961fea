"""benchmarks/heldout_silicon.py's reading of aiconfigurator's raw silicon rows: which rows are held out and how
each becomes a closed-loop row that ``validate`` reads."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

from infercast.measure.closed_loop_rows import convert

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "heldout_silicon.py"
RAW = ("id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,batch_size,tp_size,"
       "attention_dp_size,moe_ep_size,silicon_ttft_ms,silicon_tpot_ms")  # fmt: skip


def _script():
    spec = importlib.util.spec_from_file_location("heldout_silicon", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_aggregated_rows_with_a_concurrency_outside_the_calibration_are_held_out(tmp_path: Path) -> None:
    raw = tmp_path / "silicon_sample.csv"
    raw.write_text("\n".join([
        RAW,
        "a,db; silicon_concurrency=64; x=1,vllm,0.19.0,openai/gpt-oss-120b,h200_sxm,fp4,agg,1024,128,64,2,,,300,12",
        "b,db; silicon_concurrency=8,trtllm,1.0.0rc3,Qwen/Qwen3-32B,h100_sxm,,agg,1024,128,8,1,,1,250,18",
        "c,db; config_id=3,sglang,0.5.9,deepseek-ai/DeepSeek-R1,b200_sxm,fp8,agg,1024,128,8,8,,8,100,10",
        "d,db; silicon_concurrency=16,sglang,0.5.9,deepseek-ai/DeepSeek-R1,b200_sxm,fp8,disagg,1024,128,8,8,,8,1,1",
        "e,db; silicon_concurrency=32,sglang,0.5.9,deepseek-ai/DeepSeek-R1,b200_sxm,fp8,agg,2048,256,32,1,8,8,90,9",
    ]) + "\n")  # fmt: skip
    rows = _script().held_out_rows(raw, calibration_ids={"b"})
    assert [r["id"] for r in rows] == ["a", "e"]  # b calibrates, c has no concurrency, d is disaggregated
    oss, wide = rows
    assert (oss["concurrency"], oss["tp"], oss["ep"], oss["attention_dp"]) == ("64", "2", "1", "1")
    assert (wide["tp"], wide["ep"], wide["attention_dp"]) == ("1", "8", "8")
    ttft, tpot = convert(oss)
    assert (ttft.model, ttft.gpu, ttft.precision, ttft.batch) == ("gpt-oss-120b", "h200", "mxfp4-moe", 64)
    assert (ttft.value, tpot.value) == (300.0, 12.0)
    assert convert(wide)[0].attention_dp == 8


def test_a_blank_precision_is_the_16_bit_checkpoint(tmp_path: Path) -> None:
    raw = tmp_path / "silicon_sample.csv"
    with raw.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(RAW.split(","))
        writer.writerow(["q", "silicon_concurrency=16", "sglang", "0.5.1", "Qwen/Qwen3-32B", "h200_sxm", "", "agg",
                         "1024", "128", "16", "2", "", "", "800", "15"])  # fmt: skip
    (row,) = _script().held_out_rows(raw, calibration_ids=set())
    assert row["precision"] == "bf16" and convert(row)[0].precision == "bf16"
