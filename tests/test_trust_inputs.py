"""Issue 37 (items 11, 13): inputs that slipped past the edge. Each gets one line naming the field (exit 2) or a
Python-API InfercastError naming the argument, never an internal error, a hang or an impossible number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infercast.errors import InfercastError
from tests.cli_helpers import run, run_json
from tests.test_reliability import one_line_error

FIXTURES = Path(__file__).parent / "fixtures" / "hf_configs"
SIM = ("simulate", "--input-len", "100", "--output-len", "10", "--num-requests", "5")


# ----- item 11 -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "flag,value",
    [
        ("--prefix-len", "99999999999999999999"),
        ("--prefix-len", "9223372036854775807"),
        ("--num-prefixes", "99999999999999999999"),
    ],
)
def test_huge_prefix_sizes_are_one_line(capsys, flag, value):
    extra = ("--prefix-len", "100") if flag == "--num-prefixes" else ()
    one_line_error(capsys, *SIM, "--rate", "1", *extra, flag, value, field=flag[2:], needle="limit")


@pytest.mark.parametrize(
    "name,key,value",
    [
        ("gpt-oss-20b.json", "sliding_window", "abc"),
        ("gemma-2-9b.json", "sliding_window", [1]),
        ("llama-4-scout.json", "text_config.attention_chunk_size", "x"),
        ("llama-4-scout.json", "text_config.no_rope_layer_interval", 0),
        ("qwen3-8b.json", "max_window_layers", "²"),
    ],
)
def test_config_json_non_numeric_integer_fields_are_one_line(tmp_path, capsys, name, key, value):
    cfg = json.loads((FIXTURES / name).read_text())
    node = cfg
    *parents, leaf = key.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    node.pop("no_rope_layers", None)  # so the interval is read
    if leaf == "max_window_layers":
        cfg["use_sliding_window"], cfg["sliding_window"] = True, 4096
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    one_line_error(capsys, "show-model", str(path), field="model", needle=leaf)


@pytest.mark.parametrize(
    "rate,burstiness,field",
    [("1e-300", "1e-300", "rate"), ("1e300", "1e300", "burstiness"), ("1e-300", "1", "rate"), ("5e-324", "1", "rate")],
)
def test_arrival_rates_a_float_cannot_time_are_one_line(capsys, rate, burstiness, field):
    """A rate whose arrivals fall past ~1e10 s left TTFT and TPOT at 0 (the clock no longer moved); a vanishing
    rate x burstiness divided by zero."""
    one_line_error(capsys, *SIM, "--rate", rate, "--burstiness", burstiness, field=field)


@pytest.mark.parametrize("text", ["1,,2", "1:2:3:4", "1,"])
def test_malformed_int_lists_are_refused(capsys, text):
    one_line_error(capsys, "sweep", "--output-lens", text, field="output_lens")


def test_one_token_outputs_have_no_tpot(capsys):
    pred = run_json(capsys, "predict", "--output-len", "1")
    assert pred["tpot_s"] is None and pred["itl_s"] is None and pred["single_stream_tpot_s"] is None
    rows = run_json(capsys, "sweep", "--output-lens", "1,2", "--batches", "1", "--input-lens", "100")["rows"]
    assert sorted((r["output_len"], r["tpot_s"] is None) for r in rows) == [(1, True), (2, False)]
    cmp = run_json(capsys, "compare", "--output-len", "1", "--gpus", "h100-sxm")
    assert all(r["tpot_s"] is None for r in cmp["rows"])
    code, out, _ = run(capsys, "predict", "--output-len", "1")
    tpot_lines = [line for line in out.splitlines() if "TPOT" in line]
    assert code == 0 and tpot_lines and all("undefined" in line for line in tpot_lines), tpot_lines


@pytest.mark.parametrize("flag", ["--precision", "--kv-precision"])
@pytest.mark.parametrize("command", ["predict", "memory", "crossover"])
def test_empty_precision_is_not_the_default(capsys, command, flag):
    one_line_error(capsys, command, flag, "", field=flag[2:].replace("-", "_"), needle="''")


def test_empty_precision_in_the_api():
    from infercast import predict

    with pytest.raises(InfercastError, match="precision"):
        predict("llama-3.1-8b", "h100-sxm", input_len=10, output_len=10, precision="")


def test_memory_that_does_not_fit_reports_no_negative_bytes(capsys):
    doc = run_json(capsys, "memory", "--model", "llama-3.1-405b", "--gpu", "h100-sxm")
    assert not doc["fits"] and doc["shortfall_bytes"] > 0
    assert all(v >= 0 for k, v in doc.items() if k.endswith("_bytes") and isinstance(v, int | float))


# ----- item 13: the Python API names the argument ------------------------------------------------------------------
PLAN = dict(slo="ttft:p99:2s", rate=1.0, input_len=64, output_len=8, num_requests=20, tps=1, executor="serial")


@pytest.mark.parametrize(
    "change,field",
    [
        (dict(slo=None), "slo"),
        (dict(slo=5), "slo"),
        (dict(gpus=5), "gpus"),
        (dict(tps=1.5), "tps"),
        (dict(precisions=5), "precisions"),
        (dict(disagg=2), "ratios"),
        (dict(prices=5), "prices"),
        (dict(workers="x"), "workers"),
    ],
)
def test_plan_api_wrong_types_name_the_argument(change, field):
    import infercast

    kwargs = {**PLAN, **change}
    gpus = kwargs.pop("gpus", "h100-sxm")
    with pytest.raises(InfercastError) as info:
        infercast.plan("llama-3.1-8b", gpus, verify=False, **kwargs)
    assert info.value.field == field, info.value


def test_plan_api_numeric_text_rate_is_read_as_a_number():
    """``rate='5'`` reached the costing as text, ``seed='5'`` NumPy and ``burstiness='5'`` the sampler (TypeErrors);
    each is validated and converted at the edge."""
    import infercast

    for change in (dict(rate="5"), dict(seed="5"), dict(burstiness="5")):
        result = infercast.plan("llama-3.1-8b", "h100-sxm", verify=False, **{**PLAN, **change})
        assert result.table is not None


@pytest.mark.parametrize("profile", ["x", 5, ["x"]])
def test_predict_api_profile_must_be_a_profile(profile):
    import infercast

    with pytest.raises(InfercastError) as info:
        infercast.predict("llama-3.1-8b", "h100-sxm", input_len=10, output_len=10, profile=profile)
    assert info.value.field == "profile"


# ----- item 13: plan --daily and --rate ------------------------------------------------------------------------------
PLAN_CLI = ("plan", "--input-len", "64", "--output-len", "8", "--slo", "ttft:p99:2s", "--gpus", "h100-sxm")
PLAN_CLI += ("--tps", "1", "--num-requests", "20", "--workers", "1")


@pytest.mark.parametrize(
    "body,needle",
    [
        ("hour,rate_req_s\n0,abc\n1,2\n", "'abc'"),
        ("hour,rate_req_s\n0,²\n1,2\n", "'²'"),
        ("time_s,rate_req_s\n0,1\n1e15,2\n", "within"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,10\n1e300,10,10\n", "within"),
        ("arrived_at\n-5\n1\n", ">= 0"),
    ],
)
def test_plan_daily_csv_hostile_cells_are_one_line(tmp_path, capsys, body, needle):
    path = tmp_path / "daily.csv"
    path.write_text(body)
    one_line_error(capsys, *PLAN_CLI, "--daily", str(path), field="daily", needle=needle)


def test_plan_rate_past_any_fleet_is_one_line(capsys):
    one_line_error(capsys, *PLAN_CLI, "--rate", "1e308", field="rate", needle="10,000 units")


# ----- item 13: hostile measurement files -------------------------------------------------------------------------
BENCH = Path(__file__).parent / "fixtures" / "bench"
BENCH_FACTS = ("--gpu", "h100-sxm", "--tp", "1", "--model", "llama-3.1-8b", "--engine", "vllm", "--concurrency", "8")


def _vllm_doc() -> dict:
    return json.loads((BENCH / "vllm_bench_serve_llama-3.1-8b_c8.json").read_text())


@pytest.mark.parametrize(
    "name,data",
    [
        ("deep.json", b'{"a":' * 100_000 + b"1" + b"}" * 100_000),
        ("guidellm2.json", b'{"benchmarks": 5}'),
        ("meta.json", json.dumps({**_vllm_doc(), "metadata": None, "tp": "\u00b2"}).encode()),
        ("aiperf.csv", b"Metric,avg\nRequest Count," + b"9" * 140_000 + b"\n"),
        (
            "aiperf2.csv",
            (BENCH / "aiperf_profile_export_aiperf.csv")
            .read_bytes()
            .replace(b"Request Count,", b"Request Count,inf,", 1),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_hostile_bench_files_are_one_line(tmp_path, capsys, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    fmt = ("--bench-format", "guidellm") if name == "guidellm2.json" else ()
    facts = BENCH_FACTS[:2] + BENCH_FACTS[4:] if name == "meta.json" else BENCH_FACTS  # tp from the file
    one_line_error(capsys, "validate", "--bench", str(path), *fmt, *facts)


def test_validate_data_with_tp_0_or_a_symlink_loop_is_one_line(tmp_path, capsys):
    rows = (Path(__file__).parent / "fixtures" / "closed_loop_h100_tp8_c8.csv").read_text().splitlines()[:2]
    bad = tmp_path / "tp0.csv"
    bad.write_text(rows[0] + "\n" + rows[1].replace(",8,1024,", ",0,1024,", 1) + "\n")
    one_line_error(capsys, "validate", "--data", str(bad), field="tp")
    loop = tmp_path / "loop.csv"
    loop.symlink_to(loop)
    one_line_error(capsys, "validate", "--data", str(loop), field="data")


@pytest.mark.parametrize(
    "data",
    [b"a: [1, 2", b"\xff\xfe", b"hardware: cpu\npeaks: {}\nprofile: {}\n", b"hardware: cpu\npeaks: 5\nprofile: []\n"],
    ids=["malformed", "non-utf8", "no-peaks", "wrong-types"],
)
def test_validate_sim_hostile_calibration_yaml_is_one_line(tmp_path, capsys, data):
    pytest.importorskip("torch")
    path = tmp_path / "cpu.yaml"
    path.write_bytes(data)
    one_line_error(capsys, "validate-sim", "--layers", "1", "--calibration", str(path), field="calibration")


@pytest.mark.parametrize("flag", ["--rounds", "--repeats"])
def test_calibrate_cpu_huge_rounds_are_refused_up_front(tmp_path, capsys, flag):
    pytest.importorskip("torch")
    one_line_error(capsys, "calibrate-cpu", flag, "99999999", "--out", str(tmp_path / "c.yaml"), field=flag[2:])


@pytest.mark.parametrize("field", ["models", "gpus", "tps", "engines"])
def test_sweep_api_empty_lists_name_the_argument(field):
    """Found by the campaign: an empty list made an empty sweep whose error named no argument."""
    import infercast

    with pytest.raises(InfercastError) as info:
        infercast.sweep(**{field: []})
    assert info.value.field == field


@pytest.mark.parametrize("command", ["calibrate-cpu", "validate-sim", "serve"])
def test_engine_threads_past_a_c_int_are_one_line(tmp_path, capsys, command):
    """Found by the campaign: torch.set_num_threads(99999999999) overflowed (internal error)."""
    pytest.importorskip("torch")
    extra = ("--out", str(tmp_path / "c.yaml")) if command == "calibrate-cpu" else ()
    one_line_error(capsys, command, "--threads", "99999999999", *extra, field="threads", needle="limit")
