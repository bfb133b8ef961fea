"""The command-line contracts scripts depend on, and one-line errors with exit status 2."""

from __future__ import annotations

import importlib.util

import pytest

from infercast.cli import _join_multi_values
from tests.cli_helpers import run, run_json


def test_memory_contract(capsys):
    d = run_json(
        capsys,
        "memory",
        "--model",
        "llama-3.1-70b",
        "--gpu",
        "h100-sxm",
        "--tp",
        "2",
        "--precision",
        "fp8",
        "--context",
        "8192",
    )
    assert d["fits"] and d["max_concurrency"] > 10
    assert d["kv_bytes_per_token"] == 80 * 8 * 128 * 2 * 2 / 2
    assert 35e9 < d["weights_bytes"] < 38e9


def test_memory_takes_predicts_defaults_and_layouts(capsys):
    """`memory` runs on predict's defaults (Llama-3.1-8B on one H100) and takes the layouts predict does: pipeline
    stages hold their share of the layers, attention data parallelism replicates attention and splits experts."""
    assert run_json(capsys, "memory") == run_json(capsys, "memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm")
    flat = run_json(capsys, "memory", "--model", "llama-3.1-70b", "--tp", "4", "--precision", "fp8")
    staged = run_json(capsys, "memory", "--model", "llama-3.1-70b", "--tp", "4", "--pp", "2", "--precision", "fp8")
    assert (flat["layout"], staged["layout"]) == ("tp4", "tp4-pp2")
    assert staged["weights_bytes"] == pytest.approx(flat["weights_bytes"] / 2, rel=0.05)
    wide = run_json(
        capsys,
        "memory",
        "--model",
        "deepseek-v3",
        "--gpu",
        "h200",
        "--ep",
        "8",
        "--attention-dp",
        "8",
        "--precision",
        "fp8",
    )
    assert wide["layout"] == "tp1-dp8-ep8" and wide["fits"]


def test_predict_contract(capsys):
    d = run_json(
        capsys,
        "predict",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--precision",
        "bf16",
        "--input-len",
        "2048",
        "--output-len",
        "256",
    )
    for key in ("ttft_s", "tpot_s", "e2e_s", "output_throughput_tok_s", "total_throughput_tok_s"):
        assert d[key] > 0
    for phase in ("prefill", "decode"):
        assert {"time_s", "flops", "bytes", "arithmetic_intensity", "bound"} <= set(d[phase])
    assert d["prefill"]["bound"] == "compute" and d["decode"]["bound"] == "memory"
    assert {"weights_bytes", "kv_cache_bytes", "total_bytes", "capacity_bytes", "fits"} <= set(d["memory"])
    # physical floors: decode cannot beat weight streaming, prefill cannot beat peak FLOP/s
    assert d["tpot_s"] > 15.0e9 / 3.35e12
    assert d["ttft_s"] > d["prefill"]["flops"] / 989.4e12


def test_predict_ops_table(capsys):
    code, out, _ = run(capsys, "predict", "--ops", "--input-len", "512", "--output-len", "64")
    assert code == 0 and "gate_up_proj" in out and "What would help" in out


def test_simulate_contract(capsys):
    args = [
        "simulate",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--input-len",
        "500",
        "--output-len",
        "50",
        "--num-requests",
        "60",
        "--rate",
        "4",
        "--goodput",
        "ttft:200",
        "tpot:50",
    ]
    d = run_json(capsys, *args)
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
        assert {"mean", "p50", "p90", "p99"} <= set(d[key])
    for key in (
        "request_throughput_req_s",
        "output_throughput_tok_s",
        "total_throughput_tok_s",
        "goodput_req_s",
        "duration_s",
        "num_requests",
        "preemptions",
    ):
        assert key in d
    assert d["num_requests"] == 60 and d["slo"]["ttft_ms"] == 200 and d["slo"]["tpot_ms"] == 50


def test_simulate_azure_trace(capsys, tmp_path):
    from tests.conftest import SHARED

    trace = SHARED / "traces" / "azure_conv_2023.csv"
    if not trace.exists():
        pytest.skip("../shared/traces not present")
    d = run_json(
        capsys, "simulate", "--trace", str(trace), "--num-requests", "300", "--requests-out", str(tmp_path / "r.csv")
    )
    assert d["completed"] == 300 and (tmp_path / "r.csv").exists()


def test_goodput_values_are_folded():
    assert _join_multi_values(["simulate", "--goodput", "ttft:200", "tpot:50", "--json"]) == [
        "simulate",
        "--goodput",
        "ttft:200 tpot:50",
        "--json",
    ]


def test_catalog_commands(capsys):
    models = run_json(capsys, "models")
    assert any(m["id"] == "deepseek-v3" for m in models)
    gpus = run_json(capsys, "gpus")
    assert any(g["id"] == "mi300x" for g in gpus)
    shown = run_json(capsys, "show-model", "qwen3-30b-a3b")
    assert shown["attention"] == "GQA" and "moe" in shown


def test_sweep_command(capsys):
    d = run_json(
        capsys,
        "sweep",
        "--models",
        "llama-3.1-8b",
        "--gpus",
        "h100-sxm,a100-80gb",
        "--precisions",
        "bf16,fp8",
        "--batches",
        "1,8",
        "--input-lens",
        "512",
        "--output-lens",
        "64",
    )
    assert len(d["rows"]) == 6  # fp8 on A100 skipped
    assert "no FP8" in d["skipped"][0]["reason"]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["predict", "--model", "llama-3.1-9b"], "did you mean"),
        (["predict", "--input-len", "-3"], "input_len"),
        (["predict", "--gpu", "a100-80gb", "--precision", "fp8"], "FP8"),
        (["predict", "--model", "llama-3.1-70b", "--precision", "bf16"], "raise --tp"),
        (["predict", "--tp", "3"], "does not divide"),
        (["predict", "--batch", "4096", "--input-len", "8000", "--output-len", "8000"], "KV blocks"),
        (["memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "tgi"], "engine"),
        (["simulate", "--input-len", "100", "--output-len", "10", "--rate", "0"], "rate"),
        (["simulate", "--input-len", "100", "--output-len", "10", "--concurrency", "0"], "concurrency"),
        (["show-model", "/nonexistent/config.json"], "no such file"),
        pytest.param(
            ["measure", "--model", "llama-3.1-8b", "--device", "cuda"],
            "CUDA",
            marks=pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="measure needs torch"),
        ),
        (["validate", "--data", "/nonexistent.csv"], "no such file"),
    ],
)
def test_errors_are_one_line_exit_2(capsys, args, needle):
    code, _, err = run(capsys, *args)
    assert code == 2
    assert needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_usage_errors_exit_2(capsys):
    code, _, err = run(capsys, "predict", "--tp", "abc")
    assert code == 2 and "Traceback" not in err


def test_predict_shows_what_ttft_is_made_of(capsys):
    """The human report splits TTFT into prefill and the engine's per-request overhead, and the parts add up."""
    data = run_json(capsys, "predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm")
    assert data["request_overhead_s"] > 0
    assert data["ttft_s"] == pytest.approx(data["prefill"]["time_s"] + data["request_overhead_s"])
    code, out, _ = run(capsys, "predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm")
    assert code == 0
    line = next(ln for ln in out.splitlines() if "prefill + per-request overhead" in ln)
    assert f"{1e3 * data['request_overhead_s']:.2f} ms" in line


def test_python_dash_m_runs_the_cli():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "infercast", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("infercast ")


@pytest.mark.parametrize("command", [["calibrate-cpu", "--layers", "1"], ["serve"], ["validate-sim"]])
def test_engine_commands_without_torch_say_how_to_install_it(command, monkeypatch, capsys):
    import sys

    from infercast.cli import main

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(SystemExit) as exit_:
        main(command)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "pip install 'infercast[measure]'" in err and "internal error" not in err
