"""``infercast simulate`` on the command line: options reach the simulation or are refused in one line (exit 2)."""

from __future__ import annotations

import json

import pytest

from infercast.cli.common import parse_float_list
from infercast.cost.profile import load_profile
from infercast.errors import InfercastError
from tests.cli_helpers import run

BASE = ("simulate", "--input-len", "200", "--output-len", "20", "--num-requests", "40")


@pytest.mark.parametrize(
    "args,needle",
    [
        (("--rate-sweep", "--rates", "abc"), "--rates:"),
        (("--rate-sweep", "--rates", "1,-2"), "--rates:"),
        (("--rate", "1", "--seed", "-1"), "--seed:"),
        (("--rate", "1", "--spec-tokens", "0"), "--spec-tokens:"),
        (("--rate", "1", "--spec-acceptance", "0.9"), "--spec-acceptance: needs --spec-tokens"),
        (("--rate", "1", "--draft-model", "llama-3.2-1b"), "--draft-model: needs --spec-tokens"),
        (("--rate", "1", "--spec-tokens", "3", "--draft-model", "llama-3.2-1b", "--draft-cost", "0.1"), "--draft-cost"),
        (("--rate", "1", "--prefix-len", "-5"), "--prefix-len:"),
        (("--rate", "1", "--num-prefixes", "4"), "--num-prefixes: needs --prefix-len"),
        (("--rate", "1", "--scheduler", "disagg", "--kv-link-gbps", "0"), "--kv-link-gbps:"),
        (("--rate", "1", "--scheduler", "disagg", "--prefill-instances", "0"), "--prefill-instances:"),
        (("--rate", "1", "--decode-instances", "2"), "--decode-instances: only applies with --scheduler disagg"),
        (("--rate", "1", "--rates", "1,2"), "--rates: only applies with --rate-sweep"),
        (("--rate", "1", "--attainment", "0.5"), "--attainment: only applies with --rate-sweep"),
        (("--rate-sweep", "--rate", "1"), "--rate: not with --rate-sweep"),
        (("--rate-sweep", "--concurrency", "4"), "--concurrency: not with --rate-sweep"),
        (("--rate-sweep", "--offline"), "--offline: not with --rate-sweep"),
        (("--rate-sweep", "--requests-out", "r.csv"), "--requests-out: not with --rate-sweep"),
        (("--rate-sweep", "--trace-out", "t.json"), "--trace-out: not with --rate-sweep"),
        (("--rate", "1", "--max-num-seqs", "0"), "--max-num-seqs:"),
        (("--rate", "1", "--max-batched-tokens", "-1"), "--max-num-batched-tokens:"),
        (("--concurrency", "4", "--burstiness", "0.5"), "--burstiness:"),
        (("--rate", "1", "--goodput", "ttft:nan"), "--goodput:"),
    ],
)
def test_simulate_usage_errors_are_one_line(capsys, args, needle):
    code, out, err = run(capsys, *BASE, *args)
    assert code == 2, (out, err)
    assert needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_trace_near_miss_lists_builtins(capsys):
    code, _, err = run(capsys, "simulate", "--trace", "azure_chat")
    assert code == 2 and "azure_conv" in err and len(err.strip().splitlines()) == 1


def test_disagg_run_reports_disagg(capsys):
    code, out, err = run(
        capsys,
        *BASE,
        "--rate",
        "2",
        "--scheduler",
        "disagg",
        "--decode-instances",
        "2",
        "--kv-link-gbps",
        "25",
        "--json",
    )
    assert code == 0, err
    cfg = json.loads(out)["config"]
    assert cfg["scheduler"] == "disagg" and cfg["decode_instances"] == 2 and cfg["replicas"] == 3


def test_overlap_scheduler_flag_reaches_the_engine(capsys):
    busy = (
        "simulate",
        "--input-len",
        "512",
        "--output-len",
        "200",
        "--num-requests",
        "60",
        "--rate",
        "4",
        "--seed",
        "3",
        "--json",
    )
    ttft = {}
    for flag in ("--overlap-scheduler", "--no-overlap-scheduler"):
        code, out, err = run(capsys, *busy, flag)
        assert code == 0, err
        ttft[flag] = json.loads(out)["ttft_s"]["mean"]
    code, out, _ = run(capsys, *busy)
    assert json.loads(out)["ttft_s"]["mean"] == ttft["--no-overlap-scheduler"]  # the vllm preset plans no step ahead
    assert ttft["--overlap-scheduler"] > ttft["--no-overlap-scheduler"]  # arrivals mid-step wait a step more


def test_rate_sweep_passes_workload_and_engine_options(capsys):
    sweep = ("simulate", "--output-len", "20", "--num-requests", "300", "--rate-sweep", "--rates", "2,4", "--json")
    shared = (*sweep, "--input-len", "200", "--prefix-len", "1024", "--num-prefixes", "2")
    code, out, err = run(capsys, *shared)
    assert code == 0, err
    fast = json.loads(out)
    code, out, err = run(capsys, *shared, "--step-mode")
    assert code == 0, err
    slow = json.loads(out)
    assert [r["rate_req_s"] for r in fast["rates"]] == [2.0, 4.0]
    for a, b in zip(fast["rates"], slow["rates"], strict=True):  # --step-mode reaches the runs: same results
        assert a["ttft_p50_s"] == pytest.approx(b["ttft_p50_s"], rel=1e-9)
    # the shared 1024-token prefixes reach every run: cache hits cut TTFT against equally long unshared prompts
    # (the engine's per-request overhead, API server and tokenisation, is the same for both and set aside)
    code, out, err = run(capsys, *sweep, "--input-len", "1224")
    assert code == 0, err
    unshared = json.loads(out)
    overhead = load_profile("h100-sxm", "hopper", "vllm").request_overhead_s
    assert fast["rates"][0]["ttft_p50_s"] - overhead < 0.6 * (unshared["rates"][0]["ttft_p50_s"] - overhead)


def test_parse_float_list():
    assert parse_float_list("rates", " 0.5, 2,10 ") == [0.5, 2.0, 10.0]
    assert parse_float_list("rates", None) is None
    for bad in ("", "1,,x", "0", "inf", "nan"):
        with pytest.raises(InfercastError) as info:
            parse_float_list("rates", bad)
        assert info.value.field == "rates"


def test_library_errors_name_fields_and_the_cli_names_its_flags(capsys):
    from infercast.sim.api import simulate

    with pytest.raises(InfercastError) as info:
        simulate("llama-3.1-8b", "h100-sxm", input_len=10, output_len=5)
    assert info.value.field == "rate" and "`concurrency`" in info.value.message and "--" not in str(info.value)
    code, _, err = run(capsys, "simulate", "--input-len", "10", "--output-len", "5")
    assert code == 2 and err.strip() == "error: --rate: choose exactly one of --rate, --concurrency, --offline"


def test_simulate_without_requests_names_where_they_can_come_from(capsys):
    """No trace and no lengths (or both): one line naming the flags that give requests and what was given."""
    code, _, err = run(capsys, "simulate", "--rate", "2")
    assert code == 2 and err.count("\n") == 1
    assert "--trace (a file, or azure_conv / azure_code), --input-len and --output-len" in err and "got none" in err
    code, _, err = run(
        capsys, "simulate", "--rate", "2", "--trace", "azure_conv", "--input-len", "9", "--output-len", "9"
    )
    assert code == 2 and "got --trace and lengths" in err
