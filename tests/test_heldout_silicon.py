"""benchmarks/heldout_silicon.py's reading of aiconfigurator's raw silicon rows: which rows are held out and how
each becomes a closed-loop row that ``validate`` reads."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

from infercast.records.silicon_rows import convert

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "heldout_silicon.py"
RAW = (
    "id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,batch_size,tp_size,"
    "attention_dp_size,moe_ep_size,silicon_ttft_ms,silicon_tpot_ms"
)


def _script():
    spec = importlib.util.spec_from_file_location("heldout_silicon", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_aggregated_rows_with_a_concurrency_outside_the_calibration_are_held_out(tmp_path: Path) -> None:
    raw = tmp_path / "silicon_sample.csv"
    raw.write_text(
        "\n".join(
            [
                RAW,
                "a,db; silicon_concurrency=64; x=1,vllm,0.19.0,openai/gpt-oss-120b,h200_sxm,fp4,agg,1024,128,64,2,,,300,12",  # noqa: E501
                "b,db; silicon_concurrency=8,trtllm,1.0.0rc3,Qwen/Qwen3-32B,h100_sxm,,agg,1024,128,8,1,,1,250,18",
                "c,db; config_id=3,sglang,0.5.9,deepseek-ai/DeepSeek-R1,b200_sxm,fp8,agg,1024,128,8,8,,8,100,10",
                "d,db; silicon_concurrency=16,sglang,0.5.9,deepseek-ai/DeepSeek-R1,b200_sxm,fp8,disagg,1024,128,8,8,,8,1,1",  # noqa: E501
                "e,db; silicon_concurrency=32,sglang,0.5.9,deepseek-ai/DeepSeek-R1,b200_sxm,fp8,agg,2048,256,32,1,8,8,90,9",  # noqa: E501
                "f,dump; silicon_concurrency=64; x=2,vllm,0.19.0,openai/gpt-oss-120b,h200_sxm,fp4,agg,1024,128,64,2,,,300,12",  # noqa: E501
            ]
        )
        + "\n"
    )
    rows = _script().held_out_rows(raw, calibration_ids={"b"})
    # b calibrates, c has no concurrency, d is disaggregated, f repeats a's measurement from another source file
    assert [r["id"] for r in rows] == ["a", "e"]
    oss, wide = rows
    assert (oss["concurrency"], oss["tp"], oss["ep"], oss["attention_dp"]) == ("64", "2", "1", "1")
    assert (wide["tp"], wide["ep"], wide["attention_dp"]) == ("1", "8", "8")
    ttft, tpot = convert(oss)
    assert (ttft.model, ttft.gpu, ttft.precision, ttft.concurrency) == ("gpt-oss-120b", "h200", "mxfp4-moe", 64)
    assert (ttft.value, tpot.value) == (300.0, 12.0)
    assert convert(wide)[0].attention_dp == 8


def test_a_blank_precision_is_the_16_bit_checkpoint(tmp_path: Path) -> None:
    raw = tmp_path / "silicon_sample.csv"
    with raw.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(RAW.split(","))
        writer.writerow(
            [
                "q",
                "silicon_concurrency=16",
                "sglang",
                "0.5.1",
                "Qwen/Qwen3-32B",
                "h200_sxm",
                "",
                "agg",
                "1024",
                "128",
                "16",
                "2",
                "",
                "",
                "800",
                "15",
            ]
        )
    (row,) = _script().held_out_rows(raw, calibration_ids=set())
    assert row["precision"] == "bf16" and convert(row)[0].precision == "bf16"


def _point(model: str, engine: str, clients: int, error: float, kind: str = "serving_ttft", cliff: str | None = None):
    from infercast.calibrate.validation import Comparison
    from infercast.records.record import Record

    record = Record(
        kind=kind, model=model, gpu="h200", engine=engine, concurrency=clients, statistic="mean", value=100.0, unit="ms"
    )
    return Comparison(record, predicted=0.1 * (1 + error), measured=0.1, cliff=cliff)


def test_bands_are_the_error_quantiles_by_engine_and_load() -> None:
    points = [_point("m", "vllm", 8, e) for e in (0.1, -0.2, 0.3, 0.4)] + [_point("m", "sglang", 128, 2.0)]
    rows = {(r["metric"], r.get("engine"), r.get("load")): r for r in _script().band_rows(points)}
    assert rows[("ttft", "vllm", "light")]["typical"] == 0.25  # median |error|
    assert rows[("ttft", "vllm", "light")]["points"] == 4
    assert rows[("ttft", "sglang", "heavy")]["typical"] == 2.0
    assert rows[("ttft", None, None)]["points"] == 5 and ("tpot", None, None) not in rows


def test_a_band_checked_with_the_model_left_out_is_built_without_it() -> None:
    script = _script()
    calm = [_point(f"m{i}", "vllm", 8, 0.01 * (i % 5)) for i in range(30)]  # 30 models, small errors
    wild = [_point("wild", "vllm", 8, 3.0) for _ in range(10)]  # one model far off
    in_sample = {c.record.model: c for c in script.with_bands(calm + wild)}
    left_out = {c.record.model: c for c in script.with_bands(calm + wild, "model")}
    assert in_sample["wild"].within_band  # its own errors widen the in-sample band to cover it
    assert not left_out["wild"].within_band  # the other models' band cannot
    assert left_out["wild"].band.p90 < 0.1
    cover = script.coverage(calm + wild)["ttft"]
    assert cover["model_left_out"] < cover["in_sample"]


def test_the_committed_held_out_bands_cover_about_nine_in_ten_points_they_were_not_built_from() -> None:
    from infercast.analysis.error_bands import HELDOUT_DIMENSIONS, MIN_POINTS, heldout_table

    table = heldout_table()
    for metric in ("ttft", "tpot"):
        shares = table["coverage"][metric]
        assert 0.8 <= shares["model_left_out"] <= 0.95 and 0.8 <= shares["gpu_left_out"] <= 0.95
        rows = [r for r in table["bands"] if r["metric"] == metric]
        assert all(0 < r["typical"] <= r["p90"] for r in rows)
        finest = [r for r in rows if all(d in r for d in HELDOUT_DIMENSIONS) and r["points"] >= MIN_POINTS]
        assert {r["engine"] for r in finest} >= {"sglang", "trtllm", "vllm", "vllm-0.14"}
        assert {r["load"] for r in finest} == {"light", "medium", "heavy"}


def test_cliff_bands_are_the_cliff_points_ttft_errors_by_cause_pooled_when_a_cause_is_thin() -> None:
    script = _script()
    kv = [_point(f"m{i % 4}", "vllm", 64, 0.1 * (i + 1), cliff="kv") for i in range(20)]
    slots = [_point("m0", "vllm", 64, -3.0, cliff="slots") for _ in range(5)]
    calm = [_point("m0", "vllm", 64, 0.01)] * 50 + [_point("m0", "vllm", 64, 9.0, kind="serving_tpot", cliff="kv")]
    bands = script.cliff_bands(kv + slots + calm)
    assert bands["kv"] == {"typical": 1.05, "p90": 1.81, "points": 20} and "pooled" not in bands["kv"]
    assert bands["slots"]["points"] == 25 and "only 5 slots cliff points" in bands["slots"]["pooled"]
    assert script.cliff_bands(slots + calm) == {}  # 5 cliff points: no band at all


def test_cliff_band_coverage_leaves_the_points_model_out() -> None:
    script = _script()
    calm = [_point(f"m{i}", "vllm", 64, 0.01 * (i % 5), cliff="kv") for i in range(30)]
    wild = [_point("wild", "vllm", 64, 3.0, cliff="kv") for _ in range(5)]  # one model far off
    cover = script.cliff_coverage(calm + wild)
    assert cover["kv"]["points"] == cover["all"]["points"] == 35 and "slots" not in cover
    assert cover["kv"]["model_left_out"] == round(30 / 35, 3)  # the other models' band misses the wild points
    assert cover["kv"]["in_sample"] == 1.0  # their own errors stretch the in-sample p90 over them


def test_the_committed_cliff_bands_cover_the_cliff_points_left_out() -> None:
    from infercast.analysis.error_bands import heldout_table

    cliff = heldout_table()["cliff"]
    assert set(cliff["bands"]) == {"kv", "slots"}
    for cause, band in cliff["bands"].items():
        assert 0 < band["typical"] <= band["p90"] and band["points"] >= 20
        assert "pooled" in band or cliff["coverage"][cause]["points"] == band["points"]
    assert 0.8 <= cliff["coverage"]["all"]["model_left_out"] <= 0.95
