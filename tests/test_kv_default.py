"""The KV-cache format a launch without --kv-precision gets: the checkpoint's, else the engine's 8-bit default for
quantised checkpoints (issue 36 part 1 cause 1), else the model dtype; and help text that says so (issue 37 item 5)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from infercast.cli import app
from infercast.records import silicon_rows
from infercast.specs.deployment import Deployment
from infercast.specs.engine import get_engine
from infercast.specs.hf_config import load_hf_config


@pytest.mark.parametrize(
    ("engine", "precision", "kv", "source"),
    [
        ("trtllm", "fp8", "fp8", "engine default"),
        ("trtllm", "nvfp4", "fp8", "engine default"),
        ("trtllm", "bf16", "bf16", "model dtype"),
        ("vllm", "fp8", "bf16", "model dtype"),
        ("vllm", "nvfp4", "fp8", "engine default"),
        ("sglang", "nvfp4", "fp8", "engine default"),
        ("vllm-0.14", "nvfp4", "fp8", "engine default"),
    ],
)
def test_kv_default_follows_the_engine_and_checkpoint(engine, precision, kv, source):
    dep = Deployment.resolve("llama-3.1-70b", "b200", precision=precision, engine=engine)
    assert (dep.kv_format.name, dep.kv_source) == (kv, source)


def test_given_kv_precision_wins():
    dep = Deployment.resolve("llama-3.1-70b", "b200", precision="fp8", kv_precision="bf16", engine="trtllm")
    assert (dep.kv_format.name, dep.kv_source) == ("bf16", "given")


def test_kv_default_agrees_with_the_calibration_reading():
    # records/silicon_rows.py reads the calibration rows with this KV format; the CLI/API default must agree
    for engine in ("vllm", "sglang", "trtllm"):
        for precision in ("fp8", "nvfp4"):
            fp8 = precision in silicon_rows.FP8_KV_SCHEMES or (
                precision == "fp8" and engine in silicon_rows.FP8_KV_ENGINES
            )
            assert (precision in get_engine(engine).fp8_kv_schemes) == fp8, (engine, precision)


@pytest.mark.parametrize(
    ("quant", "kv"),
    [
        ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}, "fp8"),
        ({"quant_method": "modelopt", "quant_algo": "FP8"}, None),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {
                        "weights": {"num_bits": 8, "type": "float"},
                        "input_activations": {"num_bits": 8, "type": "float"},
                    }
                },
                "kv_cache_scheme": {"num_bits": 8, "type": "float"},
            },
            "fp8",
        ),
    ],
)
def test_checkpoint_kv_quantisation_is_read_and_used(hf_configs, tmp_path, quant, kv):
    raw = json.loads((hf_configs / "llama-3.1-8b.json").read_text())
    raw["quantization_config"] = quant
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    spec = load_hf_config(path)
    assert spec.kv_cache_precision == kv
    dep = Deployment.resolve(spec, "h100-sxm", engine="vllm")
    assert dep.kv_format.name == (kv or "bf16")
    assert dep.kv_source == ("checkpoint" if kv else "model dtype")


def test_kv_precision_help_says_what_the_default_does():
    for command in ("predict", "simulate", "memory", "compare"):
        out = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"}).output
        text = " ".join(out.replace("│", " ").split())
        assert "follows the precision" not in text
        assert "else 8-bit (fp8) for --precision fp8 on trtllm" in text, command


def test_issue_example_trtllm_fp8_on_b200_does_not_queue_for_kv():
    # Llama-3.1-70B fp8 on one B200, TensorRT-LLM, 64 clients, 1k in / 8k out: measured TTFT 0.35 s. With a 16-bit
    # KV cache (the old default) the pool holds ~34 of the 64 clients and the simulated TTFT was minutes.
    args = ["simulate", "--model", "llama-3.1-70b", "--gpu", "b200", "--precision", "fp8", "--engine", "trtllm"]
    args += ["--concurrency", "64", "--input-len", "1024", "--output-len", "8192", "--num-requests", "128", "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["ttft_s"]["mean"] < 5.0
