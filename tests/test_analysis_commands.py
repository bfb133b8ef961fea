"""compare / select / crossover / roofline: the library functions and their CLI commands.

The physics checks follow the two-phase story: prefill (TTFT) tracks the tensor peak, decode (TPOT)
tracks HBM bandwidth, narrower weights help decode, and the crossover is where the two times meet.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import typer
from matplotlib.image import imread
from typer.testing import CliRunner

from infercast import memory_budget, predict
from infercast.analysis.compare import compare, crossover, unsupported_note
from infercast.analysis.roofline_plot import plot_roofline, roofline_data
from infercast.cli import analysis_cmds
from infercast.cost.profile import load_profile
from infercast.errors import InfercastError
from infercast.plan.screen import ScreenLayout, ScreenQuery
from infercast.plan.select import select
from infercast.specs.catalog import get_hardware, register_hardware
from infercast.specs.precision import get_scheme

MODEL = "llama-3.1-8b"
SCENARIO = {"input_len": 2048, "output_len": 256}


@pytest.fixture(scope="module")
def generations():
    """A100 -> H100 -> H200 for the 8B model in its native bf16 (computed once for several tests)."""
    return compare(MODEL, ["a100-80gb", "h100-sxm", "h200"], **SCENARIO).set_index("gpu")


# --------------------------------------------------------------------------------------------- compare


def test_h200_decodes_faster_than_h100_with_about_the_same_ttft(generations):
    h100, h200 = generations.loc["h100-sxm"], generations.loc["h200"]
    assert h200.tpot_s < h100.tpot_s
    bw_ratio = get_hardware("h200").memory.bandwidth_bytes_s / get_hardware("h100-sxm").memory.bandwidth_bytes_s
    decode_gain = h100.tpot_s / h200.tpot_s
    assert 1.1 < decode_gain <= bw_ratio * 1.02  # more bandwidth helps decode, at most in proportion
    assert h200.ttft_s == pytest.approx(h100.ttft_s, rel=0.15)  # same tensor peak: prefill barely moves
    assert h200.decode_bound == h100.decode_bound == "memory"
    assert h200.prefill_bound == h100.prefill_bound == "compute"
    assert h200.decode_tb_s_per_gpu > h100.decode_tb_s_per_gpu


def test_a100_to_h100_ttft_tracks_compute_and_tpot_tracks_bandwidth(generations):
    h100 = generations.loc["h100-sxm"]
    assert generations.attrs["baseline"] == "a100-80gb bf16"
    assert generations.loc["a100-80gb", "ttft_speedup"] == pytest.approx(1.0)
    compute_ratio, bw_ratio = h100.peak_flops_ratio, h100.bandwidth_ratio
    assert compute_ratio == pytest.approx(989.4 / 312, rel=0.02)
    # TTFT = the engine's per-request overhead (API server, tokenisation: the same on every GPU, fitted on
    # closed-loop serving runs) + prefill; the prefill part is what follows the hardware
    overhead = {
        g: load_profile(get_hardware(g).id, get_hardware(g).architecture, "vllm").request_overhead_s
        for g in ("a100-80gb", "h100-sxm")
    }
    prefill_speedup = (generations.loc["a100-80gb", "ttft_s"] - overhead["a100-80gb"]) / (
        h100.ttft_s - overhead["h100-sxm"]
    )
    assert 0.6 * compute_ratio < prefill_speedup <= 1.05 * compute_ratio
    assert prefill_speedup > bw_ratio  # prefill follows FLOP/s more than bandwidth
    assert abs(h100.tpot_speedup - bw_ratio) < abs(h100.tpot_speedup - compute_ratio)
    assert h100.ttft_speedup == pytest.approx(generations.loc["a100-80gb", "ttft_s"] / h100.ttft_s)


def test_compare_matches_predict_and_reports_phase_details(generations):
    row = generations.loc["h100-sxm"]
    p = predict(MODEL, "h100-sxm", **SCENARIO)
    assert row.ttft_s == pytest.approx(p.ttft_s) and row.tpot_s == pytest.approx(p.tpot_s)
    assert row.prefill_ai > row.ridge_point > row.decode_ai
    assert 0 < row.prefill_flops_util <= 1 and 0 < row.decode_bw_util <= 1
    price = get_hardware("h100-sxm").price_per_hour_usd
    assert row.cost_per_mtok_usd == pytest.approx(price / 3600 / row.output_throughput_tok_s * 1e6)


def test_int4_decodes_faster_than_bf16_on_h100():
    df = compare(MODEL, "h100-sxm", ["bf16", "int4"], **SCENARIO).set_index("precision")
    assert df.loc["int4", "tpot_s"] < 0.8 * df.loc["bf16", "tpot_s"]
    assert df.loc["int4", "weights_bytes"] < 0.5 * df.loc["bf16", "weights_bytes"]
    # W4A16 still multiplies at the 16-bit rate, so prefill gains nothing
    assert df.loc["int4", "ttft_s"] == pytest.approx(df.loc["bf16", "ttft_s"], rel=0.1)


def test_fp8_on_a100_is_a_note_not_a_crash():
    df = compare(MODEL, ["a100-80gb", "h100-sxm"], ["fp8", "bf16"], **SCENARIO)
    a100_fp8 = df[(df.gpu == "a100-80gb") & (df.precision == "fp8")].iloc[0]
    assert "FP8 tensor cores" in a100_fp8.note and math.isnan(a100_fp8.ttft_s)
    assert df.attrs["baseline"] == "a100-80gb bf16"  # ratios start at the first row that has numbers
    h100_fp8 = df[(df.gpu == "h100-sxm") & (df.precision == "fp8")].iloc[0]
    assert h100_fp8.note == "" and h100_fp8.ttft_s > 0 and h100_fp8.peak_flops_ratio > 5


def test_compare_predicts_configurations_that_do_not_fit():
    row = compare("llama-3.1-70b", ["h100-sxm"], **SCENARIO).iloc[0]
    assert not row.fits
    assert row.note.startswith("does not fit: needs") and row.memory_bytes > row.capacity_bytes
    assert row.ttft_s > 0 and row.tpot_s > 0


def test_compare_accepts_comma_strings_and_specs():
    df = compare(MODEL, "h100-sxm, h200", **SCENARIO)
    assert list(df.gpu) == ["h100-sxm", "h200"]
    spec = compare(MODEL, [get_hardware("h200")], **SCENARIO)
    assert spec.loc[0, "tpot_s"] == pytest.approx(df.loc[1, "tpot_s"])


def test_compare_rejects_unknown_names():
    with pytest.raises(InfercastError, match="precision"):
        compare(MODEL, ["h100-sxm"], ["fp9"], **SCENARIO)
    with pytest.raises(InfercastError, match="gpu"):
        compare(MODEL, ["h1000"], **SCENARIO)


# --------------------------------------------------------------------------------------------- select


def test_select_generous_sla_passes_h100_at_tp1_with_the_cheapest_precision():
    gpus, precisions = ["h100-sxm", "a100-80gb"], ["bf16", "int4"]
    best = select(MODEL, gpus, query=ScreenQuery(10.0, 1.0, **SCENARIO), precisions=precisions)
    assert best["passes"].all()
    h100 = best.set_index("gpu").loc["h100-sxm"]
    assert h100.tp == 1 and h100.reason == ""
    every = select(
        MODEL, ["h100-sxm"], query=ScreenQuery(10.0, 1.0, **SCENARIO), precisions=["bf16", "int4"], all_configs=True
    )
    tp1 = every[every.tp == 1]
    assert h100.precision == tp1.loc[tp1.cost_per_mtok_usd.idxmin(), "precision"]
    assert list(best.cost_per_mtok_usd) == sorted(best.cost_per_mtok_usd)  # cheapest first


def test_select_impossible_sla_passes_nothing_and_says_why():
    df = select(MODEL, ["h100-sxm", "a100-80gb", "t4"], query=ScreenQuery(1e-4, 1e-5, **SCENARIO))
    assert not df["passes"].any()
    assert all("TTFT" in r and "> 100 µs" in r for r in df["reason"])
    assert all("TPOT" in r for r in df["reason"])
    assert df.set_index("gpu").loc["t4", "precision"] == "fp16"  # native bf16 model on a chip without bf16


def test_select_reasons_for_memory_and_hardware():
    # Mixtral 8x7B (47B): bf16 needs two 80 GB GPUs, fp8 fits one with room for vLLM 0.12's reserves (a 70B model
    # in fp8 no longer does: its 1024-sequence sampler reserve leaves it 0.6 GB short)
    df = select(
        "mixtral-8x7b",
        ["h100-sxm", "a100-80gb"],
        query=ScreenQuery(10.0, 1.0, **SCENARIO),
        precisions=["bf16", "fp8"],
        tps=[1],
        all_configs=True,
    )
    by = df.set_index(["gpu", "precision"])
    assert by.loc[("h100-sxm", "bf16"), "reason"].startswith("does not fit: needs")
    assert by.loc[("h100-sxm", "fp8"), "passes"]  # fp8 fits one H100 and a loose SLA passes
    assert "FP8 tensor cores" in by.loc[("a100-80gb", "fp8"), "reason"]
    # a stricter TTFT target makes the fitting configuration fail on time only
    query = ScreenQuery(0.05, 1.0, **SCENARIO)
    strict = select("mixtral-8x7b", ["h100-sxm"], query=query, precisions=["fp8"], tps=[1])
    assert strict.loc[0, "reason"].startswith("TTFT") and "> 50 ms" in strict.loc[0, "reason"]


def test_select_prefers_the_smallest_tp_that_passes():
    loose_ttft = predict(MODEL, "a100-80gb", **SCENARIO).ttft_s
    # a TTFT target just under TP=1's forces a larger TP, but no larger than needed
    df = select(MODEL, ["a100-80gb"], query=ScreenQuery(0.9 * loose_ttft, 1.0, **SCENARIO))
    assert df.loc[0, "passes"] and df.loc[0, "tp"] == 2


# --------------------------------------------------------------------------------------------- crossover


def test_crossover_is_where_ttft_meets_decode_time():
    res = crossover(MODEL, "h100-sxm", output_len=256)
    assert res["found"]
    x = res["crossover_input_len"]
    assert 1 < x < 131072 - 256
    at = predict(MODEL, "h100-sxm", input_len=x, output_len=256)
    before = predict(MODEL, "h100-sxm", input_len=x - 1, output_len=256)
    assert at.ttft_s >= 256 * at.tpot_s
    assert before.ttft_s < 256 * before.tpot_s
    assert res["ttft_s"] == pytest.approx(res["decode_s"], rel=0.01)
    assert res["ttft_s"] == pytest.approx(at.ttft_s) and res["decode_s"] == pytest.approx(256 * at.tpot_s)
    curve = res["curve"]
    assert np.all(np.diff(curve["ttft_s"]) >= 0) and len(curve["input_len"]) > 50


def test_crossover_moves_with_the_hardware_and_output_length():
    h100 = crossover(MODEL, "h100-sxm", output_len=256)["crossover_input_len"]
    a100 = crossover(MODEL, "a100-80gb", output_len=256)["crossover_input_len"]
    shorter = crossover(MODEL, "h100-sxm", output_len=64)["crossover_input_len"]
    assert a100 < h100  # less compute per byte of bandwidth: prefill dominates sooner
    assert shorter < h100  # less to decode: prefill dominates sooner


def test_crossover_absent_within_the_searched_range():
    res = crossover(MODEL, "h100-sxm", output_len=256, max_input=1000)
    assert not res["found"] and res["crossover_input_len"] is None
    assert "no crossover" in res["message"] and res["ttft_s"] < res["decode_s"]
    with pytest.raises(InfercastError, match="max_input"):
        crossover(MODEL, "h100-sxm", output_len=256, max_input=200_000)


# --------------------------------------------------------------------------------------------- roofline


def test_roofline_data_places_prefill_above_and_decode_below_the_ridge():
    data = roofline_data(["h100-sxm", "a100-80gb"], MODEL, **SCENARIO)
    assert [e["gpu"] for e in data["gpus"]] == ["h100-sxm", "a100-80gb"]
    for e in data["gpus"]:
        pre, dec = e["points"]["prefill"], e["points"]["decode"]
        assert pre["arithmetic_intensity"] > e["ridge_point"] > dec["arithmetic_intensity"]
        assert e["ridge_point"] == pytest.approx(e["peak_flops"] / e["bandwidth_bytes_s"])
        for pt in (pre, dec):
            assert 0 < pt["achieved_flops_per_gpu"] <= pt["attainable_flops_per_gpu"] * 1.001
    skipped = roofline_data(["a100-80gb", "h100-sxm"], MODEL, precision="fp8", **SCENARIO)
    assert [e["gpu"] for e in skipped["gpus"]] == ["h100-sxm"]
    assert "FP8 tensor cores" in skipped["skipped"][0]["reason"]


def test_roofline_png_and_svg_are_written(tmp_path: Path):
    png = plot_roofline(["a100-80gb", "h100-sxm", "h200"], MODEL, path=tmp_path / "sub" / "r.png", **SCENARIO)
    assert png.exists() and png.stat().st_size > 20_000
    img = imread(png)
    assert img.ndim == 3 and img.shape[0] > 400 and img.shape[1] > 600
    assert img[..., :3].std() > 0.05  # not a blank canvas
    svg = plot_roofline("h100-sxm", MODEL, path=tmp_path / "r.svg", **SCENARIO)
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()
    with pytest.raises(InfercastError, match=r"\.png or \.svg"):
        plot_roofline("h100-sxm", MODEL, path=tmp_path / "r.jpg", **SCENARIO)


# --------------------------------------------------------------------------------------------- CLI


def _app() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False)
    for name in ("compare", "roofline", "select", "crossover"):
        app.command(name)(getattr(analysis_cmds, name))
    return app


def _run(*args: str):
    return CliRunner().invoke(_app(), list(args))


def test_cli_compare_json_and_table():
    result = _run("compare", "--gpus", "a100-80gb,h100-sxm", "--precisions", "bf16,fp8", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    rows = {(r["gpu"], r["precision"]): r for r in payload["rows"]}
    assert set(rows) == {("a100-80gb", "bf16"), ("a100-80gb", "fp8"), ("h100-sxm", "bf16"), ("h100-sxm", "fp8")}
    assert rows[("a100-80gb", "fp8")]["ttft_s"] is None and "FP8" in rows[("a100-80gb", "fp8")]["note"]
    assert rows[("h100-sxm", "fp8")]["ttft_s"] < rows[("h100-sxm", "bf16")]["ttft_s"]
    table = _run("compare", "--gpus", "h100-sxm,h200")
    assert table.exit_code == 0 and "h200" in table.stdout and "memory" in table.stdout


def test_cli_select_parses_durations_and_reports():
    result = _run("select", "--ttft", "0.2s", "--tpot", "50", "--gpus", "h100-sxm,t4", "--input-len", "4096", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["ttft_s"] == pytest.approx(0.2) and payload["tpot_s"] == pytest.approx(0.05)
    assert "h100-sxm" in payload["passing"]
    t4 = next(r for r in payload["rows"] if r["gpu"] == "t4")
    assert not t4["passes"] and "TTFT" in t4["reason"]
    human = _run("select", "--ttft", "200ms", "--tpot", "50ms", "--gpus", "h100-sxm")
    assert human.exit_code == 0 and "PASS" in human.stdout


@pytest.mark.parametrize(
    ("text", "seconds"), [("200ms", 0.2), ("0.2s", 0.2), ("500us", 5e-4), ("250", 0.25), (" 1.5 s ", 1.5)]
)
def test_parse_duration_units(text: str, seconds: float):
    assert analysis_cmds.parse_duration("ttft", text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["fast", "200 min", "-5ms", "0", "ms", ""])
def test_parse_duration_rejects_malformed(bad: str):
    with pytest.raises(InfercastError, match="ttft"):
        analysis_cmds.parse_duration("ttft", bad)


def test_parse_duration_asks_for_a_unit_below_one_millisecond():
    """A bare number is milliseconds; a bare 0.5 (no LLM step finishes in 500 us) is refused with both readings
    spelled out, never taken silently as 500 us. With a unit, small times stay valid."""
    with pytest.raises(InfercastError, match=r"0\.5 would be 500 us; write the unit: 0\.5s or 500ms"):
        analysis_cmds.parse_duration("ttft", "0.5")
    assert analysis_cmds.parse_duration("ttft", "500us") == pytest.approx(5e-4)
    assert analysis_cmds.parse_duration("ttft", "1") == pytest.approx(1e-3)
    bad = _run("select", "--ttft", "0.5", "--tpot", "0.05")
    assert bad.exit_code != 0 and "0.5s or 500ms" in str(bad.exception)


def test_cli_errors_are_infercast_errors_or_usage_errors():
    bad = _run("select", "--ttft", "soon", "--tpot", "50ms")
    assert bad.exit_code != 0 and isinstance(bad.exception, InfercastError)
    assert "expected a time like 200ms" in str(bad.exception)
    unknown = _run("compare", "--gpus", "h100-sxm,h1000")
    assert isinstance(unknown.exception, InfercastError) and "gpu" in str(unknown.exception)
    missing = _run("select", "--tpot", "50ms")  # --ttft is required: typer's usage error, status 2
    assert missing.exit_code == 2


def test_cli_main_style_wrapper_exits_2(capsys):
    """The project's ``main()`` turns InfercastError into one stderr line and status 2; mimic it here."""

    def main(argv: list[str]) -> None:
        try:
            _app()(args=argv)
        except InfercastError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None

    with pytest.raises(SystemExit) as info:
        main(["crossover", "--output-len", "1"])
    assert info.value.code == 2
    assert capsys.readouterr().err.startswith("error: output_len:")


def test_cli_crossover_and_roofline(tmp_path: Path):
    res = _run("crossover", "--gpu", "h100-sxm", "--output-len", "256", "--json")
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert payload["crossover_input_len"] == crossover(MODEL, "h100-sxm", output_len=256)["crossover_input_len"]
    assert "crossover" in _run("crossover", "--output-len", "256").stdout
    out = tmp_path / "roof.png"
    roof = _run("roofline", "--gpus", "h100-sxm,h200", "--out", str(out), "--json")
    assert roof.exit_code == 0, roof.output
    data = json.loads(roof.stdout)
    assert data["path"] == str(out) and out.stat().st_size > 10_000
    assert {e["gpu"] for e in data["gpus"]} == {"h100-sxm", "h200"}
    bad = _run("roofline", "--out", str(tmp_path / "roof.gif"))
    assert isinstance(bad.exception, InfercastError) and not (tmp_path / "roof.gif").exists()


# --------------------------------------------------------------------------------------------- review fixes

MOE = "qwen3-30b-a3b"


def test_compare_select_crossover_roofline_take_ep_and_kv_precision():
    kw = dict(input_len=2048, output_len=256, batch=32, tp=2)
    df = compare(MOE, ["h100-sxm"], ["bf16"], ep=2, kv_precision="fp8", **kw)
    row = df.iloc[0]
    p = predict(MOE, "h100-sxm", precision="bf16", ep=2, kv_precision="fp8", **kw)
    assert (row.ep, row.kv_precision) == (2, "fp8") and df.attrs["ep"] == 2
    assert row.tpot_s == pytest.approx(p.tpot_s) and row.ttft_s == pytest.approx(p.ttft_s)
    assert p.tpot_s != pytest.approx(predict(MOE, "h100-sxm", precision="bf16", **kw).tpot_s)

    sel = select(
        MOE,
        ["h100-sxm"],
        query=ScreenQuery(10.0, 1.0, input_len=2048, output_len=256),
        tps=[1, 2, 4],
        layout=ScreenLayout(ep=2, kv_precision="fp8"),
        all_configs=True,
    )
    by_tp = sel.set_index("tp")
    assert "ep=2 needs 2 GPUs per stage" in by_tp.loc[1, "reason"] and not by_tp.loc[1, "passes"]
    assert by_tp.loc[2, "passes"] and by_tp.loc[4, "passes"]
    assert set(sel["kv_precision"]) == {"fp8"} and set(sel["ep"]) == {2}
    tp2 = predict(MOE, "h100-sxm", tp=2, ep=2, kv_precision="fp8", input_len=2048, output_len=256)
    assert by_tp.loc[2, "tpot_s"] == pytest.approx(tp2.tpot_s)

    res = crossover(MOE, "h100-sxm", output_len=64, tp=2, ep=2, kv_precision="fp8")
    assert (res["ep"], res["kv_precision"]) == (2, "fp8") and res["found"]
    at = predict(MOE, "h100-sxm", tp=2, ep=2, kv_precision="fp8", input_len=res["crossover_input_len"], output_len=64)
    assert res["ttft_s"] == pytest.approx(at.ttft_s)

    data = roofline_data("h100-sxm", MOE, ep=2, kv_precision="fp8", **kw)
    (entry,) = data["gpus"]
    assert data["ep"] == 2 and entry["kv_precision"] == "fp8"
    assert entry["points"]["decode"]["time_s"] == pytest.approx(p.decode.time_s)


def test_roofline_uses_the_phase_reports_compute_key_and_ridge():
    data = roofline_data(["h100-sxm", "t4"], "llama-3.2-1b", input_len=1024, output_len=64)
    keys = {e["gpu"]: (e["precision"], e["compute_key"]) for e in data["gpus"]}
    assert keys == {"h100-sxm": ("bf16", "bf16"), "t4": ("fp16", "fp16")}  # T4 falls back to fp16
    w4 = roofline_data("h100-sxm", MOE, precision="int4", input_len=1024, output_len=64)["gpus"][0]
    assert w4["compute_key"] == "bf16"  # W4A16 multiplies at the 16-bit rate
    assert w4["ridge_point"] == pytest.approx(get_hardware("h100-sxm").ridge_point("bf16"))


def test_plot_roofline_forwards_the_scenario(tmp_path: Path):
    png = plot_roofline("h100-sxm", MOE, path=tmp_path / "r.png", input_len=512, output_len=64, tp=2, ep=2)
    assert png.exists()
    with pytest.raises(InfercastError) as err:  # extension refused before anything is predicted
        plot_roofline("h100-sxm", MOE, path=tmp_path / "r.gif", input_len=10**9, output_len=64)
    assert err.value.field == "out"


def test_unsupported_note_is_the_compute_key_message():
    a100 = get_hardware("a100-80gb")
    with pytest.raises(InfercastError) as err:
        get_scheme("fp8").compute_key(a100)
    assert unsupported_note(get_scheme("fp8"), a100) == err.value.message
    assert unsupported_note(get_scheme("bf16"), a100) is None


def test_cost_per_mtok_of_unpriced_hardware_is_zero_everywhere():
    from infercast.analysis.sweep import sweep
    from infercast.specs import catalog

    free = get_hardware("h100-sxm").model_copy(update={"id": "owned-h100-test", "price_per_hour_usd": 0.0})
    register_hardware(free)
    try:
        assert compare(MODEL, [free], **SCENARIO).loc[0, "cost_per_mtok_usd"] == 0.0
        assert (sweep(gpus=[free], batches=[1, 8])["cost_per_mtok_usd"] == 0.0).all()
        sel = select(MODEL, ["owned-h100-test", "h100-sxm"], query=ScreenQuery(10.0, 1.0, **SCENARIO), tps=[1])
        assert list(sel["gpu"]) == ["owned-h100-test", "h100-sxm"] and sel.loc[0, "cost_per_mtok_usd"] == 0.0
    finally:
        catalog._user_hardware.pop("owned-h100-test", None)


def test_cli_analysis_commands_take_ep_and_kv_precision(tmp_path: Path):
    common = ["--model", MOE, "--tp", "2", "--ep", "2", "--kv-precision", "fp8", "--json"]
    cmp = _run("compare", "--gpus", "h100-sxm", *common)
    assert cmp.exit_code == 0, cmp.output
    (row,) = json.loads(cmp.stdout)["rows"]
    assert (row["ep"], row["kv_precision"]) == (2, "fp8")
    sel = _run(
        "select",
        "--ttft",
        "10s",
        "--tpot",
        "1s",
        "--gpus",
        "h100-sxm",
        "--tps",
        "2",
        "--model",
        MOE,
        "--ep",
        "2",
        "--kv-precision",
        "fp8",
        "--json",
    )
    assert sel.exit_code == 0, sel.output
    assert json.loads(sel.stdout)["rows"][0]["kv_precision"] == "fp8"
    cross = _run("crossover", "--gpu", "h100-sxm", "--output-len", "64", *common)
    assert cross.exit_code == 0, cross.output
    assert json.loads(cross.stdout)["ep"] == 2
    roof = _run("roofline", "--gpus", "h100-sxm", "--out", str(tmp_path / "r.svg"), *common)
    assert roof.exit_code == 0, roof.output
    assert json.loads(roof.stdout)["gpus"][0]["kv_precision"] == "fp8"


def test_crossover_says_when_the_prompt_does_not_fit_in_memory():
    """On an L4 (22 GiB usable) Llama-3.1-8B's KV pool holds ~20k tokens; TTFT overtakes decode far beyond that."""
    res = crossover(MODEL, "l4", output_len=256)
    longest = memory_budget(MODEL, "l4").max_context(1) - 256
    assert res["max_fitting_input"] == longest > 0
    assert res["found"] and res["crossover_input_len"] > longest and res["fits"] is False
    assert "does not fit in memory" in res["message"] and f"{longest:,}-token prompt" in res["message"]
    curve = res["curve"]
    for n, fits in zip(curve["input_len"], curve["fits"], strict=True):
        assert fits == (n <= longest), n
    on_h100 = crossover(MODEL, "h100-sxm", output_len=256)
    assert on_h100["fits"] is True and "does not fit" not in on_h100["message"]


def test_crossover_when_no_prompt_fits_at_all():
    res = crossover("qwen3-32b", "t4", output_len=256)  # 65 GB of weights on a 16 GB card
    assert res["max_fitting_input"] == 0 and not any(res["curve"]["fits"])
    assert "no prompt fits in memory" in res["message"]


def test_crossover_absent_but_past_memory_says_so():
    res = crossover(MODEL, "l4", output_len=256, max_input=40000)  # past the ~20k tokens an L4's KV pool holds
    assert not res["found"] and "do not fit in memory" in res["message"]
