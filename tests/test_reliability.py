"""Issue 10 regressions: hostile input gets one line naming the field (exit 2), never a traceback or a wrong
answer. One test per symptom seen; the property-based sweep over the same boundaries is tests/test_fuzz_*.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from infercast.errors import InfercastError
from tests.cli_helpers import run

FIXTURES = Path(__file__).parent / "fixtures" / "hf_configs"


def one_line_error(capsys, *args: str, field: str | None = None, needle: str | None = None) -> str:
    code, _, err = run(capsys, *args)
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    if field:  # the API name, or the flag (commands that name their flags, e.g. simulate)
        flag = "--" + field.replace("_", "-")
        assert lines[0].startswith((f"error: {field}:", f"error: {flag}:")), lines[0]
    if needle:
        assert needle in lines[0], lines[0]
    return lines[0]


# ----- files: config.json ---------------------------------------------------------------------------------------
def _config(tmp_path: Path, name: str = "llama-3.1-8b.json", **changes) -> Path:
    cfg = json.loads((FIXTURES / name).read_text())
    cfg.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize(
    "changes,needle",
    [
        (dict(hidden_size=float("inf")), "Infinity"),
        (dict(num_hidden_layers=float("nan")), "NaN"),
        (dict(max_position_embeddings=float("inf")), "Infinity"),
        (dict(rope_theta=float("inf")), "Infinity"),
        (dict(hidden_size="4096"), "hidden_size"),
        (dict(intermediate_size=1e300), "intermediate_size"),
        (dict(vocab_size=10**30), "vocab_size"),
        (dict(quantization_config="fp8"), "quantization_config"),
    ],
)
def test_config_json_bad_numbers_are_one_line(tmp_path, capsys, changes, needle):
    one_line_error(capsys, "predict", "--model", str(_config(tmp_path, **changes)), field="model", needle=needle)


@pytest.mark.parametrize("key", ["kv_lora_rank", "qk_rope_head_dim"])
def test_zero_mla_rank_is_one_line_not_a_validation_error(tmp_path, capsys, key):
    path = _config(tmp_path, "deepseek-v3.json", **{key: 0})
    one_line_error(capsys, "show-model", str(path), field="model", needle=key)


def test_deeply_nested_json_and_non_utf8(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text('{"a":' * 50_000 + "1" + "}" * 50_000)
    one_line_error(capsys, "show-model", str(deep), field="model", needle="nests deeper")
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe{}")
    one_line_error(capsys, "show-model", str(binary), field="model", needle="not UTF-8")


def test_paths_that_are_not_files(tmp_path, capsys):
    loop = tmp_path / "loop.json"
    os.symlink(loop, loop)
    one_line_error(capsys, "show-model", str(loop), field="model")
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    one_line_error(capsys, "simulate", "--trace", str(folder), field="trace", needle="folder")


# ----- files: hardware YAML -------------------------------------------------------------------------------------
def _hardware(tmp_path: Path, path: str, value) -> Path:
    from infercast.specs.catalog import get_hardware

    entry = get_hardware("h100-sxm").model_dump()
    entry["id"] = "my-h100"
    node = entry
    *parents, leaf = path.split(".")
    for p in parents:
        node = node[p]
    node[leaf] = value
    out = tmp_path / "gpu.yaml"
    out.write_text(yaml.safe_dump(entry))
    return out


@pytest.mark.parametrize(
    "path,value",
    [
        ("memory.bandwidth_bytes_s", float("inf")),
        ("memory.bandwidth_bytes_s", 1e-300),
        ("price_per_hour_usd", float("inf")),
        ("peak_flops.bf16", float("nan")),
        ("memory.capacity_bytes", 1e300),
        ("sm_count", "abc"),
    ],
)
def test_hardware_yaml_implausible_numbers(tmp_path, capsys, path, value):
    leaf = path.split(".")[-1]
    one_line_error(
        capsys, "predict", "--gpu", str(_hardware(tmp_path, path, value)), field="hardware file", needle=leaf
    )


def test_hardware_yaml_non_utf8(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"\xff\xfe: x")
    one_line_error(capsys, "predict", "--gpu", str(bad), field="hardware file", needle="not UTF-8")


# ----- files: traces --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,text,needle",
    [
        ("nan.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,10\nnan,10,10\n", "line 3"),
        (
            "big.csv",
            "arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,10\n1,99999999999999999999999,10\n",
            "line 3",
        ),
        ("inf.jsonl", '{"timestamp": 0, "input_length": 10, "output_length": 1e400}\n', "inf"),
        (
            "ids.jsonl",
            '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [99999999999999999999]}\n',
            "hash_ids",
        ),
        ("deep.jsonl", '{"a":' * 50_000 + "1" + "}" * 50_000 + "\n", "nests deeper"),
    ],
)
def test_trace_bad_values_are_one_line(tmp_path, capsys, name, text, needle):
    path = tmp_path / name
    path.write_text(text)
    one_line_error(capsys, "simulate", "--trace", str(path), field="trace", needle=needle)


def test_trace_non_utf8(tmp_path, capsys):
    path = tmp_path / "bin.jsonl"
    path.write_bytes(b"\xff\xfe\n")
    one_line_error(capsys, "simulate", "--trace", str(path), field="trace", needle="not UTF-8")


# ----- unbounded integers ---------------------------------------------------------------------------------------
SIM = ("simulate", "--input-len", "10", "--output-len", "10", "--rate", "1")


def test_num_requests_bounded_by_memory(capsys):
    line = one_line_error(capsys, *SIM, "--num-requests", "2147483648", field="num_requests")
    assert "2147483648 needs" in line and "GiB" in line and "the limit on this machine is" in line


def test_sweep_batches_bounded(capsys):
    one_line_error(capsys, "sweep", "--batches", "1:9999999999999", field="batches", needle="limit")
    one_line_error(capsys, "sweep", "--batches", "99999999999999999999", field="batches", needle="limit")


def test_sweep_grid_rows_bounded():
    from infercast.analysis.sweep import sweep
    from infercast.limits import BYTES_PER_SWEEP_ROW, max_count

    side = int(max_count(BYTES_PER_SWEEP_ROW) ** (1 / 3)) + 2
    grid = list(range(1, side + 1))
    with pytest.raises(InfercastError, match="sweep rows need"):
        sweep(batches=grid, input_lens=grid, output_lens=grid)


def test_unicode_digits_are_not_numbers(capsys):
    one_line_error(capsys, "simulate", "--input-len", "²", "--output-len", "10", "--rate", "1", field="input_len")
    one_line_error(capsys, "sweep", "--batches", "1,²", field="batches")


def test_many_prefixes_allocate_only_what_is_drawn():
    from infercast.sim.workload import synthetic

    work = synthetic(20, 100, 10, arrival="poisson", rate=1.0, prefix=(2**31, 1024))
    assert len(work) == 20 and all(len(h) == 1024 // work.hash_block_size for h in work.block_hashes)


# ----- output paths ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("option", ["--requests-out", "--trace-out", "--plot-dir"])
def test_outputs_checked_before_the_run(tmp_path, capsys, option):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    target = {"--requests-out": "r.csv", "--trace-out": "t.json", "--plot-dir": "plots"}[option]
    one_line_error(
        capsys, *SIM, "--num-requests", "5", option, str(blocker / target), field=option[2:].replace("-", "_")
    )


def test_one_bad_output_writes_nothing(tmp_path, capsys):
    good = tmp_path / "requests.csv"
    blocker = tmp_path / "file"
    blocker.write_text("x")
    one_line_error(
        capsys,
        *SIM,
        "--num-requests",
        "5",
        "--requests-out",
        str(good),
        "--trace-out",
        str(blocker / "t.json"),
        field="trace_out",
    )
    assert not good.exists()


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    from infercast.files import atomic_write

    target = tmp_path / "out.csv"
    target.write_text("old")

    def boom(tmp: Path) -> None:
        tmp.write_text("half")
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError):
        atomic_write(target, "out", boom)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.csv"]
    atomic_write(target, "out", lambda tmp: tmp.write_text("new"))
    assert target.read_text() == "new"


def test_sweep_out_to_a_folder_or_under_a_file(tmp_path, capsys):
    one_line_error(capsys, "sweep", "--out", str(tmp_path), field="out")
    blocker = tmp_path / "f"
    blocker.write_text("x")
    one_line_error(capsys, "sweep", "--out", str(blocker / "rows.csv"), field="out")


# ----- memory ---------------------------------------------------------------------------------------------------
def test_tiny_gpu_memory_utilization_refused(capsys):
    one_line_error(
        capsys,
        "memory",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--gpu-memory-utilization",
        "0.05",
        field="gpu_memory_utilization",
        needle="at least",
    )


def test_kv_pool_never_negative():
    from infercast import memory_budget

    b = memory_budget("llama-3.1-70b", "l4")
    assert b.kv_pool_bytes == 0 and b.unreserved_bytes < 0 and not b.fits and b.shortfall_bytes > 0


def test_concurrency_without_context_is_judged():
    from infercast import memory_budget

    b = memory_budget("llama-3.1-8b", "h100-sxm", concurrency=100_000)
    assert not b.fits and b.max_context(100_000) == 0 and b.shortfall_bytes > 0
    assert memory_budget("llama-3.1-8b", "h100-sxm", concurrency=1).fits


def test_max_context_capped_at_model_context():
    from infercast import memory_budget

    b = memory_budget("llama-3.1-8b", "b200", concurrency=1)
    assert b.num_blocks * b.block_size > 131072 and b.max_context(1) == 131072


# ----- simulate: rough edges ------------------------------------------------------------------------------------
def test_rate_inf_and_1e30_agree():
    from infercast.sim.api import simulate

    kw = dict(input_len=2000, output_len=100, num_requests=300)
    verdicts = {r: simulate("llama-3.1-8b", "h100-sxm", rate=r, **kw)["saturated"] for r in (float("inf"), 1e30)}
    assert verdicts[float("inf")] == verdicts[1e30]


def test_empty_goodput_refused(capsys):
    one_line_error(capsys, *SIM, "--num-requests", "5", "--goodput", "", field="goodput")


def test_prefix_affinity_spreads_when_replicas_divide_blocks():
    from infercast.sim.api import simulate

    # 4 system prompts of 256 tokens = 16 blocks each; 4 replicas divide 16: the old id % n sent all to 0
    res = simulate(
        "llama-3.1-8b",
        "h100-sxm",
        input_len=100,
        output_len=10,
        num_requests=200,
        rate=20,
        prefix=(16, 256),
        replicas=4,
        router="prefix_affinity",
    )
    counts = np.bincount(res.table.replica.astype(int), minlength=4)
    assert (counts > 0).sum() >= 2
    # affinity holds: requests sharing a system prompt land on one replica
    owner: dict[int, int] = {}
    for i in range(res.table.n):
        h = res.table.hashes_of(i)
        first = int(h[0])
        assert owner.setdefault(first, int(res.table.replica[i])) == int(res.table.replica[i])


def test_predict_itl_is_the_batch_step():
    from infercast import predict

    p = predict("llama-3.1-8b", "h100-sxm", input_len=512, output_len=64, batch=64)
    assert p.itl_s == p.tpot_last_s > p.single_stream_tpot_s
    d = p.to_dict()
    assert d["itl_s"] == d["tpot_last_s"] and "single_stream_tpot_s" in d


def test_rate_sweep_reports_slo_capacity(capsys):
    code, out, err = run(
        capsys,
        "simulate",
        "--rate-sweep",
        "--input-len",
        "200",
        "--output-len",
        "20",
        "--num-requests",
        "60",
        "--rates",
        "1,2",
        "--goodput",
        "ttft:500",
    )
    assert code == 0, err
    assert "SLO capacity" in out and "{" not in out.splitlines()[0] and "ttft_ms" not in out
    code, out, err = run(
        capsys,
        "simulate",
        "--rate-sweep",
        "--input-len",
        "200",
        "--output-len",
        "20",
        "--num-requests",
        "60",
        "--rates",
        "1,2",
        "--goodput",
        "ttft:500",
        "--json",
    )
    assert "slo_capacity_req_s" in json.loads(out)


def test_sweep_ranks_fitting_configurations_first(capsys):
    # the biggest batches have the highest throughput but do not fit in the KV cache: they must not rank first
    code, out, err = run(
        capsys, "sweep", "--batches", "1,4,16,64,256,1024", "--input-lens", "8192", "--output-lens", "128"
    )
    assert code == 0, err
    rows = [line for line in out.splitlines() if "llama" in line]
    verdicts = [line.rstrip(" │|").split()[-1] for line in rows]
    assert "no" in verdicts and verdicts == sorted(verdicts, key=lambda v: v != "yes")


# ----- CLI plumbing ---------------------------------------------------------------------------------------------
def test_version(capsys):
    from infercast import __version__

    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"infercast {__version__}"


def test_gpu_alias(capsys):
    code, out, _ = run(capsys, "predict", "--gpu", "h100", "--json")
    assert code == 0 and json.loads(out)["gpu"] == "h100-sxm"


def test_json_errors_are_json_objects(capsys):
    code, out, err = run(capsys, "predict", "--gpu", "nope", "--json")
    assert code == 2 and out == ""
    payload = json.loads(err)
    assert payload["error"]["field"] == "gpu" and "allowed" in payload["error"] and payload["exit_code"] == 2
    code, _, err = run(capsys, "predict", "--tp", "abc", "--json")
    assert code == 2 and json.loads(err)["error"]["field"] == "tp"


def test_usage_errors_are_one_line(capsys):
    for args in (("predict", "--bogus"), ("predict", "--tp"), ("predict", "--tp", "abc")):
        code, _, err = run(capsys, *args)
        assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: "), err


def test_no_runtime_warning_before_error(capsys):
    import warnings

    from infercast.cli import app

    @app.command("_warn_then_fail", hidden=True)
    def _warn_then_fail() -> None:
        warnings.warn("overflow encountered", RuntimeWarning, stacklevel=1)
        raise InfercastError("bad", field="x")

    try:
        code, _, err = run(capsys, "_warn_then_fail")
    finally:
        app.registered_commands.pop()
    assert code == 2 and err.strip() == "error: x: bad"


def test_internal_errors_are_one_line(capsys, monkeypatch):
    from infercast.cli import predict_cmd

    def broken(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(predict_cmd, "run_predict", broken)
    monkeypatch.delenv("INFERCAST_DEBUG", raising=False)
    code, _, err = run(capsys, "predict")
    assert code == 1 and len(err.strip().splitlines()) == 1 and "internal error ZeroDivisionError" in err


# ----- simulator: requests that can never fit, and the watchdog -------------------------------------------------
NEVER_FITS = dict(gpu_memory_utilization=0.2416, input_len=20000, output_len=10, num_requests=3)
"""llama-3.1-8b on an H100 at 24.16% of its usable memory: a 552-block KV pool (8832 tokens); each request needs
1251 blocks."""


@pytest.mark.parametrize(
    "options",
    [
        dict(rate=1.0),
        dict(rate=1.0, scheduler="static"),
        dict(rate=1.0, scheduler="prefill-first"),
        dict(rate=1.0, scheduler="chunked"),
        dict(rate=1.0, scheduler="disagg"),
        dict(rate=1.0, replicas=2, router="least_outstanding"),
        dict(rate=1.0, replicas=2, router="prefix_affinity"),
        dict(concurrency=2),
        dict(offline=True, preemption="swap"),
    ],
)
def test_never_fitting_requests_refused_before_the_run(options):
    from infercast.errors import DoesNotFitError
    from infercast.sim.api import simulate

    with pytest.raises(DoesNotFitError, match=r"request 0 .* KV blocks") as info:
        simulate("llama-3.1-8b", "h100-sxm", **NEVER_FITS, **options)
    assert info.value.field == "workload"


def test_requests_that_exactly_fit_still_run():
    from infercast.sim.api import simulate

    res = simulate(
        "llama-3.1-8b",
        "h100-sxm",
        gpu_memory_utilization=0.2416,
        input_len=8822,
        output_len=10,
        num_requests=3,
        rate=1.0,
        scheduler="disagg",
    )
    assert res["completed"] == 3


@pytest.mark.parametrize("options", [dict(scheduler="disagg"), dict(replicas=2, router="least_outstanding")])
def test_watchdog_stops_a_loop_without_progress(monkeypatch, options):
    """Without the up-front check the old event loops spun forever; the watchdog stops them with a clear error."""
    import infercast.sim.api as api
    from infercast.sim import watchdog

    monkeypatch.setattr(api, "refuse_unservable", lambda *a, **k: None)
    monkeypatch.setattr(watchdog, "STALL_LIMIT", 2000)
    monkeypatch.setattr(watchdog.Watchdog.__init__, "__defaults__", (2000,))
    with pytest.raises(watchdog.SimulationStalled, match="made no progress in 2,000 iterations"):
        api.simulate("llama-3.1-8b", "h100-sxm", rate=1.0, **NEVER_FITS, **options)


def test_watchdog_counts_only_repeats():
    from infercast.sim.watchdog import SimulationStalled, Watchdog

    dog = Watchdog("loop", limit=3)
    for i in range(100):
        dog.tick(i)  # progress every time: never raises
    dog.tick("same")
    dog.tick("same")
    dog.tick("same")
    with pytest.raises(SimulationStalled, match="loop made no progress"):
        dog.tick("same")


@pytest.mark.parametrize(
    "flag,value,needle",
    [
        ("--max-num-seqs", "2147483648", "GiB"),
        ("--replicas", "1000000000", "limit"),
        ("--spec-tokens", "1000", "limit of 32"),
        ("--max-num-batched-tokens", "99999999999", "limit"),
        ("--block-size", "99999999999", "limit"),
    ],
)
def test_simulator_sizes_bounded(capsys, flag, value, needle):
    one_line_error(capsys, *SIM, "--num-requests", "5", flag, value, field=flag[2:].replace("-", "_"), needle=needle)


def test_huge_max_num_seqs_is_not_slow():
    import time

    from infercast.sim.api import simulate

    start = time.perf_counter()
    simulate("llama-3.1-8b", "h100-sxm", input_len=10, output_len=2, num_requests=10, rate=100, max_num_seqs=5_000_000)
    assert time.perf_counter() - start < 20  # was ~70 s: the decode table is sized by the 10 requests


def test_json_format_vllm(capsys):
    code, out, err = run(capsys, *SIM, "--num-requests", "20", "--goodput", "ttft:1000", "--json-format", "vllm")
    assert code == 0, err
    doc = json.loads(out)
    for key in (
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
        "mean_ttft_ms",
        "p99_tpot_ms",
        "median_itl_ms",
        "completed",
        "duration",
    ):
        assert key in doc, key
    assert doc["completed"] == 20 and doc["request_goodput"] is not None
    one_line_error(capsys, *SIM, "--json-format", "xml", field="json_format")


def test_empty_output_path_is_refused(tmp_path, capsys, monkeypatch):
    """'' would mean the current folder: plots were written into the working directory."""
    monkeypatch.chdir(tmp_path)
    one_line_error(capsys, *SIM, "--num-requests", "2", "--plot-dir", "", field="plot_dir", needle="needs a path")
    one_line_error(capsys, "sweep", "--out", "", field="out")
    assert list(tmp_path.iterdir()) == []


def test_output_paths_the_os_cannot_name_are_one_line_errors():
    from infercast.files import check_output_dir, check_output_file

    cases = (("a\0b.csv", "NUL"), ("x" * 5000 + ".csv", "too long"), ("/tmp/" + "d" * 300 + "/o.csv", "too long"))
    for bad, why in cases:
        with pytest.raises(InfercastError, match=why) as err:
            check_output_file(bad, "out", (".csv",))
        assert err.value.field == "out"
    with pytest.raises(InfercastError, match="too long"):
        check_output_dir("p" * 300, "plot_dir")


def test_yaml_aliases_are_checked_once(tmp_path, monkeypatch):
    """A billion-laughs YAML (each level names the previous one ten times: 2 x 10^7 leaves) is checked by visiting
    each shared list once: its two floats are looked at twice in all, not 2 x 10^7 times; a NaN in it is found."""
    import math

    from infercast import files

    lines = ["a0: &a0 [1.0, 2.0]"] + [f"a{i}: &a{i} [{', '.join(['*a' + str(i - 1)] * 10)}]" for i in range(1, 8)]
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n")
    calls = []
    real = math.isfinite
    monkeypatch.setattr(files.math, "isfinite", lambda x: calls.append(x) or real(x))
    files.load_yaml(path, "profile")
    assert len(calls) == 2
    path.write_text("\n".join(["a0: &a0 [1.0, .nan]", *lines[1:]]) + "\n")
    with pytest.raises(InfercastError, match="finite"):
        files.load_yaml(path, "profile")


def test_cgroup_memory_limit_is_read_when_set(tmp_path):
    from infercast.limits import cgroup_limit_bytes

    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    v2.write_text("4294967296\n")
    assert cgroup_limit_bytes((str(v2), str(v1))) == 4 * 1024**3
    v2.write_text("max\n")
    assert cgroup_limit_bytes((str(v2), str(v1))) is None  # v2 without a limit
    v1.write_text("9223372036854771712\n")
    assert cgroup_limit_bytes((str(tmp_path / "absent"), str(v1))) is None  # v1's "no limit"
    assert cgroup_limit_bytes((str(tmp_path / "absent"),)) is None
