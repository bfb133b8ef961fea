"""Benchmark result files (vllm bench serve, GuideLLM, AIPerf) as serving records for validate/calibrate."""

from __future__ import annotations

import json
import math

import pytest

from infercast.calibrate.predict import predict_record
from infercast.errors import InfercastError
from infercast.records.bench_results import (
    RunFacts,
    catalog_model_for,
    load_bench_records,
    read_bench_file,
    records_from_runs,
    to_vllm_result,
)
from infercast.sim.api import simulate
from tests.cli_helpers import run, run_json
from tests.conftest import FIXTURES

BENCH = FIXTURES / "bench"
VLLM = BENCH / "vllm_bench_serve_llama-3.1-8b_c8.json"
GUIDELLM = BENCH / "guidellm_benchmarks.json"
AIPERF_JSON = BENCH / "aiperf_profile_export_aiperf.json"
AIPERF_CSV = BENCH / "aiperf_profile_export_aiperf.csv"
H100 = RunFacts(gpu="h100-sxm", tp=1)


def _by_kind(records):
    return {r.kind: r for r in records}


def test_vllm_result_maps_to_serving_records():
    (run_,) = read_bench_file(VLLM)
    assert (run_.tool, run_.model, run_.num_requests, run_.concurrency, run_.request_rate) == (
        "vllm",
        "meta-llama/Llama-3.1-8B-Instruct",
        80,
        8,
        0.0,
    )
    assert run_.input_len == 1024 and run_.output_len == 128 and run_.engine == "vllm"
    recs = _by_kind(records_from_runs([run_], H100))
    assert recs["serving_ttft"].value_si == pytest.approx(0.0482)  # mean TTFT
    assert recs["serving_tpot"].value_si == pytest.approx(0.00855)  # median TPOT
    assert recs["serving_throughput"].value_si == pytest.approx(860.5)
    r = recs["serving_ttft"]
    assert (r.model, r.gpu, r.tp, r.engine, r.num_prompts, r.input_len, r.output_len, r.concurrency) == (
        "llama-3.1-8b",
        "h100-sxm",
        1,
        "vllm",
        80,
        1024,
        128,
        8,
    )


def test_vllm_appended_results_and_open_loop(tmp_path):
    doc = json.loads(VLLM.read_text())
    lines = []
    for rate, burst in ((2.0, 1.0), (4.0, 0.5)):
        lines.append(json.dumps(doc | {"request_rate": rate, "burstiness": burst, "max_concurrency": None}))
    path = tmp_path / "appended.json"
    path.write_text("\n".join(lines) + "\n")  # --append-result: one JSON object per line
    runs = read_bench_file(path)
    assert [(r.request_rate, r.arrival, r.burstiness, r.concurrency) for r in runs] == [
        (2.0, "poisson", 1.0, 0),
        (4.0, "gamma", 0.5, 0),
    ]


def test_guidellm_itl_is_vllm_tpot_and_strategies_map_to_load():
    runs = read_bench_file(GUIDELLM)
    assert [(r.concurrency, r.request_rate, r.arrival) for r in runs] == [
        (1, 0.0, ""),
        (16, 0.0, ""),
        (0, 4.0, "poisson"),
    ]
    sync = runs[0]
    # median of inter_token_latency_ms (GuideLLM's "ITL" = vLLM's TPOT), not time_per_output_token_ms
    assert sync.tpot_median_s == pytest.approx(6.9 * 0.99 / 1e3)
    assert sync.ttft_mean_s == pytest.approx(0.021)
    assert sync.output_throughput_tok_s == pytest.approx(20 * 256 / 36.2)  # output tokens over the duration
    assert (sync.num_requests, sync.input_len, sync.output_len) == (20, 512.0, 256.0)
    recs = records_from_runs(runs, RunFacts(gpu="h100-sxm", tp=1, engine="vllm"))
    assert len(recs) == 9 and {r.model for r in recs} == {"llama-3.1-8b"}


def test_aiperf_json_and_csv_agree():
    (j,) = read_bench_file(AIPERF_JSON)
    (c,) = read_bench_file(AIPERF_CSV)
    for name in ("num_requests", "input_len", "output_len", "ttft_mean_s", "tpot_median_s", "output_throughput_tok_s"):
        assert getattr(j, name) == pytest.approx(getattr(c, name)), name
    assert j.tpot_median_s == pytest.approx(8.58e-3)  # inter_token_latency p50: (latency - TTFT)/(OSL - 1)
    assert j.concurrency == 16 and j.load_known and not c.load_known
    facts = RunFacts(model="llama-3.1-8b", gpu="h100-sxm", tp=1, engine="vllm", concurrency=16)
    assert _by_kind(records_from_runs([c], facts))["serving_ttft"].concurrency == 16


@pytest.mark.parametrize(
    "facts,field,words",
    [
        (RunFacts(tp=1), "gpu", "does not say which GPU"),
        (RunFacts(gpu="h100-sxm"), "tp", "tensor parallelism"),
        (RunFacts(gpu="h100-sxm", tp=1, model="no-such-model"), "model", "no-such-model"),
        (RunFacts(gpu="no-such-gpu", tp=1), "gpu", "no-such-gpu"),
    ],
)
def test_missing_facts_are_one_line_errors(facts, field, words):
    with pytest.raises(InfercastError, match=words) as info:
        records_from_runs(read_bench_file(VLLM), facts)
    assert info.value.field == field and "\n" not in str(info.value)


def test_engine_and_load_must_be_given_when_the_file_lacks_them():
    with pytest.raises(InfercastError, match="--engine"):
        records_from_runs(read_bench_file(GUIDELLM), H100)
    csv_run = read_bench_file(AIPERF_CSV)
    with pytest.raises(InfercastError, match="--concurrency N or --request-rate R"):
        records_from_runs(csv_run, RunFacts(model="llama-3.1-8b", gpu="h100-sxm", tp=1, engine="vllm"))
    with pytest.raises(InfercastError, match="names no model"):
        records_from_runs(csv_run, RunFacts(gpu="h100-sxm", tp=1, engine="vllm", concurrency=4))


@pytest.mark.parametrize(
    "text,words",
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"hello": 1}', "is not a result file infercast reads"),
        ('{"backend": "vllm", "num_prompts": 10, "completed": 10}', "'total_input_tokens' is missing"),
    ],
)
def test_bad_files_are_one_line_errors(tmp_path, text, words):
    path = tmp_path / "result.json"
    path.write_text(text)
    with pytest.raises(InfercastError, match=words) as info:
        read_bench_file(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_unsimulable_loads_and_bad_values_are_refused(tmp_path):
    doc = json.loads(VLLM.read_text())
    for change, words in (
        ({"request_rate": 4.0}, "both --request-rate and --max-concurrency"),
        ({"mean_ttft_ms": -3.0}, "'mean_ttft_ms' must be > 0"),
        ({"max_concurrency": 0}, "whole number >= 1"),
        ({"ramp_up_strategy": "linear"}, "ramp-up"),
    ):
        path = tmp_path / "r.json"
        path.write_text(json.dumps(doc | change))
        with pytest.raises(InfercastError, match=words):
            read_bench_file(path)
    bad_csv = tmp_path / "x.csv"
    bad_csv.write_text("Metric,avg\nTime to First Token (ms),5\n")
    with pytest.raises(InfercastError, match=r"not an AIPerf profile_export_aiperf\.csv"):
        read_bench_file(bad_csv)
    with pytest.raises(InfercastError, match="unknown benchmark format"):
        read_bench_file(VLLM, fmt="locust")


def test_catalog_model_names():
    assert catalog_model_for("meta-llama/Llama-3.1-8B-Instruct") == "llama-3.1-8b"
    assert catalog_model_for("/models/Qwen3-8B") == "qwen3-8b"
    assert catalog_model_for("deepseek-v3") == "deepseek-v3"
    assert catalog_model_for("someone/unknown-7b") is None


def test_simulated_run_round_trips_through_vllm_format(tmp_path):
    res = simulate("llama-3.1-8b", "h100-sxm", input_len=512, output_len=64, num_requests=24, concurrency=4)
    doc = to_vllm_result(res, model_id="meta-llama/Llama-3.1-8B", max_concurrency=4)
    path = tmp_path / "sim.json"
    path.write_text(json.dumps(doc))
    recs = _by_kind(load_bench_records([path], H100))
    assert recs["serving_ttft"].value_si == pytest.approx(res["ttft_s"]["mean"], rel=1e-12)
    assert recs["serving_tpot"].value_si == pytest.approx(res["tpot_s"]["p50"], rel=1e-12)
    assert recs["serving_throughput"].value_si == pytest.approx(res["output_throughput_tok_s"], rel=1e-12)
    r = recs["serving_ttft"]
    assert (r.num_prompts, r.input_len, r.output_len, r.concurrency, r.request_rate) == (24, 512, 64, 4, 0.0)
    assert (r.statistic, recs["serving_tpot"].statistic, recs["serving_throughput"].statistic) == ("mean", "median", "")
    # the predictor simulates the same run, so validating the export against the simulator is exact
    for rec in recs.values():
        assert predict_record(rec) == pytest.approx(rec.value_si, rel=1e-9)
    assert doc["request_rate"] == "inf" and not math.isnan(doc["p99_itl_ms"])


def test_validate_cli_reads_bench_files(capsys):
    out = run_json(capsys, "validate", "--bench", str(VLLM), "--gpu", "h100-sxm", "--tp", "1", "--points")
    assert set(out["summary"]) == {"closed-loop ttft (mean)", "closed-loop tpot (median)", "serving_throughput", "all"}
    assert {p["source"] for p in out["points"]} == {f"vllm result {VLLM}"}
    code, _, err = run(capsys, "validate", "--bench", str(VLLM), "--tp", "1")
    assert code == 2 and "gpu" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "validate")
    assert code == 2 and "--data" in err and "--bench" in err


def test_calibrate_dry_run_accepts_bench_files(capsys):
    out = run_json(
        capsys,
        "calibrate",
        "--bench",
        str(AIPERF_JSON),
        "--gpu",
        "h100-sxm",
        "--tp",
        "1",
        "--engine",
        "vllm",
        "--no-project-data",
        "--dry-run",
        "--allow-few-points",
    )
    assert out["points_of_written_gpus"] == 3 and out["written"] == []


def test_vllm_result_facts_from_metadata_and_one_token_runs(tmp_path):
    """The file's own engine entry beats the client's backend (the request format it spoke); ``ep`` comes from the
    metadata; a 1-token-output run (median TPOT 0) gives TTFT and throughput records, no TPOT; a fractional
    request count is a one-line error."""
    doc = json.loads(VLLM.read_text())
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc | {"engine": "sglang", "ep": "2"}))
    recs = _by_kind(records_from_runs(read_bench_file(path), H100))
    assert (recs["serving_ttft"].engine, recs["serving_ttft"].ep) == ("sglang", 2)
    one = doc | {"median_tpot_ms": 0.0, "total_output_tokens": doc["completed"]}
    path.write_text(json.dumps(one))
    assert set(_by_kind(records_from_runs(read_bench_file(path), H100))) == {"serving_ttft", "serving_throughput"}
    path.write_text(json.dumps(doc | {"completed": 0.5}))
    with pytest.raises(InfercastError, match="completed"):
        read_bench_file(path)


def test_aiperf_loadgen_that_is_not_an_object_is_a_one_line_error(tmp_path):
    doc = json.loads(AIPERF_JSON.read_text())
    doc["input_config"] = {"loadgen": [1]}
    path = tmp_path / "a.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InfercastError, match="loadgen"):
        read_bench_file(path)


def test_validate_reads_the_benchmarks_launch_and_prints_its_settings(capsys):
    """--launch gives validate the run's engine settings (and the TP a result file does not record); the settings
    used are printed, and in JSON."""
    plain = run_json(capsys, "validate", "--bench", str(VLLM), "--gpu", "h100-sxm", "--tp", "1", "--points")
    line = "vllm serve meta-llama/Llama-3.1-8B --max-num-seqs 4 --gpu-memory-utilization 0.85"
    out = run_json(capsys, "validate", "--bench", str(VLLM), "--gpu", "h100-sxm", "--launch", line, "--points")
    ((settings,),) = [out["engine_settings"]]
    assert settings["max_num_seqs"]["value"] == 4 and settings["memory_fraction"]["value"] == "0.85 of total"
    assert settings["max_num_seqs"]["source"].startswith("user launch")

    def ttft(doc):
        return next(p["predicted"] for p in doc["points"] if p["kind"] == "serving_ttft")

    assert ttft(out) > 2 * ttft(plain)  # 8 clients queue for 4 slots


def test_validate_launch_carries_the_step_policy_into_the_records(capsys):
    line = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --enable-mixed-chunk"
    out = run_json(
        capsys, "validate", "--bench", str(VLLM), "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--launch", line
    )
    assert out["engine_settings"][0]["scheduler"]["value"] == "chunked"  # SGLang's own default is prefill-first


def test_validate_launch_fills_expert_and_attention_data_parallelism():
    """A launch's EP and attention DP fill a record that states neither (1); a record's own layout wins."""
    from infercast.cli.launch_opts import launched_records
    from infercast.records.record import Record
    from infercast.specs.engine_launch import parse_launch

    base = dict(model="deepseek-r1", gpu="h200", engine="vllm", value=1.0, unit="s", concurrency=8)
    bare, stated = Record(kind="serving_ttft", **base), Record(kind="serving_tpot", ep=2, attention_dp=2, **base)
    line = "vllm serve deepseek-ai/DeepSeek-R1 --tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel"
    filled, kept = launched_records([bare, stated], parse_launch(line))
    assert (filled.tp, filled.ep, filled.attention_dp) == (1, 8, 8)
    assert (kept.ep, kept.attention_dp) == (2, 2)
