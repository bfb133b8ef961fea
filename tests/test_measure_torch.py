"""The PyTorch measurement path: cached serving paths reproduce a cache-free forward pass, and
`infercast measure` writes readable records (CPU only; skipped when torch is absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from dataclasses import replace  # noqa: E402

import numpy as np  # noqa: E402

from infercast.calibrate.predict import predict_record  # noqa: E402
from infercast.calibrate.profile_fit import fit  # noqa: E402
from infercast.cli import main as cli_main  # noqa: E402
from infercast.cli.measure_cmd import parse_int_list  # noqa: E402
from infercast.errors import InfercastError  # noqa: E402
from infercast.harness import __main__ as measure_main  # noqa: E402
from infercast.harness.runner import MeasureOptions, compare_records, extrapolate_layers, run_measure  # noqa: E402
from infercast.harness.timing import Timer, command_line, detect_gpu_id  # noqa: E402
from infercast.harness.torch_attention import make_plan  # noqa: E402
from infercast.harness.torch_ffn import MoEFFN  # noqa: E402
from infercast.harness.torch_model import TransformerModel, is_sliding_layer, truncated_spec  # noqa: E402
from infercast.records.readers import read_records  # noqa: E402
from infercast.records.record import Record, write_records  # noqa: E402
from infercast.specs.model import MLASpec, ModelSpec, MoESpec  # noqa: E402
from tests.tiny_models import TINY  # noqa: E402

VOCAB = 97
_BASE = {**TINY, "vocab_size": VOCAB, "max_context": 256}


def _spec(**over: object) -> ModelSpec:
    return ModelSpec(**{**_BASE, **over})


SPECS = {
    "gqa": _spec(qk_norm=True, qkv_bias=True, o_bias=True),
    "mqa-plain-gelu": _spec(
        num_kv_heads=1,
        gated_ffn=False,
        activation="gelu_pytorch_tanh",
        mlp_bias=True,
        tie_word_embeddings=True,
        norms_per_layer=4,
    ),
    "sliding": _spec(num_layers=3, sliding_window=4, num_sliding_layers=2),
    "moe": _spec(
        num_layers=3,
        moe=MoESpec(
            num_experts=8, experts_per_token=2, expert_intermediate_size=32, num_shared_experts=1, num_dense_layers=1
        ),
    ),
    "mla": _spec(
        num_kv_heads=4,
        mla=MLASpec(q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16),
    ),
}
ATOL = 2e-5


@pytest.fixture(scope="module", params=list(SPECS))
def model(request: pytest.FixtureRequest) -> TransformerModel:
    return TransformerModel(SPECS[request.param], precision="fp32", seed=3)


def _tokens(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def test_prefill_then_cached_decode_equals_full_forward(model: TransformerModel) -> None:
    tokens = _tokens(2, 13)
    reference = model(tokens)
    model.allocate_cache(2, 16)
    steps = [model.prefill(tokens[:, :7], all_logits=True)]
    for i in range(7, 13):
        steps.append(model.decode(tokens[:, i], [i, i])[:, None])
    torch.testing.assert_close(torch.cat(steps, dim=1), reference, atol=ATOL, rtol=1e-5)


def test_chunked_prefill_equals_one_shot(model: TransformerModel) -> None:
    tokens = _tokens(2, 11, seed=1)
    model.allocate_cache(2, 16)
    one_shot = model.prefill(tokens, all_logits=True)
    model.allocate_cache(2, 16)
    first = model.prefill(tokens[:, :5], all_logits=True)
    second = model.prefill(tokens[:, 5:], [5, 5], all_logits=True)
    torch.testing.assert_close(torch.cat([first, second], dim=1), one_shot, atol=ATOL, rtol=1e-5)
    torch.testing.assert_close(one_shot, model(tokens), atol=ATOL, rtol=1e-5)


def test_ragged_batch_matches_each_sequence_alone(model: TransformerModel) -> None:
    """Sequences with different cached lengths, batched in one decode step and one prefill chunk."""
    tokens = _tokens(3, 14, seed=2)
    lens = [3, 9, 6]
    model.allocate_cache(3, 16)
    for row, n in enumerate(lens):
        model.prefill(tokens[row : row + 1, :n], slot=row)
    chunk = torch.stack([tokens[row, n : n + 3] for row, n in enumerate(lens)])
    chunk_logits = model.prefill(chunk, lens, all_logits=True)
    nxt = [n + 3 for n in lens]
    step = model.decode(torch.stack([tokens[row, n] for row, n in enumerate(nxt)]), nxt)
    for row, n in enumerate(lens):
        alone = model(tokens[row : row + 1, : n + 4])[0]
        torch.testing.assert_close(chunk_logits[row], alone[n : n + 3], atol=ATOL, rtol=1e-5)
        torch.testing.assert_close(step[row], alone[n + 3], atol=ATOL, rtol=1e-5)


def test_sliding_window_masks_old_tokens() -> None:
    """Inside the window the logits equal full attention's; beyond it they differ (the mask is applied)."""
    spec = SPECS["sliding"]
    windowed = TransformerModel(spec, precision="fp32", seed=5)
    full = TransformerModel(
        spec.model_copy(update={"sliding_window": None, "num_sliding_layers": 0}), precision="fp32", seed=5
    )
    tokens = _tokens(1, 10, seed=4)
    a, b = windowed(tokens), full(tokens)
    window = spec.sliding_window
    torch.testing.assert_close(a[:, :window], b[:, :window])
    assert (a[:, window:] - b[:, window:]).abs().max() > 1e-3
    assert [is_sliding_layer(spec, i) for i in range(3)] == [True, True, False]


def test_moe_grouped_gemm_equals_per_expert_loop() -> None:
    moe_model = TransformerModel(SPECS["moe"], precision="fp32", seed=7)
    ffn = moe_model.layers[1].ffn
    assert isinstance(ffn, MoEFFN)
    x = torch.randn(2, 5, 64, generator=torch.Generator().manual_seed(0))
    experts, weights = ffn.route(x.reshape(-1, 64))
    assert experts.shape == (10, 2) and torch.allclose(weights.sum(-1), torch.ones(10))
    grouped = ffn(x)
    ffn.use_grouped = False
    try:
        torch.testing.assert_close(ffn(x), grouped, atol=1e-5, rtol=1e-5)
    finally:
        ffn.use_grouped = True
    # the routed output is not just the shared expert's
    assert (grouped - ffn.shared(x)).abs().max() > 1e-3


def test_bf16_activations_stay_finite() -> None:
    spec = _spec(
        num_layers=6,
        hidden_size=256,
        num_attention_heads=8,
        num_kv_heads=2,
        head_dim=32,
        intermediate_size=512,
        vocab_size=1000,
    )
    m = TransformerModel(spec, precision="bf16")
    m.allocate_cache(1, 40)
    logits = m.prefill(torch.randint(0, 1000, (1, 32)), all_logits=True)
    assert torch.isfinite(logits).all() and 0.3 < logits.float().std() < 3


def test_plans_use_masks_only_where_needed() -> None:
    decode = make_plan([7, 7], 1)
    assert not decode.full_masked and not decode.full_causal and decode.hi == 8
    fresh = make_plan([0, 0], 5)
    assert fresh.full_causal and not fresh.full_masked
    assert make_plan([4, 4], 3).full_masked  # chunk on a cached prefix: causal offset needs a mask
    assert make_plan([2, 6], 1).full_masked and make_plan([2, 6], 1).hi == 7
    sliding = make_plan([10], 1, window=4)
    assert sliding.sliding_lo == 7 and not sliding.sliding_masked
    assert make_plan([3], 1, hi=20, force_mask=True).full_masked
    with pytest.raises(ValueError):
        make_plan([5], 1, hi=3)


def test_fp8_and_bad_layers_are_clear_errors() -> None:
    if torch.cuda.is_available():
        pytest.skip("CPU-only check")
    with pytest.raises(InfercastError, match="compute capability"):
        TransformerModel(SPECS["gqa"], precision="fp8")
    with pytest.raises(InfercastError, match="layers"):
        TransformerModel(SPECS["gqa"], num_layers=5)


# ----- the measure command ----------------------------------------------------------------------------------
@pytest.fixture
def tiny_config(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-qwen3" / "config.json"
    path.parent.mkdir()
    path.write_text(
        json.dumps(
            {
                "model_type": "qwen3",
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "head_dim": 16,
                "intermediate_size": 128,
                "vocab_size": 256,
                "max_position_embeddings": 1024,
                "tie_word_embeddings": False,
            }
        )
    )
    return path


def _cli(capsys: pytest.CaptureFixture[str], *args: str, entry=cli_main) -> tuple[int, str, str]:
    """Run a command line (``infercast ...`` by default) and return its exit status, stdout and stderr."""
    try:
        entry(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _tiny_args(config: Path, out: Path, suite: str = "full") -> list[str]:
    return [
        "--model",
        str(config),
        "--suite",
        suite,
        "--device",
        "cpu",
        "--prefill-lens",
        "8,16",
        "--batches",
        "1:2",
        "--contexts",
        "8,24",
        "--output-len",
        "4",
        "--repeats",
        "2",
        "--warmup",
        "1",
        "--out",
        str(out),
        "--json",
    ]


def test_measure_command_writes_readable_records(
    tiny_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "m.csv"
    code, stdout, err = _cli(capsys, "measure", *_tiny_args(tiny_config, out))
    assert code == 0, err
    payload = json.loads(stdout)
    records = read_records(out)
    assert len(records) == len(payload["records"])
    kinds = {r.kind for r in records}
    assert kinds == {"prefill_step", "decode_step", "ttft", "tpot", "gemm", "op", "hbm_copy", "launch_overhead"}
    # a config.json model is recorded by its path, so `validate` can rebuild it
    assert all(r.value > 0 and r.engine == "torch" and r.model == str(tiny_config) and r.gpu == "cpu" for r in records)
    assert all(r.source for r in records)  # the command line that produced them
    assert all(r.torch_version == torch.__version__ and r.timestamp for r in records)
    prefill = {(r.batch, r.input_len) for r in records if r.kind == "prefill_step"}
    assert prefill == {(1, 8), (1, 16), (2, 8), (2, 16)}  # --batches 1:2 is a range, as everywhere in the CLI
    assert {(r.batch, r.context) for r in records if r.kind == "decode_step"} == {(1, 8), (1, 24), (2, 8), (2, 24)}
    gemms = {r.op for r in records if r.kind == "gemm"}
    assert {"qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head", "peak_matmul"} <= gemms
    qkv = next(r for r in records if r.op == "qkv_proj")
    assert (qkv.k, qkv.n) == (64, (4 + 2 * 2) * 16)
    copy = next(r for r in records if r.kind == "hbm_copy")
    assert copy.bytes == 2 * 16 * 2**20
    # the CSV says how it was timed (on the CPU: no L2 flush)
    header = [line for line in out.read_text().splitlines() if line.startswith("# timing:")]
    assert header == [f"# timing: {payload['timing']}"] and "median of 2 timed calls" in header[0]
    assert "no L2 flush" in payload["timing"]


def test_module_entry_point_is_the_same_command(
    tiny_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m infercast.harness run` takes the same options and list syntax and prints the same JSON."""
    out = tmp_path / "m.csv"
    args = _tiny_args(tiny_config, out, suite="quick")
    code, stdout, err = _cli(capsys, "run", *args, entry=measure_main.main)
    assert code == 0, err
    via_module = json.loads(stdout)
    code, stdout, err = _cli(capsys, "measure", *args)
    assert code == 0, err
    via_cli = json.loads(stdout)
    assert set(via_module) == set(via_cli)
    shape = [(r["kind"], r["batch"], r["input_len"], r["context"]) for r in via_cli["records"]]
    assert [(r["kind"], r["batch"], r["input_len"], r["context"]) for r in via_module["records"]] == shape
    assert {r["batch"] for r in via_module["records"] if r["kind"] == "decode_step"} == {1, 2}


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--repeats", "0"], "repeats: must be an integer >= 1"),
        (["--repeats", "-2"], "repeats: must be an integer >= 1"),
        (["--warmup", "-1"], "warmup: must be an integer >= 0"),
        (["--output-len", "0"], "output-len: must be an integer >= 2"),
        (["--output-len", "-5"], "output-len: must be an integer >= 2"),
        (["--max-prefill-tokens", "0"], "max-prefill-tokens: must be an integer >= 1"),
        (["--batches", "0,4"], "batches"),
        (["--gpu", "h100-sxm"], "this run is on the CPU"),
        (["--precision", "fp8"], "compute capability >= 8.9; this run is on the CPU"),
        (["--suite", "fast"], "suite"),
        (["--extrapolate-from", "1"], "two layer counts"),
    ],
)
def test_measure_user_errors_exit_2_with_one_line(
    tiny_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], needle: str
) -> None:
    if torch.cuda.is_available():
        pytest.skip("CPU-only checks")
    base = ["--model", str(tiny_config), "--device", "cpu", "--suite", "micro", "--out", str(tmp_path / "m.csv")]
    for entry, command in ((cli_main, "measure"), (measure_main.main, "run")):
        code, _, err = _cli(capsys, command, *base, *extra, entry=entry)
        assert code == 2, (command, err)
        assert needle in err and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "m.csv").exists()  # refused before anything was timed


def test_unwritable_out_is_refused_before_measuring(
    tiny_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("a file, not a folder")
    for out in (blocker / "m.csv", tmp_path):
        code, _, err = _cli(capsys, "measure", "--model", str(tiny_config), "--device", "cpu", "--out", str(out))
        assert code == 2 and "out: " in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_cpu_harness_records_predict_and_fit_when_labelled_as_a_gpu(tiny_config: Path, tmp_path: Path) -> None:
    """A real harness run, relabelled as if timed on an H100: every record is priced finite and positive and
    the fit reports fitted parameters (CPU timings: only the plumbing is under test, not the values)."""
    result = run_measure(
        MeasureOptions(
            model=str(tiny_config),
            device="cpu",
            suite="full",
            prefill_lens=[8, 16],
            batches=[1, 2],
            contexts=[8, 24],
            output_len=3,
            repeats=1,
            warmup=0,
            out=tmp_path / "m.csv",
        )
    )
    records = [replace(r, gpu="h100-sxm") for r in read_records(result.out)]
    assert {(r.kind, r.op) for r in records} >= {
        ("op", "attention_prefill"),
        ("op", "attention_decode"),
        ("launch_overhead", "cpu_op"),
    }
    for rec in records:
        value = predict_record(rec)
        assert np.isfinite(value) and value > 0, (rec.kind, rec.op, value)
    fitted = fit(records)
    assert fitted.values and np.isfinite(fitted.after).all()
    # as measured (gpu 'cpu') the same rows are not calibration data
    with pytest.raises(InfercastError, match="CPU"):
        fit(read_records(result.out))


def test_timer_validates_and_describes_itself() -> None:
    timer = Timer(torch.device("cpu"), warmup=0, repeats=3)
    calls = []
    assert timer(lambda: calls.append(1)) >= 0 and len(calls) == 3
    assert "no L2 flush" in timer.description
    with pytest.raises(InfercastError, match="repeats"):
        Timer(torch.device("cpu"), repeats=0)
    with pytest.raises(InfercastError, match="warmup"):
        Timer(torch.device("cpu"), warmup=-1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_l2_flush_reads_twice_the_l2() -> None:  # pragma: no cover - GPU only
    device = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flushed = Timer(device, warmup=1, repeats=2)
    assert flushed._scratch is not None and flushed._scratch.numel() == 2 * l2
    assert "L2 flushed" in flushed.description and "MB read" in flushed.description
    flushed.flush()  # a read: the scratch buffer is left as it was (zeros)
    torch.cuda.synchronize()
    assert int(flushed._scratch.count_nonzero()) == 0
    plain = Timer(device, warmup=1, repeats=2, flush_l2=False)
    assert plain._scratch is None and "not flushed" in plain.description


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_graph_decode_steps_give_each_sequence_its_own_token() -> None:  # pragma: no cover - GPU only
    """A decode graph's token buffer starts at token 0 in every sequence; the sweep fills it with a random token per
    sequence, as its eager path does. With one token everywhere a MoE batch routes like a single token."""
    from infercast.harness.runner import StepSweeps

    model = TransformerModel(SPECS["gqa"], precision="bf16", device="cuda", seed=3)
    sweeps = StepSweeps(model, Timer(torch.device("cuda"), 1, 1), stamp=None, use_graphs=True, skipped=[])
    assert sweeps._allocate(8, 32, "test")
    replay, how = sweeps._decode_fn(8, 16)
    assert how == "cuda_graph"
    assert replay.__self__.tokens.unique().numel() > 1


def test_kv_bytes_per_token_is_the_specs() -> None:
    spec = SPECS["sliding"]
    m = TransformerModel(spec, precision="fp32")
    assert m.kv_bytes_per_token() == spec.kv_bytes_per_token(4) == 3 * 2 * 2 * 16 * 4
    assert m.kv_bytes_per_token(1) == truncated_spec(spec, 1).kv_bytes_per_token(4)
    mla = TransformerModel(SPECS["mla"], precision="fp32")
    assert mla.kv_bytes_per_token() == SPECS["mla"].kv_bytes_per_token(4)


def test_measure_layer_subset_and_extrapolation(tiny_config: Path, tmp_path: Path) -> None:
    out = tmp_path / "sub.csv"
    opts = MeasureOptions(
        model=str(tiny_config),
        device="cpu",
        prefill_lens=[8],
        batches=[1],
        contexts=[8],
        output_len=3,
        repeats=1,
        warmup=0,
        extrapolate_from=(1, 2),
        out=out,
        source="test",
    )
    result = run_measure(opts)
    assert {r.layers for r in read_records(out)} == {1, 2}
    assert result.extrapolated_out is not None and result.extrapolated_out.name == "sub.extrapolated.csv"
    extrapolated = read_records(result.extrapolated_out)
    assert {r.kind for r in extrapolated} == {"prefill_step", "decode_step", "ttft", "tpot"}
    assert all(r.layers == 0 and "extrapolated" in r.notes for r in extrapolated)
    subset = run_measure(
        MeasureOptions(
            model=str(tiny_config),
            device="cpu",
            layers=1,
            prefill_lens=[8],
            batches=[1],
            contexts=[8],
            output_len=2,
            repeats=1,
            warmup=0,
            out=tmp_path / "one.csv",
        )
    )
    assert {r.layers for r in subset.records} == {1}


def test_non_tiny_model_without_cuda_is_a_one_line_error(tiny_config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(InfercastError, match="CUDA") as info:
        run_measure(MeasureOptions(model="llama-3.1-8b"))
    assert "\n" not in str(info.value)
    code, _, err = _cli(capsys, "measure", "--model", str(tiny_config), "--device", "cuda")
    assert code == 2 and "CUDA" in err and len(err.strip().splitlines()) == 1
    code, _, err = _cli(capsys, "run", "--model", "qwen3-8b", "--suite", "micro", entry=measure_main.main)
    assert code == 2 and "needs a CUDA GPU" in err


def test_bad_lists_and_suites_are_user_errors() -> None:
    assert parse_int_list("batches", "1, 8,32") == [1, 8, 32]
    with pytest.raises(InfercastError, match="batches"):
        parse_int_list("batches", "1,x")
    with pytest.raises(InfercastError, match="suite"):
        run_measure(MeasureOptions(model="qwen3-0.6b", suite="fast"))


# ----- extrapolation arithmetic, labels ------------------------------------------------------------------------
def _rec(kind: str, layers: int, value: float, **kw: object) -> Record:
    return Record(kind=kind, model="m", gpu="h100-sxm", layers=layers, value=value, **kw)


def test_extrapolate_layers_fits_fixed_plus_per_layer() -> None:
    # t(L) = 2 ms + 0.5 ms * L, measured at 4 and 8 layers -> 34 ms at 64 layers
    a = [
        _rec("decode_step", 4, 4e-3, batch=8, context=512),
        _rec("prefill_step", 4, 10e-3, input_len=128),
        _rec("gemm", 0, 1e-5, m=1, n=2, k=3, op="qkv_proj"),
    ]
    b = [
        _rec("decode_step", 8, 6e-3, batch=8, context=512),
        _rec("prefill_step", 8, 18e-3, input_len=512),
        _rec("gemm", 0, 1e-5, m=1, n=2, k=3, op="qkv_proj"),
    ]
    out = extrapolate_layers(a, b, 64)
    assert len(out) == 1  # prefill shapes differ, gemm has no depth
    assert out[0].kind == "decode_step" and out[0].layers == 0
    assert out[0].value == pytest.approx(2e-3 + 64 * 0.5e-3)
    # a point that would extrapolate to a non-positive time is dropped
    assert extrapolate_layers([_rec("tpot", 2, 5e-3)], [_rec("tpot", 4, 1e-3)], 64) == []
    rows = compare_records(out, [_rec("decode_step", 0, 40e-3, batch=8, context=512)])
    assert rows[0]["error_pct"] == pytest.approx(-15.0)


def test_compare_entry_point(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pred, meas = tmp_path / "p.csv", tmp_path / "m.csv"
    write_records(pred, [_rec("ttft", 0, 0.011, input_len=128)])
    write_records(meas, [_rec("ttft", 0, 0.010, input_len=128)])
    measure_main.main(["compare", str(pred), str(meas), "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["error_pct"] == pytest.approx(10.0)


def test_gpu_names_map_to_catalog_ids() -> None:
    assert detect_gpu_id("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert detect_gpu_id("NVIDIA H100 PCIe") == "h100-pcie"
    assert detect_gpu_id("NVIDIA H200") == "h200"
    assert detect_gpu_id("NVIDIA A100-SXM4-80GB") == "a100-80gb"
    assert detect_gpu_id("NVIDIA A100-SXM4-40GB") == "a100-40gb"
    assert detect_gpu_id("NVIDIA L40S") == "l40s"
    assert detect_gpu_id("NVIDIA L4") == "l4"
    assert detect_gpu_id("Tesla T4") == "t4"
    assert detect_gpu_id("NVIDIA GeForce RTX 4090") == "rtx-4090"
    assert detect_gpu_id("Some Accelerator 9000") is None
    assert command_line(["/usr/bin/infercast", "measure", "--model", "a b"]) == "infercast measure --model 'a b'"
