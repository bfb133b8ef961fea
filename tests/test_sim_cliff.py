"""No cliffs without a warning (issue 36 part 3): a run whose TTFT is queueing for KV blocks or batch slots says
so with the cause and what removes it, and its TTFT band is the error measured on published sweeps whose
simulation sits on a cliff of the same cause."""

from __future__ import annotations

from infercast.analysis.error_bands import CLIFF_REGIME, heldout_table
from infercast.sim.api import config_from_keywords, run

ISSUE = dict(precision="fp8", engine="trtllm", concurrency=64, input_len=1024, output_len=8192, num_requests=128)


def test_kv_cliff_is_named_with_its_remedy():
    result = run(config_from_keywords("llama-3.1-70b", "b200", kv_precision="bf16", **ISSUE))
    cliff = result.to_dict()["cliff"]
    assert cliff["cause"] == "kv" and cliff["kv_pool_holds"] == 34
    assert "KV pool holds 34 of 64 clients" in cliff["message"] and "--kv-precision fp8" in cliff["message"]
    assert result.confidence.warnings[0].startswith("cliff: ")
    band = result.confidence.bands["ttft"]  # the error measured on published sweeps simulated on a KV cliff
    want = heldout_table()["cliff"]["bands"]["kv"]
    assert (band.typical, band.p90, band.points) == (want["typical"], want["p90"], want["points"])
    assert band.regime == {"data": CLIFF_REGIME, "cliff": "kv"}
    assert result.confidence.bands["tpot"].regime.get("cliff") is None


def test_without_measured_cliff_bands_the_ttft_band_widens_to_its_p90(monkeypatch):
    import infercast.analysis.error_bands as error_bands

    monkeypatch.setattr(error_bands, "heldout_table", lambda: {})
    band = run(config_from_keywords("llama-3.1-70b", "b200", kv_precision="bf16", **ISSUE)).confidence.bands["ttft"]
    assert band.typical == band.p90 and band.regime["cliff"] == "kv"


def test_no_cliff_where_the_pool_holds_every_client():
    result = run(config_from_keywords("llama-3.1-70b", "b200", **ISSUE))
    assert result.cliff is None
    assert not any(w.startswith("cliff") for w in result.confidence.warnings)


def test_slot_cliff():
    result = run(
        config_from_keywords(
            "llama-3.1-8b", "h100-sxm", concurrency=32, max_num_seqs=4, input_len=512, output_len=256, num_requests=96
        )
    )
    assert result.cliff is not None and result.cliff["cause"] == "slots"
    assert "max_num_seqs 4 holds 4 of 32 clients" in result.cliff["message"]
    band, want = result.confidence.bands["ttft"], heldout_table()["cliff"]["bands"]["slots"]
    assert (band.typical, band.p90, band.regime["cliff"]) == (want["typical"], want["p90"], "slots")


def test_sensitivity_in_simulate_json(capsys):
    from tests.cli_helpers import run_json

    args = ["simulate", "--model", "llama-3.1-70b", "--gpu", "b200", "--precision", "fp8", "--engine", "trtllm"]
    args += ["--concurrency", "64", "--input-len", "1024", "--output-len", "8192", "--num-requests", "128"]
    out = run_json(capsys, *args, "--kv-precision", "bf16")
    swing = out["sensitivity"]
    assert swing["ttft_s_kv_pool_minus_10pct"] > swing["ttft_s"] > swing["ttft_s_kv_pool_plus_10pct"]
    # TTFT on this cliff is queueing behind 8k-token decodes: it moves with the step time as well
    assert swing["ttft_s_step_time_minus_10pct"] < swing["ttft_s"] < swing["ttft_s_step_time_plus_10pct"]
    assert run_json(capsys, *args)["sensitivity"] is None


def test_sensitivity_line_names_the_step_time_swing(capsys):
    from tests.cli_helpers import run as run_cli

    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--concurrency", "2", "--input-len", "256"]
    code, out, err = run_cli(capsys, *args, "--output-len", "16", "--num-requests", "6", "--sensitivity")
    assert code == 0, err
    line = " ".join(out.split())  # the console wraps long lines
    assert "KV pool -10 %: " in line and "; step time -10 %: " in line and ", +10 %: " in line


def test_open_loop_kv_cliff_counts_the_requests_in_flight():
    result = run(
        config_from_keywords(
            "llama-3.1-70b",
            "b200",
            kv_precision="bf16",
            rate=4.0,
            num_requests=120,
            **{k: v for k, v in ISSUE.items() if k not in ("concurrency", "num_requests")},
        )
    )
    assert result.cliff is not None and result.cliff["cause"] == "kv"
    assert "requests in flight at the peak" in result.cliff["message"]


def test_plan_rows_carry_the_cliff():
    from infercast.plan.candidates import Candidate
    from infercast.plan.planner import _row

    assert "cliff" in _row(Candidate("h100-sxm", "bf16", 1), "pruned", None, "x", 1.0, None, None)
