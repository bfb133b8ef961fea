"""Capacity planner: SLO terms, pruning, rate search verified by independent simulations, ranking, executors."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import infercast
from infercast.analysis.error_bands import FRONT_END_BINDS
from infercast.errors import InfercastError
from infercast.plan import Candidate, CandidateSpace, Execution, PlanRequest, SLOSet, plan
from infercast.plan.candidates import parse_ratios
from infercast.plan.costing import parse_prices, replicas_needed, usd_per_mtok
from infercast.plan.launch import launch_commands
from infercast.plan.pareto import pareto_mask
from infercast.plan.planner import candidate_of
from infercast.plan.prune import prune_reason, resolve
from infercast.plan.result import rank
from infercast.plan.screen import ScreenQuery
from infercast.plan.search import failure_binding
from infercast.plan.select import select
from infercast.plan.slo import SLOCheck
from infercast.plan.traffic import Traffic
from infercast.specs.catalog import get_model
from tests.cli_helpers import run, run_json

MODEL = "llama-3.1-8b"
TRAFFIC = {"input_len": 512, "output_len": 128, "num_requests": 300}
SLO = "ttft:p99:300ms tpot:p90:40ms"


@pytest.fixture(scope="module")
def small_plan():
    """Every candidate searched (no cost bound), in this process."""
    return plan(MODEL, "l4,a10g,h100-sxm", slo=SLO, rate=10, tps=[1, 2], executor="serial", exhaustive=True, **TRAFFIC)


# ------------------------------------------------------------------------------------------- SLO terms


def test_slo_terms_parse_percentiles_units_and_goodput_limits():
    slo = SLOSet.parse("ttft:p99:200ms tpot:p90:0.05s e2el:20s", attainment=0.95)
    assert [(t.metric, t.percentile, t.limit_s) for t in slo.terms] == [
        ("ttft", 99.0, 0.2),
        ("tpot", 90.0, 0.05),
        ("e2e", None, 20.0),
    ]
    assert slo.attainment == 0.95 and slo.limit("tpot") == 0.05
    assert "ttft p99 <= 200 ms" in slo.describe() and "95%" in slo.describe()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("ttft:q99:200ms", "percentile"),
        ("ttft:p0:200ms", "percentile"),
        ("latency:p99:1s", "unknown metric"),
        ("ttft:p99:-5ms", "expected a time"),
        ("ttft", "METRIC"),
        ("ttft:p99:1s ttft:p99:2s", "twice"),
        ("", "needs"),
    ],
)
def test_slo_bad_terms_are_one_line_errors_naming_the_field(text, needle):
    with pytest.raises(InfercastError) as exc:
        SLOSet.parse(text)
    assert exc.value.field == "slo" and needle in str(exc.value) and "\n" not in str(exc.value)


def test_slo_check_percentiles_goodput_and_saturation():
    n = 100
    arrival = np.zeros(n)
    first = np.linspace(0.01, 1.0, n)  # TTFT 10 ms .. 1 s
    output = np.full(n, 11)
    finish = first + 10 * 0.02  # TPOT 20 ms
    check = SLOSet.parse("ttft:p50:600ms tpot:p90:30ms").check(arrival, first, finish, output, saturated=False)
    assert check.passes and check.measured_s["ttft p50"] == pytest.approx(np.percentile(first, 50))
    assert check.binding == "ttft p50"
    failing = SLOSet.parse("ttft:p99:600ms").check(arrival, first, finish, output, saturated=False)
    assert not failing.passes and failing.headroom > 1
    # goodput limit: 60 % of requests have TTFT <= 600 ms, needs 99 %
    goodput = SLOSet.parse("ttft:600ms").check(arrival, first, finish, output, saturated=False)
    assert not goodput.passes and goodput.attainment == pytest.approx(0.6, abs=0.01)
    assert SLOSet.parse("ttft:600ms", attainment=0.5).check(arrival, first, finish, output, False).passes
    sat = SLOSet.parse("ttft:p50:600ms").check(arrival, first, finish, output, saturated=True)
    assert not sat.passes and sat.binding == "saturated"
    # an unfinished request is infinitely late
    finish2 = finish.copy()
    finish2[-2:] = np.nan
    assert not SLOSet.parse("e2e:p99:5s").check(arrival, first, finish2, output, False).passes


# ------------------------------------------------------------------------------------------- pieces


def test_pareto_mask_keeps_only_undominated_points():
    x = np.array([1.0, 2.0, 3.0, 2.0, np.nan, 3.0])
    y = np.array([5.0, 4.0, 1.0, 3.0, 9.0, 1.0])
    assert pareto_mask(x, y, maximize_x=True, maximize_y=True).tolist() == [True, True, True, False, False, True]
    # minimising both: (2, 3) beats (2, 4); (1, 5) has the least x and (3, 1) the least y
    assert pareto_mask(x, y, maximize_x=False, maximize_y=False).tolist() == [True, False, True, True, False, True]


def test_costing_and_prices():
    assert usd_per_mtok(3.6, 1000.0) == pytest.approx(1.0)  # $3.6/h = $0.001/s over 1000 tok/s
    assert replicas_needed(20, 7.5) == 3 and replicas_needed(20, 20) == 1 and replicas_needed(0.1, 5) == 1
    assert parse_prices("h100-sxm=2.5, h200=$3.1") == {"h100-sxm": 2.5, "h200": 3.1}
    with pytest.raises(InfercastError, match="GPU=\\$/h"):
        parse_prices("h100-sxm:2.5")
    with pytest.raises(InfercastError, match="not among"):
        plan(MODEL, "h100-sxm", slo=SLO, rate=1, prices={"h200": 1.0}, **TRAFFIC)


def test_candidate_grid_and_ratios():
    space = CandidateSpace.build(
        "h100-sxm,h200", precisions="bf16,fp8", tps=[1, 2], max_num_seqs=[64, 256], ratios="1:1,1:2"
    )
    cands = space.enumerate()
    assert len(cands) == 2 * 2 * (2 * 2 + 2 * 2 * 2)
    dis = [c for c in cands if c.disaggregated]
    assert {(c.prefill, c.decode) for c in dis} == {(1, 1), (1, 2)}
    c = Candidate("h100-sxm", "fp8", 2, prefill=1, decode=2, decode_tp=4)
    assert c.gpus == 2 + 8 and c.label == "h100-sxm fp8 P1xtp2:D2xtp4"
    with pytest.raises(InfercastError, match="prefill:decode"):
        parse_ratios("1-2")
    with pytest.raises(InfercastError, match=">= 1"):
        parse_ratios("0:1")


def test_pruning_reasons():
    model = get_model("llama-3.1-70b")
    traffic = Traffic(input_len=1000, output_len=200, num_requests=50)
    slo = SLOSet.parse("ttft:p99:500ms tpot:p90:50ms")
    assert "memory" in prune_reason(model, resolve(model, Candidate("h100-sxm", "bf16", 1)), traffic, slo)
    assert "FP8" in prune_reason(model, resolve(model, Candidate("a100-80gb", "fp8", 4)), traffic, slo)
    assert "TPOT" in prune_reason(
        model, resolve(model, Candidate("l40s", "fp8", 2)), traffic, SLOSet.parse("tpot:p90:5ms")
    )
    # the same verdict and words as `select` (the planner's analytic screen) for one request alone
    sel = select(
        model,
        ["l40s"],
        query=ScreenQuery(10.0, 0.005, input_len=1000, output_len=200),
        precisions=["fp8"],
        tps=[2],
        all_configs=True,
    )
    assert sel.loc[0, "reason"] in prune_reason(
        model, resolve(model, Candidate("l40s", "fp8", 2)), traffic, SLOSet.parse("tpot:p90:5ms")
    )
    assert prune_reason(model, resolve(model, Candidate("h100-sxm", "fp8", 4)), traffic, slo) is None


def test_pruning_floor_credits_the_varying_overhead_above_its_median():
    """predict adds the varying request overhead's mean; an unloaded request's median TTFT has only its median
    (ln 2 of the mean), so a p50 limit between the two must not prune (vLLM: 10 ms mean, 3.1 ms apart)."""
    from infercast.plan.prune import jitter_credit

    model = get_model("llama-3.1-8b")
    traffic = Traffic(input_len=1000, output_len=50, num_requests=50)
    c = resolve(model, Candidate("h100-sxm", "bf16", 1, engine="vllm"))
    mean_ttft = infercast.predict(model, "h100-sxm", input_len=1000, output_len=50, engine="vllm").ttft_s
    credit = jitter_credit("h100-sxm", "vllm")
    assert credit > 0.001
    between = f"ttft:p50:{(mean_ttft - credit / 2) * 1e3:.3f}ms"
    assert prune_reason(model, c, traffic, SLOSet.parse(between)) is None
    below = f"ttft:p50:{(mean_ttft - 2 * credit) * 1e3:.3f}ms"
    assert "TTFT" in prune_reason(model, c, traffic, SLOSet.parse(below))
    res = infercast.simulate(
        model, "h100-sxm", engine="vllm", input_len=1000, output_len=50, num_requests=40, rate=0.05, seed=2
    )
    assert mean_ttft - credit - 1e-9 < res["ttft_s"]["p50"] < mean_ttft  # the simulator sits between the two


def test_launch_commands_carry_the_knobs():
    model = get_model("llama-3.1-70b")
    c = Candidate("h100-sxm", "fp8", 4, kv_precision="fp8", max_num_seqs=128, max_num_batched_tokens=2048)
    vllm = "\n".join(launch_commands(model, c, 3))
    assert "vllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 4 --max-num-seqs 128" in vllm
    assert "--max-num-batched-tokens 2048" in vllm and "--quantization fp8" in vllm and "--kv-cache-dtype fp8" in vllm
    sg = "\n".join(launch_commands(model, Candidate("h200", "bf16", 2, engine="sglang"), 1))
    assert "sglang.launch_server" in sg and "--tp-size 2" in sg and "--chunked-prefill-size 8192" in sg
    trt = "\n".join(launch_commands(model, Candidate("h200", "bf16", 8, engine="trtllm"), 1))
    assert "trtllm-serve" in trt and "--tp_size 8" in trt and "--max_batch_size 2048" in trt
    dis = launch_commands(model, Candidate("h200", "fp8", 4, prefill=1, decode=2, decode_tp=2, engine="sglang"), 2)
    assert any("--disaggregation-mode prefill" in x for x in dis) and any("--tp-size 2" in x for x in dis)
    b200 = "\n".join(launch_commands(model, Candidate("b200", "bf16", 2, engine="sglang"), 1))
    assert "--chunked-prefill-size 16384" in b200  # SGLang's own default from 160 GiB of device memory
    new = launch_commands(model, Candidate("h200", "fp8", 4, prefill=1, decode=1, engine="vllm-0.14"), 1)
    assert any(x.startswith("vllm serve") and "NixlConnector" in x for x in new)  # a later vLLM is still vLLM


# ------------------------------------------------------------------------------------------- the search


def _independent(row: dict, rate: float) -> tuple[dict, bool]:
    """The row's unit at ``rate`` through the public ``simulate``: measured SLO percentiles, saturated."""
    res = infercast.simulate(
        MODEL, row["gpu"], tp=int(row["tp"]), precision=row["precision"], rate=rate, seed=0, **TRAFFIC
    )
    df = res.requests()
    measured = {
        "ttft p99": float(np.percentile(df["ttft_s"], 99)),
        "tpot p90": float(np.nanpercentile(df["tpot_s"], 90)),
    }
    return measured, bool(res.summary["saturated"])


def test_chosen_rate_meets_the_slo_independently_and_10_percent_more_does_not(small_plan):
    chosen = small_plan.chosen
    assert chosen is not None and chosen["status"] == "pass"
    for row in small_plan.passing.to_dict(orient="records")[:3]:
        rate = row["max_rate_req_s"]
        measured, saturated = _independent(row, rate)
        assert not saturated
        assert measured["ttft p99"] <= 0.3 and measured["tpot p90"] <= 0.04, row["label"]
        assert measured["ttft p99"] * 1e3 == pytest.approx(row["slo_measured_ms"]["ttft p99"])
        more, saturated_more = _independent(row, rate * 1.1)
        assert saturated_more or more["ttft p99"] > 0.3 or more["tpot p90"] > 0.04, row["label"]


def test_fleet_is_sized_and_verified_at_the_target_rate(small_plan):
    chosen, fleet = small_plan.chosen, small_plan.fleet_check
    assert fleet["passes"] and fleet["replicas"] >= replicas_needed(10, chosen["max_rate_req_s"])
    assert chosen["replicas"] == fleet["replicas"]
    assert chosen["fleet_usd_per_hour"] == pytest.approx(fleet["replicas"] * chosen["unit_usd_per_hour"])
    assert fleet["slo_attainment"] > 0.99 and fleet["slo_measured_ms"]["ttft p99"] <= 300
    assert any(line.startswith("vllm serve") for line in small_plan.launch)


def test_passing_rows_always_rank_above_cheaper_failing_ones(small_plan):
    order = small_plan.table["status"].map({"pass": 0, "fail": 1, "bounded": 2, "pruned": 3}).to_numpy()
    assert (np.diff(order) >= 0).all()
    passing = small_plan.passing
    assert (np.diff(passing["fleet_usd_per_hour"].astype(float).to_numpy()) >= 0).all()
    assert (small_plan.table["status"] == "pruned").any()  # l4 tp1 cannot reach 40 ms TPOT
    # a synthetic table: the failing and pruned rows are far cheaper and still rank below
    df = pd.DataFrame(
        {
            "label": ["a", "b", "c", "d"],
            "status": ["fail", "pass", "pruned", "pass"],
            "fleet_usd_per_hour": [0.1, 50.0, 0.01, 20.0],
            "usd_per_mtok_output": [0.01, 3.0, 0.001, 2.0],
            "max_rate_req_s": [100.0, 5.0, None, 4.0],
        }
    )
    assert rank(df, by_fleet=True)["label"].tolist() == ["d", "b", "a", "c"]


def test_cost_bound_keeps_the_same_choice(small_plan):
    bounded = plan(MODEL, "l4,a10g,h100-sxm", slo=SLO, rate=10, tps=[1, 2], executor="serial", **TRAFFIC)
    assert bounded.chosen["label"] == small_plan.chosen["label"]
    assert bounded.chosen["max_rate_req_s"] == pytest.approx(small_plan.chosen["max_rate_req_s"])
    assert bounded.stats["bounded"] >= 1 and bounded.stats["simulations"] < small_plan.stats["simulations"]


def test_rows_rebuild_their_candidates(small_plan):
    for row in small_plan.table.to_dict(orient="records"):
        assert candidate_of(row).label == row["label"]


def test_a_typed_request_plans_as_its_keywords_do():
    """infercast.plan(PlanRequest(...)) gives the keyword call's plan; a keyword plan does not take is a one-line
    error naming it (not a TypeError)."""
    kw = dict(slo=SLO, rate=10, tps=[1], precisions="bf16", executor="serial", verify=False, **TRAFFIC)
    by_keywords = plan(MODEL, "h100-sxm", **kw)
    request = PlanRequest(
        MODEL,
        CandidateSpace.build("h100-sxm", precisions="bf16", tps=[1]),
        Traffic(input_len=512, output_len=128, num_requests=300, rate=10),
        SLOSet.parse(SLO),
        execution=Execution("serial", verify=False, progress=lambda *told: calls.append(told)),
    )
    calls: list[tuple] = []
    typed = infercast.plan(request)
    assert calls == [("search", 1, 1)]
    pd.testing.assert_frame_equal(typed.table, by_keywords.table)
    assert typed.settings == by_keywords.settings
    with pytest.raises(InfercastError, match="did you mean tps") as err:
        plan(MODEL, "h100-sxm", tp=2, **kw)
    assert err.value.field == "tp" and "\n" not in str(err.value)
    with pytest.raises(InfercastError, match="alone"):
        plan(request, "h100-sxm")
    with pytest.raises(InfercastError, match="ratios"):
        plan(MODEL, "h100-sxm", **{**kw, "aggregated": False})


def test_disaggregated_candidates_are_searched():
    res = plan(
        MODEL,
        "h100-sxm",
        slo="ttft:p99:400ms tpot:p90:30ms",
        rate=40,
        tps=[1],
        precisions="bf16",
        disagg="1:1",
        executor="serial",
        exhaustive=True,
        verify=False,
        **TRAFFIC,
    )
    modes = dict(zip(res.table["mode"], res.table["status"], strict=True))
    assert modes == {"agg": "pass", "disagg": "pass"}
    dis = res.table[res.table["mode"] == "disagg"].iloc[0]
    assert dis["gpus_per_unit"] == 2 and dis["max_rate_req_s"] > 0


def _comparable(table: pd.DataFrame) -> pd.DataFrame:
    return table[["label", "status", "max_rate_req_s", "capacity_req_s", "replicas", "probes"]].reset_index(drop=True)


def test_process_pool_and_serial_agree(small_plan):
    local = plan(
        MODEL, "l4,a10g,h100-sxm", slo=SLO, rate=10, tps=[1, 2], executor="local", workers=2, exhaustive=True, **TRAFFIC
    )
    pd.testing.assert_frame_equal(_comparable(local.table), _comparable(small_plan.table))


def test_worker_count_does_not_change_a_bounded_plan():
    """With the cost bound on, rounds (and so warm starts and cut-offs) must not depend on the worker count."""
    args = (MODEL, "l4,h100-sxm")
    kw = dict(slo=SLO, rate=10, precisions=["bf16", "fp8"], input_len=512, output_len=128)
    one = plan(*args, executor="serial", workers=1, **kw)
    two = plan(*args, executor="local", workers=2, **kw)
    pd.testing.assert_frame_equal(_comparable(one.table), _comparable(two.table))


def test_ray_and_local_agree(small_plan):
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'infercast[ray]'")
    res = plan(
        MODEL, "l4,a10g,h100-sxm", slo=SLO, rate=10, tps=[1, 2], executor="ray", workers=2, exhaustive=True, **TRAFFIC
    )
    pd.testing.assert_frame_equal(_comparable(res.table), _comparable(small_plan.table))
    assert res.chosen["label"] == small_plan.chosen["label"]


# ------------------------------------------------------------------------------------------- CLI


def test_cli_plan_json_table_and_plot(capsys, tmp_path):
    csv, png = tmp_path / "plan.csv", tmp_path / "pareto.png"
    data = run_json(
        capsys,
        "plan",
        "--model",
        MODEL,
        "--gpus",
        "a10g,h100-sxm",
        "--tps",
        "1",
        "--slo",
        "ttft:p99:300ms",
        "tpot:p90:40ms",
        "--rate",
        "5",
        "--input-len",
        "512",
        "--output-len",
        "128",
        "--num-requests",
        "300",
        "--workers",
        "1",
        "--out",
        str(csv),
        "--plot",
        str(png),
    )
    assert data["chosen"]["label"] == "h100-sxm bf16 tp1" and data["fleet_check"]["passes"]
    assert data["slo"]["terms"][0] == {"metric": "ttft", "percentile": 99.0, "limit_ms": 300.0}
    assert len(pd.read_csv(csv)) == len(data["candidates"]) == 2
    assert png.read_bytes()[:4] == b"\x89PNG"
    code, out, _ = run(
        capsys,
        "plan",
        "--model",
        MODEL,
        "--gpus",
        "h100-sxm",
        "--tps",
        "1",
        "--slo",
        "ttft:p99:300ms",
        "--rate",
        "5",
        "--input-len",
        "512",
        "--output-len",
        "128",
        "--num-requests",
        "300",
        "--workers",
        "1",
    )
    assert code == 0 and "chosen" in out and "vllm serve" in out


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--slo", "ttft:p99:soon"], "slo"),
        (["--slo", "ttft:p99:1s", "--price", "h100"], "price"),
        (["--slo", "ttft:p99:1s", "--disagg", "2"], "ratios"),
        (["--slo", "ttft:p99:1s", "--rate", "-1"], "rate"),
        (["--slo", "ttft:p99:1s", "--out", "x.txt"], "out"),
        (["--slo", "ttft:p99:1s", "--attainment", "2"], "attainment"),
        (["--slo", "ttft:p99:1s", "--engines", "vllx"], "engine"),
        (["--slo", "ttft:p99:1s", "--kv-precisions", "fp5"], "kv_precision"),
    ],
)
def test_cli_plan_bad_input_is_one_line_exit_2(capsys, args, field):
    code, _, err = run(
        capsys,
        "plan",
        "--model",
        MODEL,
        "--gpus",
        "h100-sxm",
        "--tps",
        "1",
        "--input-len",
        "64",
        "--output-len",
        "16",
        "--num-requests",
        "60",
        "--workers",
        "1",
        *args,
    )
    assert code == 2 and err.startswith(f"error: {field}") and err.count("\n") == 1, err


def test_public_api_plan_is_callable_and_a_package():
    import importlib

    import infercast.plan.planner  # the package imported as such must stay callable

    assert importlib.import_module("infercast").plan is importlib.import_module("infercast.plan")
    res = infercast.plan(
        MODEL,
        "h100-sxm",
        slo="ttft:p99:300ms",
        rate=2,
        input_len=256,
        output_len=32,
        num_requests=200,
        tps=1,
        workers=1,
    )
    assert isinstance(res, infercast.plan.PlanResult) and res.chosen["label"] == "h100-sxm bf16 tp1"
    assert infercast.plan.planner.plan.__name__ == "plan"


# ------------------------------------------------------------------------------------------- daily load


def test_diurnal_profile_shape():
    from infercast.plan.daily import diurnal

    prof = diurnal(20.0, trough=0.25, intervals=24)
    hours = np.arange(24) + 0.5
    assert prof.peak == pytest.approx(prof.rates[15], rel=0.01) and hours[int(np.argmax(prof.rates))] in (15.5, 16.5)
    assert prof.rates.min() == pytest.approx(5.0, rel=0.02) and prof.duration_s == 86_400


def test_autoscaling_what_if_delay_costs_capacity_and_saves_against_fixed():
    from infercast.plan.daily import LoadProfile, autoscale

    # 2 h at 5 req/s, then 2 h at 25 req/s, units of 10 req/s at $2/h
    prof = LoadProfile(np.array([5.0, 5.0, 25.0, 25.0]), 3600.0, "step")
    instant = autoscale(prof, 10.0, 2.0, scale_up_delay_s=0)
    assert instant.fixed_units == 3 and instant.fixed_usd == pytest.approx(3 * 2.0 * 4)
    assert instant.requests_above_capacity == 0
    assert instant.autoscaled_usd == pytest.approx((1 * 2 + 3 * 2) * 2.0)
    assert instant.intervals["units_needed"].tolist() == [1, 1, 3, 3]
    slow = autoscale(prof, 10.0, 2.0, scale_up_delay_s=1800)
    # for the first 30 min of the peak one unit serves 10 of 25 req/s: 15 x 1800 of 5 x 7200 + 25 x 7200
    assert slow.requests_above_capacity == pytest.approx(15 * 1800 / (30 * 7200), rel=0.02)
    assert slow.intervals["units_ready_min"].tolist() == [1, 1, 1, 3]
    assert instant.saving > 0.3


def test_daily_profile_from_csv_and_errors(tmp_path):
    from infercast.plan.daily import load_profile

    csv = tmp_path / "day.csv"
    csv.write_text("hour,rate_req_s\n0,2\n1,4\n2,8\n")
    prof = load_profile(csv)
    assert prof.rates.tolist() == [2, 4, 8] and prof.interval_s == 3600
    from pathlib import Path

    trace = load_profile(Path(infercast.__file__).parent / "data/traces/azure_code_2023.csv", interval_s=600)
    assert trace.interval_s == 600 and trace.rates.sum() * 600 == pytest.approx(8819, rel=0.001)
    for bad, needle in [("diurnal:x", "diurnal:F"), (str(tmp_path / "none.csv"), "neither"), ("diurnal", "peak")]:
        with pytest.raises(InfercastError, match=needle):
            load_profile(bad)


def test_plan_with_a_daily_load():
    res = plan(MODEL, "h100-sxm", slo=SLO, rate=40, daily="diurnal:0.2", tps=1, workers=1, **TRAFFIC)
    d = res.daily
    assert d.fixed_units == res.fleet_check["replicas"]
    assert 0 < d.autoscaled_usd < d.fixed_usd
    assert res.to_dict()["daily"]["fixed_units"] == d.fixed_units


def test_what_the_screen_prunes_fails_in_simulation_at_any_load(small_plan):
    pruned = small_plan.table[small_plan.table["status"] == "pruned"].iloc[0]
    assert pruned["label"] == "l4 bf16 tp1" and "TPOT" in pruned["reason"]
    res = infercast.simulate(MODEL, "l4", tp=1, input_len=512, output_len=128, num_requests=20, rate=0.01)
    assert res.requests()["tpot_s"].min() > 0.040  # even alone every request decodes slower than 40 ms/token


def test_table_as_parquet_and_plot_as_svg(small_plan, tmp_path):
    pytest.importorskip("pyarrow", reason="Parquet needs the parquet extra (pyarrow)")
    from infercast.plan.plot import save_pareto

    path = small_plan.save_table(tmp_path / "plan.parquet")
    back = pd.read_parquet(path)
    assert back["label"].tolist() == small_plan.table["label"].tolist()
    svg = save_pareto(small_plan, tmp_path / "pareto.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "chosen" in svg
    with pytest.raises(InfercastError, match=r"\.png or \.svg"):
        save_pareto(small_plan, tmp_path / "pareto.gif")


def test_rows_carry_the_simulators_error_band(small_plan, capsys):
    band = small_plan.chosen["error_band"]
    res = infercast.simulate(
        MODEL,
        small_plan.chosen["gpu"],
        tp=int(small_plan.chosen["tp"]),
        rate=small_plan.chosen["max_rate_req_s"],
        seed=0,
        **TRAFFIC,
    )
    assert band == res.confidence.to_dict() and set(band["error_bands"]) == {"ttft", "tpot"}
    from infercast.cli.plan_cmd import render

    render(small_plan, 3)
    assert "expected prediction error here: TTFT ±" in capsys.readouterr().out


def test_pipeline_and_attention_dp_layouts_are_planned():
    """--pps / --attention-dps add aggregated layouts: a 70B model that one H100 cannot hold in bf16 is pruned at
    tp 1 but searched at tp 1 x pp 2; units pay for every GPU of the layout, rows rebuild their candidates."""
    res = plan(
        "llama-3.1-70b",
        "h100-sxm",
        slo="ttft:p99:2s tpot:p90:200ms",
        rate=1,
        tps=[1],
        pps=[1, 2],
        precisions="bf16",
        executor="serial",
        exhaustive=True,
        verify=False,
        input_len=256,
        output_len=32,
        num_requests=40,
    )
    rows = {r["label"]: r for r in res.table.to_dict(orient="records")}
    assert set(rows) == {"h100-sxm bf16 tp1", "h100-sxm bf16 tp1 pp2"}
    assert rows["h100-sxm bf16 tp1"]["status"] == "pruned" and "memory" in rows["h100-sxm bf16 tp1"]["reason"]
    two = rows["h100-sxm bf16 tp1 pp2"]
    assert two["status"] == "pass" and two["gpus_per_unit"] == 2 and two["pp"] == 2
    assert candidate_of(two).label == two["label"]
    space = CandidateSpace.build(
        "h200", precisions="fp8", tps=[1, 8], eps=[8], attention_dps=[1, 8], pps=[1, 2], ratios="1:1"
    )
    cands = space.enumerate()
    assert {(c.tp, c.attention_dp, c.pp) for c in cands if not c.disaggregated} == {
        (tp, dp, pp) for tp in (1, 8) for dp in (1, 8) for pp in (1, 2)
    }
    assert all(c.pp == 1 and c.attention_dp == 1 for c in cands if c.disaggregated)
    wide = Candidate("h200", "fp8", 1, ep=8, attention_dp=8, pp=2)
    assert wide.gpus == 16 and wide.label == "h200 fp8 tp1 adp8 ep8 pp2"
    model = get_model("deepseek-v3")
    bad = prune_reason(
        model,
        resolve(model, Candidate("h200", "fp8", 1, ep=8)),
        Traffic(input_len=100, output_len=10, num_requests=10),
        SLOSet.parse("ttft:p99:1s"),
    )
    assert bad is not None and "ep" in bad


def test_launch_commands_carry_the_layout():
    model = get_model("deepseek-v3")
    c = Candidate("h200", "fp8", 1, ep=8, attention_dp=8, pp=2)
    vllm = launch_commands(model, c, 1)[-1]
    assert "--data-parallel-size 8" in vllm and "--pipeline-parallel-size 2" in vllm
    assert "--enable-expert-parallel" in vllm
    sg = launch_commands(model, Candidate("h200", "fp8", 1, ep=8, attention_dp=8, engine="sglang"), 1)[-1]
    assert "--dp-size 8 --enable-dp-attention" in sg and "--ep-size 8" in sg
    trt = launch_commands(model, Candidate("h200", "fp8", 8, ep=8, pp=2, engine="trtllm"), 1)[-1]
    assert "--pp_size 2" in trt


def test_a_failing_probe_names_the_front_end_when_it_ran_out():
    """`binds` says `front-end` where the API server's front-end, not the GPUs, ran out in the failing probe (busy
    at least FRONT_END_BINDS of the run), marks a failed SLO term the same way, and leaves runs without a
    front-end, or with one that kept up, as the SLO check named them."""

    def probe(saturated: bool, binding: str, busy: float | None):
        check = SLOCheck(False, {}, 0.0, saturated, binding, 1.5)
        return check, SimpleNamespace(summary=SimpleNamespace(front_end_busy_fraction=busy))

    assert failure_binding(*probe(True, "saturated", FRONT_END_BINDS)) == "front-end"
    assert failure_binding(*probe(False, "ttft p99", 0.97)) == "ttft p99 (front-end)"
    assert failure_binding(*probe(True, "saturated", FRONT_END_BINDS - 0.01)) == "saturated"
    assert failure_binding(*probe(True, "saturated", None)) == "saturated"


def test_a_plan_can_set_every_candidate_s_front_end():
    """`stream_token_s` (CLI `--stream-token-us`) sets the API-server front-end of every candidate a plan
    simulates: without TensorRT-LLM's (0), Llama-3.1-8B at TP 8 on H100 serves more than with it, where the
    front-end binds; the settings record it and a negative value is refused."""
    kw = dict(
        slo="ttft:p99:2s tpot:p90:50ms",
        rate=40,
        tps=[8],
        engines=["trtllm"],
        input_len=1024,
        output_len=512,
        executor="serial",
        exhaustive=True,
    )
    fitted, free = plan(MODEL, "h100-sxm", **kw), plan(MODEL, "h100-sxm", stream_token_s=0.0, **kw)
    assert free.settings["stream_token_s"] == 0.0 and fitted.settings["stream_token_s"] is None
    assert free.chosen["max_rate_req_s"] > 1.2 * fitted.chosen["max_rate_req_s"]
    assert fitted.table["binding"].iloc[0] == "front-end"
    with pytest.raises(InfercastError, match="stream_token_s"):
        plan(MODEL, "h100-sxm", stream_token_s=-1e-6, **kw)
