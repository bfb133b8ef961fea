"""--launch: real launch lines and YAML of each engine's docs read into the engine settings (issue 36 part 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infercast.errors import InfercastError
from infercast.specs.deployment import Deployment
from infercast.specs.engine import get_engine
from infercast.specs.engine_launch import EngineLaunch, Setting, parse_launch

FIXTURES = Path(__file__).parent / "fixtures" / "launch"


def _line(name: str) -> str:
    return " ".join(x for x in (FIXTURES / name).read_text().splitlines() if not x.startswith("#"))


def test_vllm_serve_line():
    launch = parse_launch(_line("vllm_serve.txt"))
    assert launch.engine == "vllm" and launch.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert (launch.tp, launch.kv_precision) == (2, "fp8")
    values = {k: v for k, (v, _) in launch.overrides.items()}
    assert values == {
        "max_num_seqs": 128,
        "max_num_batched_tokens": 4096,
        "kv_fraction": 0.85,
        "block_size": 32,
        "overlap_scheduler": False,
        "graph_max_tokens": 256,  # vLLM's capture default for 128 sequences: min(2 x 128, 512)
    }
    assert launch.warnings == ()


def test_sglang_line_names_unknown_flags():
    launch = parse_launch(_line("sglang_launch.txt"))
    assert (launch.engine, launch.tp, launch.model) == ("sglang", 2, "meta-llama/Llama-3.1-8B-Instruct")
    values = {k: v for k, (v, _) in launch.overrides.items()}
    assert values == {"max_num_seqs": 64, "max_num_batched_tokens": 4096, "kv_fraction": 0.8}
    assert any("--schedule-conservativeness" in w for w in launch.warnings)


def test_trtllm_yaml():
    launch = parse_launch(str(FIXTURES / "trtllm_extra_llm_api_options.yaml"))
    assert (launch.engine, launch.kv_precision) == ("trtllm", "fp8")
    values = {k: v for k, (v, _) in launch.overrides.items()}
    assert values == {
        "max_num_seqs": 256,
        "max_num_batched_tokens": 4096,
        "kv_fraction": 0.85,
        "scheduler": "chunked",
        "graph_max_tokens": 128,  # cuda_graph_config.max_batch_size: generation batches replayed as graphs
    }
    assert not any("enable_padding" in w for w in launch.warnings)  # padded: every batch up to 128 replays
    assert launch.attention_dp is None and not any("enable_attention_dp" in w for w in launch.warnings)


def test_trtllm_serve_line_reads_its_yaml():
    yaml = FIXTURES / "trtllm_extra_llm_api_options.yaml"
    launch = parse_launch(f"trtllm-serve meta-llama/Llama-3.1-8B-Instruct --tp_size 2 --extra_llm_api_options {yaml}")
    assert (launch.engine, launch.tp, launch.kv_precision) == ("trtllm", 2, "fp8")
    assert launch.overrides["max_num_seqs"][0] == 256
    newer = parse_launch(f"trtllm-serve meta-llama/Llama-3.1-8B-Instruct --tp_size 2 --config {yaml}")
    assert newer.overrides == launch.overrides  # --config: the newer name of --extra_llm_api_options


@pytest.mark.parametrize(
    ("line", "flag"),
    [
        ("vllm serve m --max-num-seqs lots", "--max-num-seqs"),
        ("vllm serve m --gpu-memory-utilization 1.5", "--gpu-memory-utilization"),
        ("vllm serve m --kv-cache-dtype fp6", "--kv-cache-dtype"),
        ("python -m sglang.launch_server --model-path m --tp 0", "--tp"),
        ("docker run foo", "vllm serve"),
    ],
)
def test_bad_values_name_the_flag(line, flag):
    with pytest.raises(InfercastError, match=flag):
        parse_launch(line)


def test_launch_values_reach_the_engine_and_name_their_source():
    launch = parse_launch(_line("vllm_serve.txt"))
    eng = launch.apply(get_engine("vllm"))
    dep = Deployment.resolve("llama-3.1-8b", "h100-sxm", engine=eng, kv_precision=launch.kv_precision)
    # the H100 tier (1024 / 8192) must not override the user's 128 / 4096
    assert (dep.engine.max_num_seqs, dep.engine.max_num_batched_tokens, dep.engine.block_size) == (128, 4096, 32)
    settings = EngineLaunch.of(dep, get_engine("vllm")).settings
    assert settings["max_num_seqs"].source == "user launch: --max-num-seqs 128"
    assert settings["kv_dtype"].value == "fp8"


def test_release_defaults_cite_their_source():
    dep = Deployment.resolve("llama-3.1-70b", "b200", precision="fp8", engine="trtllm")
    s = EngineLaunch.of(dep, get_engine("trtllm")).to_dict()
    assert s["kv_dtype"] == {"value": "fp8", "source": s["kv_dtype"]["source"]}
    assert s["kv_dtype"]["source"].startswith("release default")
    assert "max_batch_size default 2048" in s["max_num_seqs"]["source"]
    dep = Deployment.resolve("llama-3.1-8b", "h100-sxm", engine="vllm")
    assert EngineLaunch.of(dep, get_engine("vllm")).settings["max_num_seqs"].source.startswith("GPU tier")


def test_predict_launch_prints_settings_and_uses_them(capsys):
    from tests.cli_helpers import run, run_json

    line = _line("vllm_serve.txt")
    out = run_json(capsys, "predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--launch", line)
    settings = out["engine_settings"]
    assert settings["max_num_seqs"] == {"value": 128, "source": "user launch: --max-num-seqs 128"}
    assert out["tp"] == 2 and out["kv_precision"] == "fp8"
    code, text, _ = run(capsys, "predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm")
    assert code == 0 and "Engine settings: vllm (vLLM 0.12)" in text


def test_simulate_launch_reaches_the_simulator(capsys, tmp_path):
    from tests.cli_helpers import run, run_json

    yaml = str(FIXTURES / "trtllm_extra_llm_api_options.yaml")
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--concurrency", "8"]
    args += ["--input-len", "256", "--output-len", "16", "--launch", yaml]
    out = run_json(capsys, *args)
    assert (out["config"]["engine"], out["config"]["max_num_seqs"], out["config"]["max_num_batched_tokens"]) == (
        "trtllm",
        256,
        4096,
    )
    assert out["engine_settings"]["kv_dtype"]["value"] == "fp8"
    code, _, err = run(capsys, *args)
    assert code == 0 and "launch" not in err  # every key of the docs' example is read
    unread = tmp_path / "extra.yaml"
    unread.write_text(Path(yaml).read_text() + "stream_interval: 10\n", encoding="utf-8")
    code, _, err = run(capsys, *args[:-1], str(unread))
    assert code == 0 and "stream_interval" in err
    code, _, err = run(capsys, "simulate", "--launch", "vllm serve m --max-num-seqs zero")
    assert code == 2 and "--max-num-seqs" in err


def test_plan_launch_fixes_the_grid(capsys):
    from tests.cli_helpers import run

    line = "vllm serve x --max-num-seqs 64 --tensor-parallel-size 1 --block-size 32"
    args = ["plan", "--slo", "ttft:2000 tpot:100", "--model", "llama-3.1-8b", "--gpus", "h100-sxm", "--rate", "5"]
    args += ["--input-len", "512", "--output-len", "64", "--num-requests", "100", "--workers", "1", "--launch", line]
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    rows = json.loads(out)["candidates"]
    assert {(r["engine"], r["tp"], r["max_num_seqs"]) for r in rows} == {("vllm", 1, 64)}
    assert "block_size" in err


def test_sweep_launch_fixes_engine_tp_and_kv(capsys):
    from tests.cli_helpers import run

    line = "python -m sglang.launch_server --model-path x --tp 2 --kv-cache-dtype fp8_e4m3 --mem-fraction-static 0.8"
    args = ["sweep", "--batches", "8", "--input-lens", "512", "--output-lens", "64", "--launch", line, "--json"]
    code, out, err = run(capsys, *args)
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert {(r["engine"], r["tp"], r["kv_precision"]) for r in rows} == {("sglang", 2, "fp8")}
    assert "kv_fraction" in err


def test_settings_say_prefix_caching_is_off_when_the_run_turns_it_off(capsys):
    from tests.cli_helpers import run_json

    args = ["simulate", "--num-requests", "8", "--rate", "2", "--input-len", "64", "--output-len", "8"]
    out = run_json(capsys, *args, "--no-prefix-caching")
    assert out["engine_settings"]["prefix_caching"] == {"value": False, "source": "given (--no-prefix-caching)"}


def test_launch_flags_that_change_speed_are_never_dropped_silently(tmp_path):
    """--quantization, prefix-caching switches and TensorRT-LLM's stream_interval / CUDA-graph sizes are named."""
    from infercast.specs.engine_launch import parse_launch

    vllm = parse_launch("vllm serve meta-llama/Llama-3.1-8B --quantization fp8 --no-enable-prefix-caching")
    assert any("'--quantization fp8' sets the weight format" in w for w in vllm.warnings)
    assert any("--no-enable-prefix-caching" in w for w in vllm.warnings)
    sglang = parse_launch("python -m sglang.launch_server --model-path m --disable-radix-cache")
    assert any("--disable-radix-cache" in w for w in sglang.warnings)
    options = tmp_path / "extra.yaml"
    text = "stream_interval: 10\ncuda_graph_config:\n  max_batch_size: 64\n  enable_padding: false\n"
    options.write_text(text, encoding="utf-8")
    named = " ".join(parse_launch(str(options)).warnings)
    assert "'stream_interval'" in named and "'cuda_graph_config.enable_padding'" in named


def test_sglang_recv_interval_reaches_the_engine_and_the_simulator():
    """``--scheduler-recv-interval 30`` (the public B200 sweeps' SGLang launches at >= 16 clients) sets the engine's
    polling interval, names its source, and delays first tokens that arrive while decodes run."""
    from infercast.sim.api import config_from_keywords, run

    line = "python3 -m sglang.launch_server --model-path m --tp 8 --scheduler-recv-interval 30 --stream-interval 10"
    launch = parse_launch(line)
    assert {k: v for k, (v, _) in launch.overrides.items()} == {"recv_interval": 30}
    assert any("--stream-interval" in w for w in launch.warnings)
    eng = launch.apply(get_engine("sglang"))
    dep = Deployment.resolve("llama-3.1-8b", "h100-sxm", engine=eng)
    setting = EngineLaunch.of(dep, get_engine("sglang")).settings["recv_interval"]
    assert (setting.value, setting.source) == (30, "user launch: --scheduler-recv-interval 30")
    lengths = dict(input_len="uniform:400,512", output_len="uniform:100,128")  # clients drift apart
    kw = dict(engine="sglang", concurrency=16, num_requests=64, seed=3, **lengths)
    polled = run(config_from_keywords("llama-3.1-8b", "h100-sxm", recv_interval=30, **kw))
    every = run(config_from_keywords("llama-3.1-8b", "h100-sxm", **kw))
    assert polled.summary.to_dict()["ttft_s"]["mean"] > 1.3 * every.summary.to_dict()["ttft_s"]["mean"]


def test_sglang_runs_its_overlap_scheduler_unless_the_launch_turns_it_off():
    """SGLang's overlap scheduler is on by default (``disable_overlap_schedule`` False); ``--disable-overlap-schedule``
    turns the preset's off and names its source."""
    assert get_engine("sglang").overlap_scheduler
    launch = parse_launch("python3 -m sglang.launch_server --model-path m --disable-overlap-schedule")
    eng = launch.apply(get_engine("sglang"))
    dep = Deployment.resolve("llama-3.1-8b", "h100-sxm", engine=eng)
    setting = EngineLaunch.of(dep, get_engine("sglang")).settings["async_scheduling"]
    assert (setting.value, setting.source) == (False, "user launch: --disable-overlap-schedule")


def test_cuda_graph_launch_settings_reach_the_step_cost(tmp_path):
    """The largest step replayed as a CUDA graph is the launch's: vLLM ``--enforce-eager`` (none: every kernel
    launched eagerly, no graph memory), ``--max-cudagraph-capture-size``, or vLLM's default for ``--max-num-seqs``
    (min(2 x seqs, 512)); SGLang ``--cuda-graph-max-bs`` / ``--disable-cuda-graph``; TensorRT-LLM
    ``cuda_graph_config`` (``null``: none). Without one the cost profile's release default holds."""
    from infercast.cost.batch import StepBatch
    from infercast.cost.step import cost_model

    def resolved(line: str, engine: str) -> tuple[Deployment, EngineLaunch]:
        eng = parse_launch(line).apply(get_engine(engine))
        dep = Deployment.resolve("llama-3.1-8b", "h100-sxm", engine=eng)
        return dep, EngineLaunch.of(dep, get_engine(engine))

    decode = StepBatch.uniform(decode_seqs=64, context=1000)
    plain, plain_launch = resolved("vllm serve m", "vllm-0.14")
    eager, eager_launch = resolved("vllm serve m --enforce-eager", "vllm-0.14")
    assert plain_launch.settings["cuda_graphs"].value == "tokens"  # up to the cost profile's size
    assert eager_launch.settings["cuda_graphs"].value == "off" and eager.engine.cuda_graph_bytes == 0
    assert cost_model(eager).step_time(decode)[0] > cost_model(plain).step_time(decode)[0]
    few, few_launch = resolved("vllm serve m --max-num-seqs 16", "vllm-0.14")
    graphs = few_launch.settings["cuda_graphs"]
    assert few.engine.graph_max_tokens == 32 and graphs.value == "tokens <= 32" and "capture default" in graphs.source
    given = resolved("vllm serve m --max-num-seqs 16 --max-cudagraph-capture-size 2048", "vllm-0.14")[0]
    assert given.engine.graph_max_tokens == 2048
    for sizes in ("1 2 4 384", "1,2,4,384"):
        listed = parse_launch(f"vllm serve m --cuda-graph-sizes {sizes} --max-num-seqs 4")
        assert listed.overrides["graph_max_tokens"][0] == 384 and listed.model == "m" and not listed.warnings
    with pytest.raises(InfercastError, match="--cuda-graph-sizes must list positive integers"):
        parse_launch("vllm serve m --cuda-graph-sizes ,")
    assert resolved("python -m sglang.launch_server --cuda-graph-max-bs 48", "sglang")[0].engine.graph_max_tokens == 48
    assert resolved("python -m sglang.launch_server --disable-cuda-graph", "sglang")[0].engine.graph_max_tokens == 0
    options = tmp_path / "extra.yaml"
    options.write_text("cuda_graph_config:\n  batch_sizes: [1, 2, 4, 96]\n", encoding="utf-8")
    assert parse_launch(str(options)).overrides["graph_max_tokens"][0] == 96
    options.write_text("cuda_graph_config: null\n", encoding="utf-8")
    assert parse_launch(str(options)).overrides["graph_max_tokens"][0] == 0


def test_a_trtllm_moe_config_backend_names_its_moe_kernel(tmp_path: Path) -> None:
    """``moe_config.backend: TRITON`` (InferenceX's gpt-oss H200 configs) runs MXFP4 experts through OpenAI's Triton
    kernels, ``TRTLLM`` (its B200 configs) through the trtllm-gen kernels, ``DEEPGEMM`` through DeepGEMM's; CUTLASS
    is the release default; another backend is named as not modelled."""
    options = tmp_path / "gptoss-config.yml"
    options.write_text("moe_config:\n  backend: TRITON\nprint_iter_log: true\n", encoding="utf-8")
    parsed = parse_launch(str(options))
    assert parsed.overrides["moe_backend"] == ("triton", "moe_config.backend: TRITON") and not parsed.warnings
    options.write_text("moe_config:\n  backend: TRTLLM\n", encoding="utf-8")
    assert parse_launch(str(options)).overrides["moe_backend"] == ("trtllm", "moe_config.backend: TRTLLM")
    options.write_text("moe_config:\n  backend: DEEPGEMM\n", encoding="utf-8")
    assert parse_launch(str(options)).overrides["moe_backend"] == ("deepgemm", "moe_config.backend: DEEPGEMM")
    options.write_text("moe_config:\n  backend: CUTLASS\n", encoding="utf-8")
    assert "moe_backend" not in parse_launch(str(options)).overrides and not parse_launch(str(options)).warnings
    options.write_text("moe_config:\n  backend: WIDEEP\n", encoding="utf-8")
    assert parse_launch(str(options)).warnings == (
        "launch: 'moe_config.backend: WIDEEP' is not modelled by infercast (the prediction runs without it)",
    )


def test_a_vllm_lines_environment_picks_its_moe_kernel():
    """``VLLM_MXFP4_USE_MARLIN=1 vllm serve ...`` (vllm/envs.py reads it as an integer): the engine's MoE kernel is
    Marlin, named in the settings with the variable as its source; 0 keeps the default; other variables are named
    in a warning; a value vLLM would refuse is refused naming the variable. FlashInfer's and DeepGEMM's FP8 MoE
    both off: vLLM's Triton kernel."""
    for line in ("VLLM_MXFP4_USE_MARLIN=1 vllm serve m --max-num-seqs 8", "env VLLM_MXFP4_USE_MARLIN=1 vllm serve m"):
        parsed = parse_launch(line)
        assert parsed.overrides["moe_backend"] == ("marlin", "VLLM_MXFP4_USE_MARLIN=1") and parsed.model == "m"
        eng = parsed.apply(get_engine("vllm-0.14"))
        settings = EngineLaunch.of(Deployment.resolve("gpt-oss-120b", "h200", engine=eng)).settings
        assert settings["moe_backend"] == Setting("marlin", "user launch: VLLM_MXFP4_USE_MARLIN=1")
    off = parse_launch("VLLM_MXFP4_USE_MARLIN=0 CUDA_VISIBLE_DEVICES=0,1 vllm serve m")
    assert "moe_backend" not in off.overrides
    assert off.warnings == (
        "launch: 'CUDA_VISIBLE_DEVICES=0,1' is not modelled by infercast (the prediction runs without it)",
    )
    assert "moe_backend" not in EngineLaunch.of(Deployment.resolve("gpt-oss-120b", "h200", engine="vllm-0.14")).settings
    with pytest.raises(InfercastError, match="VLLM_MXFP4_USE_MARLIN must be 0 or 1") as caught:
        parse_launch("VLLM_MXFP4_USE_MARLIN=yes vllm serve m")
    assert caught.value.field == "launch"
    # block-FP8 experts fall back to vLLM's Triton kernel only with FlashInfer's and DeepGEMM's both off
    both = parse_launch("VLLM_USE_FLASHINFER_MOE_FP8=0 VLLM_MOE_USE_DEEP_GEMM=0 vllm serve m")
    assert both.overrides["moe_backend"][0] == "triton" and not both.warnings
    alone = parse_launch("VLLM_USE_FLASHINFER_MOE_FP8=0 VLLM_USE_DEEP_GEMM=1 vllm serve m")
    assert "moe_backend" not in alone.overrides
    assert alone.warnings == (
        "launch: 'VLLM_USE_FLASHINFER_MOE_FP8=0' is not modelled by infercast (the prediction runs without it)",
    )


def test_trtllm_batch_waiting_reaches_the_engine_and_holds_prompts(tmp_path):
    """``batch_wait_timeout_iters`` / ``batch_wait_max_tokens_ratio`` (the public Llama-3.1-70B sweeps' TensorRT-LLM
    options at 1k/1k below TP 8) set the engine's batch waiting, name their source and delay first tokens."""
    from infercast.sim.api import config_from_keywords, run

    options = tmp_path / "llama-config.yml"
    options.write_text("batch_wait_max_tokens_ratio: 0.9\nbatch_wait_timeout_iters: 20\nstream_interval: 10\n")
    launch = parse_launch(str(options))
    assert {k: v for k, (v, _) in launch.overrides.items()} == {"batch_wait_iters": 20, "batch_wait_ratio": 0.9}
    eng = launch.apply(get_engine("trtllm"))
    dep = Deployment.resolve("llama-3.1-8b", "h100-sxm", engine=eng)
    setting = EngineLaunch.of(dep, get_engine("trtllm")).settings["batch_wait"]
    assert setting.value == "20 steps / 0.9 of the budget" and setting.source.startswith("user launch")
    lengths = dict(input_len="uniform:800,1024", output_len="uniform:100,128")
    kw = dict(engine="trtllm", concurrency=4, num_requests=40, seed=3, **lengths)
    held = run(config_from_keywords("llama-3.1-8b", "h100-sxm", batch_wait_iters=20, batch_wait_ratio=0.9, **kw))
    every = run(config_from_keywords("llama-3.1-8b", "h100-sxm", **kw))
    assert held.summary.to_dict()["ttft_s"]["mean"] > 1.5 * every.summary.to_dict()["ttft_s"]["mean"]
    with pytest.raises(InfercastError, match="batch_wait_max_tokens_ratio"):
        options.write_text("batch_wait_max_tokens_ratio: 1.5\n")
        parse_launch(str(options))


def test_trtllm_attention_dp_balancing_is_read_from_the_yaml(tmp_path):
    """``attention_dp_config`` with ``enable_balance`` (the public DeepSeek-R1 sweeps' TensorRT-LLM options with
    attention DP) sets the balancer's timeout; its default is 50 steps and a batching wait is named unmodelled."""
    options = tmp_path / "dsr1-fp8.yml"
    options.write_text(
        "enable_attention_dp: true\nattention_dp_config:\n  batching_wait_iters: 0\n  enable_balance: true\n"
        "  timeout_iters: 60\n"
    )
    launch = parse_launch(str(options))
    assert launch.overrides["adp_balance_iters"][0] == 60
    options.write_text("attention_dp_config:\n  enable_balance: true\n  batching_wait_iters: 10\n")
    launch = parse_launch(str(options))
    assert launch.overrides["adp_balance_iters"][0] == 50
    assert any("attention_dp_config.batching_wait_iters" in w for w in launch.warnings)
    eng = launch.apply(get_engine("trtllm"))
    dep = Deployment.resolve("gpt-oss-20b", "h100-sxm", engine=eng, tp=1, attention_dp=2, ep=2)
    assert EngineLaunch.of(dep, get_engine("trtllm")).settings["adp_balance"].value == "50 steps"


@pytest.mark.parametrize(
    ("flags", "budget"),
    [
        ("--chunked-prefill-size 32768 --max-prefill-tokens 32768", 32768),  # the public B200 sweeps' DeepSeek-R1
        ("--chunked-prefill-size 32768", 16384),  # --max-prefill-tokens defaults to 16384
        ("--chunked-prefill-size 8192 --max-prefill-tokens 16384", 8192),
    ],
)
def test_sglang_prefill_batches_take_the_smaller_of_chunk_and_max_prefill_tokens(flags, budget):
    launch = parse_launch(f"python3 -m sglang.launch_server --model-path m {flags}")
    assert launch.overrides["max_num_batched_tokens"][0] == budget
    assert not launch.warnings


def test_sglang_max_prefill_tokens_alone_is_named_not_dropped():
    launch = parse_launch("python3 -m sglang.launch_server --model-path m --max-prefill-tokens 8192")
    assert "max_num_batched_tokens" not in launch.overrides
    assert any("--max-prefill-tokens 8192" in w for w in launch.warnings)


@pytest.mark.parametrize(
    ("launch", "drafts", "mtp"),
    [
        # the public DeepSeek-R1 sweeps' TensorRT-LLM MTP options (dsr1_fp8_b200_trt_mtp.sh)
        ("speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: 3\n", 3, True),
        ("speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 4\n", 4, False),
        ("""vllm serve m --speculative-config '{"method": "mtp", "num_speculative_tokens": 2}'""", 2, True),
        (
            "python3 -m sglang.launch_server --model-path m --speculative-algorithm EAGLE --speculative-num-steps 3 "
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
            3,
            False,
        ),
    ],
)
def test_speculative_decoding_is_read_from_each_engines_launch(tmp_path, launch, drafts, mtp):
    if launch.startswith("speculative_config"):
        path = tmp_path / "spec.yml"
        path.write_text(launch)
        launch = str(path)
    parsed = parse_launch(launch)
    assert parsed.spec_tokens == drafts and parsed.drafts_with_mtp == mtp and not parsed.warnings


def test_a_launch_that_drafts_shortens_the_simulated_tpot(tmp_path):
    """``simulate --launch`` runs the launch's MTP drafts (acceptance at the CLI default) and says so; a bad
    draft length is an error naming the option (the CLI's entry point prints it in one line, exit 2)."""
    from typer.testing import CliRunner

    from infercast.cli import app

    options = tmp_path / "mtp.yml"
    options.write_text("speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: 3\n")
    base = ["simulate", "--model", "llama-3.1-8b", "--concurrency", "4", "--num-requests", "16", "--json"]
    base += ["--input-len", "512", "--output-len", "128"]
    plain = CliRunner().invoke(app, base)
    drafted = CliRunner().invoke(app, [*base, "--launch", str(options)])
    note = " ".join(drafted.stderr.split())  # as printed, wrapped to the terminal
    assert drafted.exit_code == 0 and "speculative decoding with 3 draft tokens" in note
    assert "each draft one MTP layer (1/32 of a decode step)" in note  # Llama-3.1-8B: 32 layers
    tpot = [json.loads(r.stdout)["tpot_s"]["mean"] for r in (plain, drafted)]
    assert tpot[1] < 0.8 * tpot[0]
    options.write_text("speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: 0\n")
    bad = CliRunner().invoke(app, [*base, "--launch", str(options)])
    assert isinstance(bad.exception, InfercastError) and "num_nextn_predict_layers" in str(bad.exception)


@pytest.mark.parametrize(
    ("line", "layout"),
    [
        # vLLM: TP 8 with expert parallelism over those 8 GPUs (vLLM's DeepSeek recipe); DP attention 8 x TP 1
        ("vllm serve deepseek-ai/DeepSeek-R1 -tp 8 --enable-expert-parallel", (8, 8, None)),
        ("vllm serve deepseek-ai/DeepSeek-R1 --data-parallel-size 8 --enable-expert-parallel", (None, 8, 8)),
        ("vllm serve m --tensor-parallel-size 2 --data-parallel-size 4", (2, None, 4)),
        # SGLang counts every GPU in --tp: --dp 8 --enable-dp-attention makes 8 ranks of TP 1
        ("python -m sglang.launch_server --model-path m --tp 8 --ep-size 8", (8, 8, None)),
        ("python -m sglang.launch_server --model-path m --tp 8 --dp 8 --enable-dp-attention --ep 8", (1, 8, 8)),
        ("trtllm-serve m --tp_size 8 --ep_size 4", (8, 4, None)),
    ],
)
def test_expert_and_attention_data_parallelism_are_read_from_each_engines_launch(line, layout):
    launch = parse_launch(line)
    assert (launch.tp, launch.ep, launch.attention_dp) == layout
    assert not launch.warnings


def test_a_trtllm_yaml_with_attention_dp_splits_its_tp_into_ranks(tmp_path):
    """``enable_attention_dp`` makes every TP GPU an attention rank (TP 1 each); alone, without a TP, it asks for
    --attention-dp; SGLang's --enable-dp-attention without --dp, and a --dp of replicas, are named."""
    options = tmp_path / "adp.yml"
    options.write_text("enable_attention_dp: true\nmoe_expert_parallel_size: 8\n")
    launch = parse_launch(f"trtllm-serve m --tp_size 8 --extra_llm_api_options {options}")
    assert (launch.tp, launch.ep, launch.attention_dp) == (1, 8, 8)
    alone = parse_launch(str(options))
    assert alone.attention_dp is None and any("--attention-dp" in w for w in alone.warnings)
    replicas = parse_launch("python -m sglang.launch_server --model-path m --tp 4 --dp 2")
    assert replicas.attention_dp is None and any("--replicas" in w for w in replicas.warnings)
    with pytest.raises(InfercastError, match="--dp"):
        parse_launch("python -m sglang.launch_server --model-path m --tp 8 --enable-dp-attention")


def test_predict_and_simulate_run_the_launchs_expert_and_attention_layout(capsys):
    from tests.cli_helpers import run_json

    line = "vllm serve m --data-parallel-size 2 --enable-expert-parallel --max-num-seqs 64"
    out = run_json(capsys, "predict", "--model", "gpt-oss-20b", "--gpu", "h100-sxm", "--launch", line)
    assert (out["tp"], out["ep"], out["attention_dp"]) == (1, 2, 2)
    given = run_json(capsys, "predict", "--model", "gpt-oss-20b", "--gpu", "h100-sxm", "--ep", "1", "--launch", line)
    assert given["ep"] == 2  # --ep 1 is the option's default: the launch's layout stands
    args = ["simulate", "--model", "gpt-oss-20b", "--gpu", "h100-sxm", "--concurrency", "4"]
    sim = run_json(capsys, *args, "--input-len", "128", "--output-len", "8", "--launch", line)
    assert (sim["config"]["ep"], sim["config"]["attention_dp"]) == (2, 2)


def test_a_capacity_policy_other_than_no_evict_is_named_once_on_both_ways_in(tmp_path):
    options = tmp_path / "mu.yml"
    options.write_text("scheduler_config:\n  capacity_scheduler_policy: MAX_UTILIZATION\n")
    for line in (str(options), f"trtllm-serve m --tp_size 2 --extra_llm_api_options {options}"):
        (note,) = parse_launch(line).warnings
        assert note == (
            "launch: 'scheduler_config.capacity_scheduler_policy: MAX_UTILIZATION' is simulated as "
            "GUARANTEED_NO_EVICT (requests admitted only with room to end)"
        )


def test_the_moe_kernels_a_launch_may_pick_are_one_list():
    """EngineSpec.moe_backend's choices are MOE_BACKENDS, which records and the sweep launch file check against."""
    import typing

    from infercast.specs.engine import MOE_BACKENDS, EngineSpec

    literal = typing.get_args(EngineSpec.model_fields["moe_backend"].annotation)[0]
    assert typing.get_args(literal) == MOE_BACKENDS


def test_trtllm_piecewise_graphs_cover_prompt_steps(tmp_path):
    """``torch_compile_config.enable_piecewise_cuda_graph`` (the InferenceX DeepSeek-R1 B200 scripts at higher
    loads) replays steps with prompt tokens as graphs, up to the largest ``capture_num_tokens``; without the list,
    up to the generation graphs' batch size (TensorRT-LLM's TorchCompileConfig)."""
    options = tmp_path / "extra.yaml"
    text = (
        "cuda_graph_config:\n  enable_padding: true\n  max_batch_size: 64\ntorch_compile_config:\n"
        "  capture_num_tokens: [1, 2, 4, 256, 512, 8192]\n  enable_piecewise_cuda_graph: true\n"
    )
    options.write_text(text, encoding="utf-8")
    values = {k: v for k, (v, _) in parse_launch(str(options)).overrides.items()}
    assert (values["cuda_graphs"], values["graph_max_tokens"]) == ("tokens", 8192)
    options.write_text(text.replace("  capture_num_tokens: [1, 2, 4, 256, 512, 8192]\n", ""), encoding="utf-8")
    values = {k: v for k, (v, _) in parse_launch(str(options)).overrides.items()}
    assert (values["cuda_graphs"], values["graph_max_tokens"]) == ("tokens", 64)
    unsized = "torch_compile_config:\n  enable_piecewise_cuda_graph: true\n"
    options.write_text(unsized, encoding="utf-8")  # the release default's size (the cost profile's)
    values = {k: v for k, (v, _) in parse_launch(str(options)).overrides.items()}
    assert values == {"cuda_graphs": "tokens"}
    options.write_text(text.replace("true\n", "false\n").replace("enable_padding: false", "enable_padding: true"))
    values = {k: v for k, (v, _) in parse_launch(str(options)).overrides.items()}
    assert "cuda_graphs" not in values and values["graph_max_tokens"] == 64


def test_trtllm_prefill_graph_backend_keys(tmp_path):
    """TensorRT-LLM's newer top-level ``prefill_cuda_graph_backend`` (piecewise or breakable) and
    ``prefill_capture_num_tokens`` read as the deprecated ``torch_compile_config`` keys do; a bad backend is one
    line naming the allowed ones, and capture sizes with prefill graphs off are named as not modelled."""
    options = tmp_path / "extra.yaml"
    for backend in ("piecewise", "breakable"):
        options.write_text(f"prefill_cuda_graph_backend: {backend}\nprefill_capture_num_tokens: [1, 64, 3072]\n")
        values = {k: v for k, (v, _) in parse_launch(str(options)).overrides.items()}
        assert (values["cuda_graphs"], values["graph_max_tokens"]) == ("tokens", 3072)
    options.write_text("prefill_cuda_graph_backend: piecewise\n")
    assert {k: v for k, (v, _) in parse_launch(str(options)).overrides.items()} == {"cuda_graphs": "tokens"}
    options.write_text("prefill_capture_num_tokens: [64]\n")
    launch = parse_launch(str(options))
    assert launch.overrides == {} and any("prefill_capture_num_tokens" in w for w in launch.warnings)
    options.write_text("prefill_cuda_graph_backend: full\n")
    with pytest.raises(InfercastError, match="disabled, piecewise, breakable"):
        parse_launch(str(options))


def test_sglang_piecewise_graphs_cover_prompt_steps():
    """SGLang ``--enable-piecewise-cuda-graph`` replays prompt steps as graphs up to
    ``--piecewise-cuda-graph-max-tokens`` (default 4096) or the largest ``--piecewise-cuda-graph-tokens``, and
    never below the decode graphs' ``--cuda-graph-max-bs``; sizes without the switch are named in a warning."""
    base = "python -m sglang.launch_server --model-path x --tp 8 "

    def values(line: str) -> dict:
        return {k: v for k, (v, _) in parse_launch(base + line).overrides.items()}

    assert values("--enable-piecewise-cuda-graph") == {"cuda_graphs": "tokens", "graph_max_tokens": 4096}
    wide = values("--enable-piecewise-cuda-graph --piecewise-cuda-graph-max-tokens 256 --cuda-graph-max-bs 512")
    assert wide == {"cuda_graphs": "tokens", "graph_max_tokens": 512}
    listed = values("--piecewise-cuda-graph-tokens 16 256 2048 --enable-piecewise-cuda-graph")
    assert listed["graph_max_tokens"] == 2048
    off = parse_launch(base + "--piecewise-cuda-graph-max-tokens 8192")
    assert off.overrides == {} and "piecewise graphs that are off" in off.warnings[0]
    eager = parse_launch(base + "--enable-piecewise-cuda-graph --disable-cuda-graph")
    assert {k: v for k, (v, _) in eager.overrides.items()} == {"graph_max_tokens": 0}
    assert values("--disable-piecewise-cuda-graph") == {}
    assert values("--cuda-graph-bs 1 2 4 8 160") == {"graph_max_tokens": 160}


def test_vllm_compilation_config_graph_keys():
    """vLLM ``--compilation-config`` (or ``-O``): ``cudagraph_mode`` NONE launches eagerly, FULL_DECODE_ONLY graphs
    decode-only steps alone, the capture size comes from ``max_cudagraph_capture_size`` or the largest of
    ``cudagraph_capture_sizes``; other keys are named, a bad mode is one line naming the allowed ones."""

    def launch(config: str):
        return parse_launch(f"vllm serve meta-llama/Llama-3.1-8B-Instruct --compilation-config '{config}'")

    def values(config: str) -> dict:
        return {k: v for k, (v, _) in launch(config).overrides.items()}

    assert values('{"cudagraph_mode": "FULL_DECODE_ONLY"}') == {"cuda_graphs": "decode"}
    assert values('{"cudagraph_mode": "PIECEWISE", "max_cudagraph_capture_size": 32}') == {"graph_max_tokens": 32}
    assert values('{"cudagraph_mode": "NONE"}') == {"graph_max_tokens": 0}
    sized = launch('{"level": 0, "cudagraph_capture_sizes": [1, 2, 4, 8]}')
    assert sized.overrides["graph_max_tokens"][0] == 8 and "--compilation-config level" in sized.warnings[0]
    assert "level" in parse_launch("vllm serve x -O 3").warnings[0]
    with pytest.raises(InfercastError, match="NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE"):
        launch('{"cudagraph_mode": "BOGUS"}')
    with pytest.raises(InfercastError, match="JSON object"):
        launch("notjson")
