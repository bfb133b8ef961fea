"""Fuzzing the boundaries (issue 10): hypothesis strategies for hostile CLI arguments, config.json files,
hardware YAML, CSV/JSONL traces and output paths, and the one oracle every case must satisfy.

A case is a command line (plus the files it names, written into a scratch folder). :func:`run_case` runs it
in-process through the real entry point with a wall-clock limit and :func:`classify` sorts the outcome:

* ``ok``: exit 0 and the answer is sane (finite, positive where it must be; see :func:`answer_problem`), or
  exit 2 with exactly one line on stderr (``error: ...``, or a JSON object under ``--json``);
* ``traceback``: a Python traceback, an ``internal error`` line (exit 1) or any other exit status;
* ``hang``: past the time limit;
* ``wrong``: exit 0 with an answer that breaks an invariant (null/NaN/negative latency, fewer completed
  requests than sent, a missing or partial output file), or runtime warnings printed alongside a result;
* ``bad_error``: exit 2 but not exactly one well-formed line.

The tests in ``tests/test_fuzz_*.py`` assert ``ok`` for a few hundred cases; ``scripts/fuzz_campaign.py``
runs thousands and prints the counts.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

FIXTURES = Path(__file__).parent / "fixtures" / "hf_configs"
CASE_SECONDS = float(os.environ.get("INFERCAST_FUZZ_CASE_SECONDS", "30"))
"""Wall-clock limit per case; past it the case counts as a hang."""
OUTCOMES = ("ok", "traceback", "hang", "wrong", "bad_error")


class CaseTimeout(BaseException):
    """Raised by the alarm inside a case that ran past :data:`CASE_SECONDS` (BaseException: nothing catches it)."""


@dataclass
class Case:
    """A command line and the files it needs (relative name -> bytes), written under a scratch folder."""

    args: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    """Output paths the command was asked to write (checked to exist, complete, on success; a folder ends in ``/``)."""
    num_requests: int | None = None
    """Requests a simulate case sends (all must complete on success)."""
    kind: str = "cli"
    """cli: ``infercast ARGS``; http: one request to a running ``serve`` endpoint; api: a Python API call."""
    payload: Any = None
    """http: (method, path, headers, body bytes, how the client behaves); api: (function name, args, kwargs)."""

    def materialize(self, folder: Path) -> list[str]:
        for name, data in self.files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return [a.replace("{dir}", str(folder)) for a in self.args]


@dataclass
class Outcome:
    kind: str
    code: int | str
    stdout: str
    stderr: str
    detail: str = ""


def run_case(case: Case, folder: Path, seconds: float = CASE_SECONDS) -> Outcome:
    """Run ``infercast ARGS`` in-process (the console script's entry point) and classify it; http and api cases
    go to :func:`run_http_case` and :func:`run_api_case`."""
    if case.kind == "http":
        return run_http_case(case, seconds)
    if case.kind == "api":
        return run_api_case(case, folder, seconds)
    from infercast.cli import main

    args = case.materialize(folder)
    if case.payload == "loop":  # a path that is a symlink to itself
        os.symlink(folder / "loop.csv", folder / "loop.csv")
    resolve_outputs(case, folder)
    out, err = io.StringIO(), io.StringIO()

    def alarm(signum, frame):  # pragma: no cover - only on hangs
        raise CaseTimeout()

    cwd = os.getcwd()
    os.chdir(folder)  # anything written relative to the working folder stays in the scratch folder
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    code: int | str
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except CaseTimeout:
        code = "timeout"
    except BaseException as exc:
        code = "exception"
        err.write(f"Traceback (escaped main): {type(exc).__name__}: {exc}\n")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.chdir(cwd)
    return classify(case, args, code, out.getvalue(), err.getvalue(), folder)


def classify(case: Case, args: list[str], code: int | str, stdout: str, stderr: str, folder: Path) -> Outcome:
    if code == "timeout":
        return Outcome("hang", code, stdout, stderr)
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    if code == 2:
        if len(lines) != 1:
            return Outcome("bad_error", code, stdout, stderr, f"{len(lines)} stderr lines")
        line = lines[0]
        if "--json" in args:
            try:
                payload = json.loads(line)
                assert isinstance(payload["error"]["message"], str)
            except (ValueError, KeyError, TypeError, AssertionError):
                return Outcome("bad_error", code, stdout, stderr, "not a JSON error object")
        elif not line.startswith("error: "):
            return Outcome("bad_error", code, stdout, stderr, "does not start with 'error: '")
        if "Traceback" in stderr:
            return Outcome("traceback", code, stdout, stderr)
        problem = _leftovers(folder)
        return Outcome("wrong", code, stdout, stderr, problem) if problem else Outcome("ok", code, stdout, stderr)
    if code != 0:
        return Outcome("traceback", code, stdout, stderr, lines[-1] if lines else "")
    if any("warning:" in line and not _reported_skip(args, line) for line in lines):
        return Outcome("wrong", code, stdout, stderr, "warnings printed with a result: " + lines[0][:200])
    if "Traceback" in stderr:
        return Outcome("traceback", code, stdout, stderr)
    problem = answer_problem(case, args, stdout) or _leftovers(folder)
    return Outcome("wrong", code, stdout, stderr, problem) if problem else Outcome("ok", code, stdout, stderr)


def _reported_skip(args: list[str], line: str) -> bool:
    """validate / calibrate leave out closed-loop rows the catalogs cannot place, saying which and why (by design:
    a shared table holds rows of models and GPUs not in the catalog); that warning is not a wrong answer."""
    return bool(args) and args[0] in ("validate", "calibrate") and "rows the catalogs cannot place" in line


def _leftovers(folder: Path) -> str:
    """A failed run must not leave temporary or partial files behind in the scratch folder."""
    for path in folder.rglob(".infercast-tmp-*"):
        return f"temporary file left behind: {path.name}"
    return ""


# ----------------------------------------------------------------------------------------------------------
# the oracle for successful runs
# ----------------------------------------------------------------------------------------------------------
def _finite_positive(value: Any, *, allow_zero: bool = False) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value >= 0 if allow_zero else value > 0)
    )


def answer_problem(case: Case, args: list[str], stdout: str) -> str:
    """Empty when a successful run's answer is sane; else what is wrong with it."""
    command = args[0] if args else ""
    if "--json" not in args and "--json-format" not in args:
        if not stdout.strip() and command not in ("--version",):
            return "no output"
        return _outputs_problem(case)
    try:
        doc = json.loads(stdout)
    except ValueError:
        return "stdout is not JSON"
    check: Callable[[Any, Case], str] = {
        "predict": _check_predict,
        "memory": _check_memory,
        "simulate": _check_simulate,
        "sweep": _check_sweep,
    }.get(command, lambda doc, case: "")
    return check(doc, case) or _outputs_problem(case)


def _check_predict(doc: dict, case: Case) -> str:
    for key in ("ttft_s", "e2e_s", "output_throughput_tok_s", "total_throughput_tok_s"):
        if not _finite_positive(doc.get(key)):
            return f"predict {key} = {doc.get(key)!r}"
    for key in ("tpot_s", "itl_s", "single_stream_tpot_s"):
        if doc.get("output_len") == 1:  # one output token: no TPOT, reported as null (issue 37)
            if doc.get(key) is not None:
                return f"predict {key} = {doc.get(key)!r} for one output token (undefined)"
        elif key in doc and not _finite_positive(doc.get(key)):
            return f"predict {key} = {doc.get(key)!r}"
    mem = doc.get("memory", {})
    if not _finite_positive(mem.get("kv_pool_bytes"), allow_zero=True):
        return f"predict memory.kv_pool_bytes = {mem.get('kv_pool_bytes')!r}"
    return ""


def _check_memory(doc: dict, case: Case) -> str:
    for key in ("weights_bytes", "capacity_bytes", "block_bytes"):
        if not _finite_positive(doc.get(key)):
            return f"memory {key} = {doc.get(key)!r}"
    for key in ("kv_pool_bytes", "num_blocks", "shortfall_bytes", "unreserved_bytes"):
        if not _finite_positive(doc.get(key), allow_zero=True):
            return f"memory {key} = {doc.get(key)!r}"
    if doc.get("fits") and doc.get("num_blocks", 0) < 1:
        return "memory fits with no KV blocks"
    if doc.get("max_context") is not None and doc["max_context"] > 10**8:
        return f"memory max_context = {doc['max_context']} (past any model's context)"
    return ""


def _check_simulate(doc: dict, case: Case) -> str:
    if "rates" in doc:  # --rate-sweep
        return "" if doc["rates"] else "rate sweep without rows"
    if "request_throughput" in doc:  # --json-format vllm
        completed, sent = doc.get("completed"), doc.get("num_prompts")
        ttft = doc.get("mean_ttft_ms")
    else:
        completed, sent = doc.get("completed"), doc.get("num_requests")
        ttft = (doc.get("ttft_s") or {}).get("mean")
        for key in ("request_throughput_req_s", "output_throughput_tok_s", "duration_s"):
            if not _finite_positive(doc.get(key)):
                return f"simulate {key} = {doc.get(key)!r}"
        e2e = (doc.get("e2e_s") or {}).get("mean")
        if not _finite_positive(e2e):
            return f"simulate e2e mean = {e2e!r}"
    if completed != sent:
        return f"simulate completed {completed} of {sent}"
    if case.num_requests is not None and sent != case.num_requests:
        return f"simulate sent {sent}, asked for {case.num_requests}"
    if not _finite_positive(ttft):
        return f"simulate ttft mean = {ttft!r}"
    return ""


def _check_sweep(doc: dict, case: Case) -> str:
    rows = doc.get("rows") or []
    if not rows:
        return "sweep without rows"
    for row in rows:
        for key in ("ttft_s", "e2e_s", "output_throughput_tok_s"):
            if not _finite_positive(row.get(key)):
                return f"sweep row {key} = {row.get(key)!r}"
        one_token = row.get("output_len") == 1  # no TPOT: null (issue 37)
        tpot_ok = row.get("tpot_s") is None if one_token else _finite_positive(row.get("tpot_s"))
        if not tpot_ok or row.get("batch", 0) < 1:
            return f"sweep row {row}"
    return ""


def _outputs_problem(case: Case) -> str:
    """A promised output that is missing or empty: a folder where the case names it with a trailing ``/`` (a
    folder's name may hold a dot), else a file."""
    for out in case.outputs:
        path = Path(out)
        if out.endswith("/"):
            if not path.is_dir() or not any(path.iterdir()):
                return f"plot folder {path} missing or empty"
        elif not path.is_file() or path.stat().st_size == 0:
            return f"output {path} missing or empty"
    return ""


# ----------------------------------------------------------------------------------------------------------
# strategies: values
# ----------------------------------------------------------------------------------------------------------
HOSTILE_NUMBERS = (
    "0",
    "-1",
    "-0",
    "2147483648",
    "9223372036854775808",
    "99999999999999999999",
    "1e308",
    "1e-300",
    "inf",
    "-inf",
    "nan",
    "NaN",
    "Infinity",
    "1e",
    "",
    " ",
    "abc",
    "²",
    "٣",
    "1_000",
    "0x10",
    "1.5",
    "1,2",
    "--",
    "-5e3",
    "1e30",
    "4294967297",
)
"""Text a hostile user types where a number belongs."""


def ints(low: int, high: int) -> st.SearchStrategy[str]:
    """A valid integer option value in [low, high], or hostile text."""
    return st.one_of(st.integers(low, high).map(str), st.sampled_from(HOSTILE_NUMBERS))


def floats(low: float, high: float) -> st.SearchStrategy[str]:
    """A valid real option value in [low, high], or hostile text."""
    return st.one_of(st.floats(low, high, allow_nan=False).map(lambda x: f"{x:.6g}"), st.sampled_from(HOSTILE_NUMBERS))


def names(valid: list[str]) -> st.SearchStrategy[str]:
    """A catalog name, a near miss, or junk."""
    return st.one_of(
        st.sampled_from(valid),
        st.sampled_from(valid).map(lambda s: s.upper()),
        st.sampled_from(valid).map(lambda s: s[:-1]),
        st.sampled_from(["", " ", "none", "../etc", "ü", "a" * 300, "h100", "H100"]),
    )


GOODPUTS = ["ttft:200 tpot:50", "ttft:1", "", "tpot:-1", "e2el:inf", "x:1", "ttft:²"]
MODELS = ["llama-3.1-8b", "qwen3-8b", "mixtral-8x7b", "gemma-2-9b", "deepseek-v3", "gpt-oss-20b"]
GPUS = ["h100-sxm", "h200", "a100-80gb", "l40s", "l4", "b200", "mi300x", "t4"]
PRECISIONS = ["bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4"]
ENGINES = ["vllm", "sglang", "trtllm", "ideal"]
SCHEDULERS = ["static", "prefill-first", "chunked", "disagg", "vllm", "sarathi"]


def optional(strategy: st.SearchStrategy[str], flag: str) -> st.SearchStrategy[list[str]]:
    return st.one_of(st.just([]), strategy.map(lambda v: [flag, v]))


# ----------------------------------------------------------------------------------------------------------
# strategies: command lines
# ----------------------------------------------------------------------------------------------------------
def _join(parts: list[list[str]]) -> list[str]:
    return [x for p in parts for x in p]


@st.composite
def predict_case(draw) -> Case:
    parts = [
        ["predict"],
        draw(optional(names(MODELS), "--model")),
        draw(optional(names(GPUS), "--gpu")),
        draw(optional(ints(1, 32768), "--input-len")),
        draw(optional(ints(1, 4096), "--output-len")),
        draw(optional(ints(1, 512), "--batch")),
        draw(optional(ints(1, 8), "--tp")),
        draw(optional(names(PRECISIONS), "--precision")),
        draw(optional(names(ENGINES), "--engine")),
        draw(optional(ints(1, 16384), "--chunk-size")),
        ["--json"] if draw(st.booleans()) else [],
    ]
    return Case(_join(parts))


@st.composite
def memory_case(draw) -> Case:
    parts = [
        ["memory", "--model", draw(names(MODELS)), "--gpu", draw(names(GPUS))],
        draw(optional(ints(1, 8), "--tp")),
        draw(optional(ints(1, 200_000), "--context")),
        draw(optional(ints(1, 200_000), "--concurrency")),
        draw(optional(floats(0.01, 1.0), "--gpu-memory-utilization")),
        draw(optional(ints(1, 256), "--block-size")),
        draw(optional(names(PRECISIONS), "--precision")),
        ["--json"] if draw(st.booleans()) else [],
    ]
    return Case(_join(parts))


@st.composite
def sweep_case(draw) -> Case:
    lists = st.one_of(
        st.lists(st.integers(1, 4096), min_size=1, max_size=4).map(lambda xs: ",".join(map(str, xs))),
        st.tuples(st.integers(1, 64), st.integers(1, 64), st.integers(1, 16)).map(lambda t: f"{t[0]}:{t[1]}:{t[2]}"),
        st.sampled_from((*HOSTILE_NUMBERS, "1:9999999999999", "5:1", "1:10:0", "1:10:-1", ",", "1,,2")),
    )
    parts = [
        ["sweep"],
        draw(optional(st.sampled_from(MODELS), "--models")),
        draw(optional(st.lists(st.sampled_from(GPUS), min_size=1, max_size=2).map(",".join), "--gpus")),
        draw(optional(lists, "--batches")),
        draw(optional(lists, "--input-lens")),
        draw(optional(lists, "--output-lens")),
        draw(optional(lists, "--tps")),
        ["--json"] if draw(st.booleans()) else [],
    ]
    return Case(_join(parts))


@st.composite
def simulate_case(draw, *, source: list[str] | None = None, files: dict[str, bytes] | None = None) -> Case:
    """A small simulation (a few to a few dozen requests) with hostile option values mixed in."""
    n = draw(st.integers(1, 40))
    num = draw(st.one_of(st.just(str(n)), st.sampled_from(("0", "-1", "2147483648", "1e3", "abc", "²", ""))))
    if source is None:
        lengths = st.sampled_from(
            (
                "uniform:10,200",
                "lognormal:200,0.5",
                "normal:100,10",
                "uniform:200,10",
                "lognormal:0,1",
                "fixed:-1",
                "uniform:1,1e30",
                "normal:1e308,1e308",
                "lognormal:100,1e6",
            )
        )
        source = ["--input-len", draw(st.one_of(ints(1, 4096), lengths)), "--output-len", draw(ints(1, 512))]
    load = draw(st.sampled_from(["rate", "concurrency", "offline", "none", "two"]))
    load_args = {
        "rate": ["--rate", draw(floats(0.1, 200.0))],
        "concurrency": ["--concurrency", draw(ints(1, 64))],
        "offline": ["--offline"],
        "none": [],
        "two": ["--rate", "1", "--offline"],
    }[load]
    parts = [
        ["simulate", "--model", draw(st.sampled_from(["llama-3.1-8b", "qwen3-8b", "gemma-2-9b"]))],
        draw(optional(names(["h100-sxm", "h200", "a100-80gb", "l40s"]), "--gpu")),
        source,
        num_args := (["--num-requests", num] if "--trace" not in source or draw(st.booleans()) else []),
        load_args,
        draw(optional(names(SCHEDULERS), "--scheduler")),
        draw(optional(ints(1, 512), "--max-num-seqs")),
        draw(optional(ints(16, 16384), "--max-batched-tokens")),
        draw(optional(ints(1, 128), "--block-size")),
        draw(optional(floats(0.2, 0.95), "--gpu-memory-utilization")),
        draw(optional(ints(1, 4), "--replicas")),
        draw(optional(names(["round_robin", "least_outstanding", "prefix_affinity"]), "--router")),
        draw(optional(ints(0, 2048), "--prefix-len")),
        draw(optional(ints(1, 8), "--num-prefixes")),
        draw(optional(ints(1, 8), "--spec-tokens")),
        draw(optional(floats(0.0, 1.0), "--spec-acceptance")),
        draw(optional(st.sampled_from(GOODPUTS), "--goodput")),
        draw(optional(floats(0.1, 10.0), "--burstiness")),
        draw(optional(names(["recompute", "swap"]), "--preemption")),
        draw(optional(ints(0, 2**31), "--seed")),
        draw(st.sampled_from([["--json"], ["--json-format", "vllm"], ["--json-format", "nope"], []])),
    ]
    case = Case(_join(parts), dict(files or {}))
    if num_args and num == str(n):
        case.num_requests = n
    return case


# ----------------------------------------------------------------------------------------------------------
# strategies: files
# ----------------------------------------------------------------------------------------------------------
HOSTILE_JSON_VALUES = (
    "Infinity",
    "-Infinity",
    "NaN",
    "1e400",
    "-1",
    "0",
    "1e300",
    "1e-300",
    "2147483648",
    "99999999999999999999999",
    '"4096"',
    '""',
    "null",
    "true",
    "[]",
    "{}",
    "[1,2]",
    "0.5",
    '{"a": {"b": {}}}',
)


@st.composite
def config_json_case(draw) -> Case:
    """A real HF config.json with one or two fields made hostile, or a broken file."""
    base_name = draw(st.sampled_from(sorted(p.name for p in FIXTURES.glob("*.json"))))
    base = json.loads((FIXTURES / base_name).read_text())
    kind = draw(st.sampled_from(["field", "field", "field", "delete", "deep", "bytes", "truncate", "quant"]))
    if kind in ("field", "delete"):
        keys = sorted(k for k, v in base.items() if not isinstance(v, dict | list))
        key = draw(st.sampled_from(keys))
        if kind == "delete":
            base.pop(key)
            text = json.dumps(base)
        else:
            value = draw(st.sampled_from(HOSTILE_JSON_VALUES))
            text = json.dumps({**base, key: "__HOSTILE__"}).replace('"__HOSTILE__"', value)
        data = text.encode()
    elif kind == "quant":
        value = draw(
            st.sampled_from(
                [
                    '"fp8"',
                    '{"quant_method": "nope"}',
                    '{"quant_method": "gptq", "bits": 3}',
                    '{"quant_method": "fp8"}',
                    "[]",
                    '{"quant_method": null}',
                ]
            )
        )
        data = json.dumps({**base, "quantization_config": "__Q__"}).replace('"__Q__"', value).encode()
    elif kind == "deep":
        depth = draw(st.sampled_from([70, 1000, 100_000]))
        data = ('{"a":' * depth + "1" + "}" * depth).encode()
    elif kind == "bytes":
        data = draw(st.sampled_from([b"\xff\xfe{}", b"", b"\x00\x00", "\ufeff{}".encode(), b"[1,2,3]", b"null"]))
    else:
        text = json.dumps(base)
        data = text[: draw(st.integers(0, len(text) - 1))].encode()
    command = draw(st.sampled_from([["predict", "--model"], ["show-model"], ["memory", "--gpu", "h200", "--model"]]))
    tail = ["--json"] if draw(st.booleans()) else []
    return Case([*command, "{dir}/model/config.json", *tail], {"model/config.json": data})


def _h100_entry() -> dict:
    from infercast.specs.catalog import hardware_catalog

    entry = hardware_catalog()["h100-sxm"].model_dump()
    entry["id"] = "fuzz-gpu"
    return entry


HOSTILE_YAML_VALUES = (
    ".inf",
    "-.inf",
    ".nan",
    "1e-300",
    "1e300",
    "0",
    "-1",
    "abc",
    "''",
    "null",
    "[]",
    "{}",
    "9999999999999999999999",
    "1.0e+9",
    "true",
)


@st.composite
def hardware_yaml_case(draw) -> Case:
    entry = _h100_entry()
    kind = draw(st.sampled_from(["field", "field", "field", "delete", "extra", "bytes", "list", "builtin_id"]))
    paths = [
        "memory.capacity_bytes",
        "memory.bandwidth_bytes_s",
        "peak_flops.bf16",
        "peak_flops.fp8",
        "l2_bytes",
        "sm_count",
        "interconnect.bandwidth_bytes_s",
        "host_link.bandwidth_bytes_s",
        "max_gpus_per_node",
        "tdp_w",
        "price_per_hour_usd",
        "id",
        "name",
        "memory",
    ]
    if kind in ("field", "delete"):
        path = draw(st.sampled_from(paths))
        node = entry
        *parents, leaf = path.split(".")
        for p in parents:
            node = node[p]
        if kind == "delete":
            node.pop(leaf, None)
            data = yaml.safe_dump(entry).encode()
        else:
            node[leaf] = "__HOSTILE__"
            data = yaml.safe_dump(entry).replace("__HOSTILE__", draw(st.sampled_from(HOSTILE_YAML_VALUES))).encode()
    elif kind == "extra":
        entry["surprise"] = 1
        data = yaml.safe_dump(entry).encode()
    elif kind == "list":
        data = yaml.safe_dump([entry, {**entry, "id": "fuzz-gpu-2"}]).encode()
    elif kind == "builtin_id":
        entry["id"] = "h100-sxm"
        data = yaml.safe_dump(entry).encode()
    else:
        data = draw(
            st.sampled_from(
                [b"\xff\xfe: x", b"", b"- - - -", b"a: [1, 2", b"!!python/object:os.system x", b"&a [*a]", b"{" * 200]
            )
        )
    command = draw(st.sampled_from([["predict"], ["memory", "--model", "llama-3.1-8b"]]))
    tail = ["--json"] if draw(st.booleans()) else []
    return Case([*command, "--gpu", "{dir}/gpu.yaml", *tail], {"gpu.yaml": data})


TRACE_CELLS = (
    "0",
    "1",
    "10",
    "100",
    "2000",
    "-1",
    "nan",
    "inf",
    "1e30",
    "99999999999999999999999",
    "",
    "abc",
    "1.5",
    "²",
    "0.001",
    "1e-300",
)


@st.composite
def trace_case(draw) -> Case:
    kind = draw(st.sampled_from(["csv", "csv", "jsonl", "jsonl", "bytes"]))
    rows = draw(st.integers(0, 12))
    good = st.tuples(
        st.floats(0, 100).map(lambda x: f"{x:.3f}"), st.integers(1, 3000).map(str), st.integers(1, 300).map(str)
    )
    hostile = st.tuples(st.sampled_from(TRACE_CELLS), st.sampled_from(TRACE_CELLS), st.sampled_from(TRACE_CELLS))
    cells = [draw(st.one_of(good, good, good, hostile)) for _ in range(rows)]
    if kind == "csv":
        header = draw(
            st.sampled_from(
                [
                    "arrived_at,num_prefill_tokens,num_decode_tokens",
                    "arrival,prompt_len,output_len",
                    "time,prompt,output",
                    "",
                    "a,b",
                ]
            )
        )
        data = "\n".join([header, *(",".join(c) for c in cells)]).encode()
        name = "trace.csv"
    elif kind == "jsonl":
        lines = []
        for t, i, o in cells:
            ids = draw(
                st.sampled_from(
                    [
                        "",
                        ', "hash_ids": [1, 2, 3]',
                        ', "hash_ids": [-1]',
                        ', "hash_ids": [99999999999999999999999]',
                        ', "hash_ids": "x"',
                    ]
                )
            )
            lines.append(
                f'{{"timestamp": {_json_num(t)}, "input_length": {_json_num(i)}, "output_length": {_json_num(o)}{ids}}}'
            )
        if draw(st.booleans()) and lines:
            lines.append(draw(st.sampled_from(["{", "[]", "1", '{"timestamp": 1}', '{"a":' * 5000 + "1" + "}" * 5000])))
        data = "\n".join(lines).encode()
        name = "trace.jsonl"
    else:
        data = draw(st.sampled_from([b"\xff\xfe,1,2\n", b"", b"\n\n", b"\x00" * 10]))
        name = draw(st.sampled_from(["trace.csv", "trace.jsonl"]))
    case = draw(simulate_case(source=["--trace", "{dir}/" + name], files={name: data}))
    return case


def _json_num(cell: str) -> str:
    try:
        value = float(cell)
    except ValueError:
        return json.dumps(cell)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return cell if cell.strip() else '""'


@st.composite
def output_path_case(draw, base: Path | None = None) -> Case:
    """Output options pointing at folders, files-as-parents, missing folders, bad extensions, odd names."""
    outputs = [
        ("--requests-out", ".csv"),
        ("--trace-out", ".json"),
        ("--plot-dir", ""),
        ("sweep-out", ".csv"),
        ("roofline-out", ".png"),
    ]
    option, suffix = draw(st.sampled_from(outputs))
    where = draw(st.sampled_from(["ok", "deep", "file_parent", "is_dir", "bad_ext", "odd_name", "proc", "empty"]))
    files: dict[str, bytes] = {"blocker": b"x"}
    stem = draw(
        st.text(st.sampled_from("abcxyz019_-. üñ名"), min_size=1, max_size=12).filter(
            lambda t: t.strip(" .") == t and t not in ("", ".", "..")
        )
    )
    depth = "/".join(draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=4)))
    name = {
        "ok": f"{stem}{suffix}",
        "deep": f"{depth}/{stem}{suffix}",
        "file_parent": f"blocker/{stem}{suffix}",
        "is_dir": "existing",
        "bad_ext": f"{stem}.xlsx",
        "odd_name": f"ü ñ 名{stem}{suffix}",
        "proc": "",
        "empty": "",
    }[where]
    if where == "is_dir":
        files["existing/keep"] = b""
    target = "/proc/infercast-fuzz" + suffix if where == "proc" else ("" if where == "empty" else "{dir}/" + name)
    if option == "sweep-out":
        args = ["sweep", "--batches", "1,8", "--input-lens", "128", "--output-lens", "16", "--out", target]
    elif option == "roofline-out":
        args = ["roofline", "--out", target]
    else:
        n = draw(st.integers(1, 8))
        args = [
            "simulate",
            "--input-len",
            str(draw(st.integers(1, 256))),
            "--output-len",
            "8",
            "--num-requests",
            str(n),
            "--rate",
            "5",
            option,
            target,
        ]
    if draw(st.booleans()):
        args.append("--json")
    promised = target + "/" if option == "--plot-dir" else target
    return Case(args, files, outputs=[promised] if where in ("ok", "deep", "odd_name") else [])


def resolve_outputs(case: Case, folder: Path) -> Case:
    """Output paths with the scratch folder filled in (for the success checks)."""
    case.outputs = [o.replace("{dir}", str(folder)) for o in case.outputs]
    return case


# ----------------------------------------------------------------------------------------------------------
# issue 37: the commands, files, endpoint and API outside the first campaign
# ----------------------------------------------------------------------------------------------------------
DURATIONS = ("200ms", "1s", "50ms", "0.2s", "500us", "0", "-1ms", "abc", "", "1e308s", "nan", "inf", "²ms", "5")
SLOS = ("ttft:p99:2s tpot:p90:100ms", "ttft:p99:2s", "e2e:p99:20s", "ttft:p101:1s", "tpot:1ms", "x:p99:1s", "", "ttft")


def _flag(draw, strategy: st.SearchStrategy[str], flag: str) -> list[str]:
    return draw(optional(strategy, flag))


@st.composite
def analysis_case(draw) -> Case:
    """compare, select, crossover and roofline with hostile option values."""
    command = draw(st.sampled_from(["compare", "select", "crossover", "roofline"]))
    gpu_list = st.lists(names(GPUS), min_size=1, max_size=3).map(",".join)
    parts = [[command], _flag(draw, names(MODELS), "--model")]
    if command in ("compare", "select", "roofline"):
        parts.append(_flag(draw, gpu_list, "--gpus"))
    if command in ("compare", "select"):
        parts.append(_flag(draw, st.lists(names(PRECISIONS), min_size=1, max_size=2).map(",".join), "--precisions"))
    if command in ("crossover", "roofline"):
        parts += [_flag(draw, names(PRECISIONS), "--precision")]
    if command == "crossover":
        parts += [_flag(draw, names(GPUS), "--gpu"), _flag(draw, ints(1, 100_000), "--max-input")]
    else:
        parts.append(_flag(draw, ints(1, 32768), "--input-len"))
    parts += [
        _flag(draw, ints(1, 4096), "--output-len"),
        _flag(draw, ints(1, 512), "--batch"),
        _flag(draw, names(["bf16", "fp8", "fp16", "int8"]), "--kv-precision"),
        _flag(draw, names(ENGINES), "--engine"),
    ]
    if command == "select":
        parts += [["--ttft", draw(st.sampled_from(DURATIONS))], ["--tpot", draw(st.sampled_from(DURATIONS))]]
        parts.append(_flag(draw, st.sampled_from(["1", "1,2", "1,2,4,8", "0", "1,,2", "abc"]), "--tps"))
    elif command != "crossover" or draw(st.booleans()):
        parts.append(_flag(draw, ints(1, 8), "--tp"))
    outputs: list[str] = []
    if command == "roofline":
        out = draw(st.sampled_from(["r.png", "r.svg", "r.xlsx", "missing/r.png", ""]))
        parts.append(["--out", "{dir}/" + out if out else ""])
        outputs = ["{dir}/" + out] if out in ("r.png", "r.svg") else []
    parts.append(["--json"] if draw(st.booleans()) else [])
    return Case(_join(parts), outputs=outputs)


DAILY_BODIES = (
    b"hour,rate_req_s\n0,1\n1,2\n",
    b"hour,rate_req_s\n0,abc\n1,2\n",
    b"hour,rate_req_s\n0,-1\n1,2\n",
    b"hour,rate_req_s\n0,nan\n1,inf\n",
    b"hour,rate_req_s\n0,1e308\n1,2\n",
    b"time_s,rate_req_s\n0,1\n1e15,2\n",
    b"arrived_at\n0\n1e300\n",
    b"arrived_at\n-5\n1\n",
    b"\xff\xfe,1\n",
    b"",
    b"hour,rate_req_s\n0,\xc2\xb2\n",
)


@st.composite
def plan_case(draw) -> Case:
    """``plan`` on one GPU and TP with few probe requests; hostile rates, SLOs, daily profiles and prices."""
    files: dict[str, bytes] = {}
    daily: list[str] = []
    if draw(st.integers(0, 3)) == 0:
        kind = draw(st.sampled_from(["diurnal", "diurnal:0.25", "diurnal:abc", "diurnal:-1", "diurnal:nan", "csv"]))
        if kind == "csv":
            files["daily.csv"] = draw(st.sampled_from(DAILY_BODIES))
            kind = "{dir}/daily.csv"
        daily = ["--daily", kind]
    parts = [
        ["plan", "--gpus", draw(st.sampled_from(["h100-sxm", "h200", "a100-80gb", "nope"])), "--tps", "1"],
        ["--workers", draw(st.sampled_from(["1", "1", "0", "abc"]))],
        ["--slo", draw(st.sampled_from(SLOS))],
        _flag(draw, st.one_of(floats(0.1, 20.0), st.sampled_from(("1e308", "1e-300", "5e-324"))), "--rate"),
        ["--input-len", draw(st.one_of(ints(1, 2048), st.sampled_from(("lognormal:200,0.5", "uniform:1,1e30"))))],
        ["--output-len", draw(ints(1, 256))],
        ["--num-requests", draw(st.one_of(st.integers(5, 30).map(str), st.sampled_from(("0", "-1", "1e3", "²"))))],
        daily,
        _flag(
            draw, st.sampled_from(["h100-sxm=2.5", "h100-sxm=-1", "x=1", "h100-sxm=nan", "=", "h100-sxm"]), "--price"
        ),
        _flag(draw, st.sampled_from(["1", "15", "0", "-1", "abc"]), "--top"),
        ["--json"] if draw(st.booleans()) else [],
    ]
    return Case(_join(parts), files)


BENCH_FIXTURES = Path(__file__).parent / "fixtures" / "bench"
HOSTILE_BENCH_VALUES = (*HOSTILE_JSON_VALUES, '"\u00b2"', '"' + "9" * 140_000 + '"', "-1e3", '{"x": 1}', "[1, 2, 3]")


def _mutate_json(draw, doc: Any) -> Any:
    """Replace one leaf, or one object/list, somewhere in ``doc`` by a placeholder (returned as the new doc)."""
    paths: list[tuple] = []

    def walk(node: Any, path: tuple) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node[:3]):
                walk(v, (*path, i))

    walk(doc, ())
    path = draw(st.sampled_from(paths[1:] or paths))
    if not path:
        return "__HOSTILE__"
    node = doc
    for part in path[:-1]:
        node = node[part]
    if draw(st.integers(0, 4)) == 0 and isinstance(node, dict):
        node.pop(path[-1])
    else:
        node[path[-1]] = "__HOSTILE__"
    return doc


@st.composite
def bench_file_case(draw) -> Case:
    """``validate`` / ``calibrate --bench`` with a vLLM, GuideLLM or AIPerf result file made hostile."""
    name = draw(st.sampled_from(sorted(p.name for p in BENCH_FIXTURES.iterdir())))
    raw = (BENCH_FIXTURES / name).read_bytes()
    how = draw(st.sampled_from(["field", "field", "field", "truncate", "bytes", "deep", "huge", "lines", "as_is"]))
    if name.endswith(".csv"):
        lines = raw.decode().splitlines()
        if how in ("field", "lines", "huge"):
            i = draw(st.integers(0, len(lines) - 1))
            cells = lines[i].split(",")
            j = draw(st.integers(0, len(cells) - 1))
            cells[j] = draw(st.sampled_from(["inf", "nan", "-1", "0", "²", "", "1e400", "9" * 140_000, '"', "٣"]))
            lines[i] = ",".join(cells)
        data = "\n".join(lines).encode()
    elif how in ("field", "lines", "huge"):
        doc = _mutate_json(draw, json.loads(raw))
        value = '"' + "x" * 200_000 + '"' if how == "huge" else draw(st.sampled_from(HOSTILE_BENCH_VALUES))
        data = json.dumps(doc).replace('"__HOSTILE__"', value).encode()
    else:
        data = raw
    if how == "truncate":
        data = data[: draw(st.integers(0, max(len(data) - 1, 0)))]
    elif how == "bytes":
        data = draw(st.sampled_from([b"\xff\xfe{}", b"", b"\x00" * 8, b"[1, 2]", b"null", b"{}", b'{"benchmarks": 5}']))
    elif how == "deep":
        data = draw(st.sampled_from([b'{"a":' * 100_000 + b"1" + b"}" * 100_000, b"[" * 5000 + b"]" * 5000]))
    facts = [
        ["--gpu", draw(st.sampled_from(["h100-sxm", "h100-sxm", "nope"]))],
        ["--tp", draw(st.sampled_from(["1", "1", "0", "²"]))],
        ["--model", "llama-3.1-8b"],
        ["--engine", draw(st.sampled_from(["vllm", "vllm", "nope"]))],
        draw(st.sampled_from([["--concurrency", "8"], ["--concurrency", "0"], ["--request-rate", "inf"], []])),
        draw(
            st.sampled_from(
                [[], [], ["--bench-format", "vllm"], ["--bench-format", "guidellm"], ["--bench-format", "x"]]
            )
        ),
    ]
    command = draw(st.sampled_from([["validate"], ["validate"], ["calibrate", "--no-project-data", "--dry-run"]]))
    if command[0] == "calibrate":
        facts = [f for f in facts if f[:1] != ["--tp"] or f[1] == "1"]  # calibrate runs only where it fits fast
    tail = ["--json"] if draw(st.booleans()) else []
    return Case([*command, "--bench", "{dir}/" + name, *_join(facts), *tail], {name: data})


DATA_HEADER = (
    "id,engine,engine_version,model,gpu,precision,tp,input_len,output_len,concurrency,ttft_ms_mean,tpot_ms_mean"
)
DATA_ROW = "run_1,trtllm,1.0.0rc3,Qwen/Qwen3-32B,h100-sxm,fp8,8,1024,128,8,135.138,7.0295"


@st.composite
def data_csv_case(draw) -> Case:
    """``validate`` / ``calibrate --data`` with closed-loop rows (or a record CSV) made hostile."""
    rows = [DATA_ROW.split(",") for _ in range(draw(st.integers(1, 3)))]
    for _ in range(draw(st.integers(0, 2))):
        row = draw(st.sampled_from(rows))
        j = draw(st.integers(0, len(row) - 1))
        row[j] = draw(st.sampled_from(["0", "-1", "nan", "inf", "", "²", "abc", "99999999999", "1e300", "٣", "1.5"]))
    header = draw(st.sampled_from([DATA_HEADER, DATA_HEADER, "kind,value,unit", "a,b", ""]))
    data = "\n".join([header, *(",".join(r) for r in rows)]).encode()
    how = draw(st.sampled_from(["as_is", "as_is", "as_is", "truncate", "bytes", "loop", "folder"]))
    files = {"rows.csv": data}
    target = "{dir}/rows.csv"
    if how == "truncate":
        files["rows.csv"] = data[: draw(st.integers(0, len(data)))]
    elif how == "bytes":
        files["rows.csv"] = draw(st.sampled_from([b"\xff\xfe,1", b"", b"\x00" * 10, b'"' * 3]))
    elif how == "folder":
        target = "{dir}"
    elif how == "loop":
        target = "{dir}/loop.csv"
    command = draw(st.sampled_from([["validate"], ["validate"], ["calibrate", "--no-project-data", "--dry-run"]]))
    tail = ["--json"] if draw(st.booleans()) else []
    case = Case([*command, "--data", target, *tail], files)
    case.payload = "loop" if how == "loop" else None
    return case


CALIBRATION_YAML = (
    b"a: [1, 2",
    b"\xff\xfe",
    b"x: 1\n",
    b"- 1\n- 2\n",
    b"hardware: cpu\npeaks: {}\nprofile: {}\n",
    b"hardware: cpu\npeaks: 5\nprofile: []\n",
    b"hardware: cpu\npeaks: {bandwidth_bytes_s: abc, fp32: 1, bf16: 1}\nprofile: {}\n",
    b"hardware: cpu\npeaks: {bandwidth_bytes_s: .inf, fp32: 1, bf16: 1}\nprofile: {}\n",
    b"hardware: cpu\npeaks: {bandwidth_bytes_s: 1e10, fp32: 1e10, bf16: 1e10}\nprofile: {nope: 1}\n",
    b"{" * 200,
)


ENGINE_FLAGS = (
    "--rate",
    "--input-len",
    "--num-blocks",
    "--seed",
    "--block-size",
    "--max-num-seqs",
    "--num-requests",
    "--prefix-tokens",
    "--threads",
    "--burstiness",
    "--max-batched-tokens",
    "--calibration",
    "--scheduler",
)


@st.composite
def engine_cmd_case(draw) -> Case:
    """``validate-sim`` and ``calibrate-cpu`` (the CPU engine): hostile option values and calibration YAML, refused
    before any model is built (valid runs take minutes and are covered by tests/test_engine.py)."""
    command = draw(st.sampled_from(["validate-sim", "validate-sim", "calibrate-cpu"]))
    parts = [[command, "--layers", draw(st.sampled_from(["1", "0", "-1", "abc", "99999999"]))]]
    hostile = draw(st.sampled_from(["99999999999", "0", "-1", "abc", "1e308", "nan", "²", "99999999999999999999999"]))
    if command == "calibrate-cpu":
        flag = draw(st.sampled_from(["--rounds", "--repeats", "--threads", "--precision", "--model"]))
        parts += [[flag, hostile], ["--out", "{dir}/cpu.yaml"]]
    else:
        flag = draw(st.sampled_from(ENGINE_FLAGS))
        parts.append(["--calibration", "{dir}/cpu.yaml"] if flag != "--calibration" else [])
        parts.append([flag, "{dir}/cpu.yaml" if flag == "--calibration" else hostile])
        parts.append(_flag(draw, st.sampled_from(["{dir}/out.png", "{dir}/x.xlsx"]), "--plot"))
    files = {"cpu.yaml": draw(st.sampled_from(CALIBRATION_YAML))}
    tail = ["--json"] if draw(st.booleans()) else []
    return Case([*_join(parts), *tail], files)


# ----- serve: one endpoint, hostile requests ------------------------------------------------------------------------
@st.composite
def serve_case(draw) -> Case:
    """One request to the ``serve`` endpoint: malformed or deep JSON, wrong types, huge or negative max_tokens,
    bad Content-Length, or a client that hangs up mid-answer."""
    prompt = draw(
        st.sampled_from(
            [
                "[1, 2, 3]",
                '"hello"',
                "[true]",
                "[false, 1]",
                "[1.5]",
                "[-1]",
                "[99999]",
                "[]",
                '""',
                "null",
                "5",
                "[[1]]",
            ]
        )
    )
    max_tokens = draw(
        st.sampled_from(["2", "1", "0", "-5", "1e400", "NaN", '"2"', "true", "99999999999999999999", "3"])
    )
    stream = draw(st.sampled_from(["false", "true", '"yes"', "null"]))
    body = f'{{"prompt": {prompt}, "max_tokens": {max_tokens}, "stream": {stream}}}'.encode()
    how = draw(st.sampled_from(["plain"] * 6 + ["truncate", "deep", "bytes", "length", "path", "hangup", "burst"]))
    headers = {"Content-Type": "application/json"}
    path = "/v1/completions"
    if how == "truncate":
        body = body[: draw(st.integers(0, len(body) - 1))]
    elif how == "deep":
        body = draw(st.sampled_from([b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000 + b"1" + b"}" * 50_000]))
    elif how == "bytes":
        body = draw(st.sampled_from([b"\xff\xfe", b"", b"[1, 2]", b"null", b'{"prompt": NaN}']))
    elif how == "length":
        headers["Content-Length"] = draw(st.sampled_from(["-1", "abc", str(1 << 40), "99999999999999999999"]))
    elif how == "path":
        path = draw(st.sampled_from(["/v1/chat/completions", "/", "/v1/models", "/%ff"]))
    method = "GET" if path == "/v1/models" and draw(st.booleans()) else "POST"
    return Case(["serve", how, path], kind="http", payload=(method, path, headers, body, how))


_SERVER: Any = None


def shared_server() -> Any:
    """One ``serve`` endpoint (a tiny random-weight model) for every http case of this process."""
    global _SERVER
    if _SERVER is None:
        import torch

        from infercast.harness.engine.runtime import Engine
        from infercast.harness.engine.server import EngineServer
        from infercast.harness.torch_model import TransformerModel
        from tests.tiny_models import tiny_spec

        torch.set_num_threads(1)
        spec = tiny_spec()
        model = TransformerModel(spec, precision="fp32", seed=3)
        engine = Engine(
            model, scheduler="chunked", num_blocks=64, block_size=16, max_num_seqs=16, max_num_batched_tokens=64
        )
        _SERVER = EngineServer(engine, port=0).start()
    return _SERVER


def run_http_case(case: Case, seconds: float) -> Outcome:
    """Send the case's request (``burst``: 20 at once from 10 clients); every answer must be a 2xx with a sane body
    or a 4xx with an error message, the server must not print a traceback and must still answer afterwards."""
    import http.client
    import socket
    import threading

    server = shared_server()
    method, path, headers, body, how = case.payload
    err = io.StringIO()

    def one() -> tuple[int | str, bytes]:
        if how == "length" or how == "hangup":
            with socket.create_connection(("127.0.0.1", server.port), timeout=seconds) as sock:
                length = headers.get("Content-Length", str(len(body)))
                sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode() + body)
                if how == "hangup":
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    return 0, b""
                head = sock.recv(65536).decode("latin-1")
                return int(head.split()[1]) if head.startswith("HTTP/") else "no answer", b"{}"
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=seconds)
        try:
            conn.request(method, path, body if method == "POST" else None, headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        except OSError as exc:
            return type(exc).__name__, b""
        finally:
            conn.close()

    answers: list[tuple[int | str, bytes]] = []
    with contextlib.redirect_stderr(err):
        if how == "burst":
            threads = [threading.Thread(target=lambda: answers.extend(one() for _ in range(2))) for _ in range(10)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(seconds)
        else:
            answers.append(one())
        if how != "hangup":
            answers.append(one())  # the same request again: still answered the same way
        probe = http.client.HTTPConnection("127.0.0.1", server.port, timeout=seconds)
        try:
            probe.request("POST", "/v1/completions", b'{"prompt": [1, 2], "max_tokens": 1}', {"Connection": "close"})
            alive = probe.getresponse().status == 200
        except OSError:
            alive = False
        finally:
            probe.close()
    text = err.getvalue()
    problem = _http_problem(answers, how, alive, text)
    kind = "ok" if not problem else ("traceback" if "Traceback" in text or "500" in problem else "wrong")
    return Outcome(kind, 0, "", text, problem)


def _http_problem(answers: list, how: str, alive: bool, stderr: str) -> str:
    if not alive:
        return "the server stopped answering"
    if stderr.strip():
        return "the server printed: " + stderr.strip().splitlines()[-1][:200]
    for code, raw in answers:
        if how == "hangup":
            continue
        if not isinstance(code, int):
            return f"no answer ({code})"
        if code >= 500:
            return f"HTTP {code}"
        if 400 <= code < 500 and how not in ("length",):
            try:
                message = json.loads(raw)["error"]["message"]
            except (ValueError, KeyError, TypeError):
                return f"HTTP {code} without an error message"
            if not message:
                return f"HTTP {code} with an empty message"
    return ""


# ----- the Python API -----------------------------------------------------------------------------------------------
API_CALLS: dict[str, tuple[tuple, dict[str, Any]]] = {
    "predict": (("llama-3.1-8b", "h100-sxm"), dict(input_len=128, output_len=16, batch=1, tp=1, precision=None)),
    "memory_budget": (("llama-3.1-8b", "h100-sxm"), dict(tp=1, context=None, concurrency=None, block_size=None)),
    "sweep": ((), dict(models="llama-3.1-8b", gpus="h100-sxm", batches=1, input_lens=128, output_lens=16, tps=1)),
    "simulate": (("llama-3.1-8b", "h100-sxm"), dict(input_len=64, output_len=8, num_requests=4, rate=2.0, seed=0)),
    "plan": (
        ("llama-3.1-8b", "h100-sxm"),
        dict(slo="ttft:p99:2s", rate=1.0, input_len=64, output_len=8, num_requests=10, tps=1, verify=False),
    ),
    "get_model": (("llama-3.1-8b",), {}),
    "get_hardware": (("h100-sxm",), {}),
}
API_VALUES = (None, "5", "x", "", 5, -1, 0, 1.5, math.nan, math.inf, [], {}, True, 10**30, b"x", ["x"], ("a", 1))


@st.composite
def api_case(draw) -> Case:
    """A public function called with one argument replaced by a wrong type or value."""
    name = draw(st.sampled_from(sorted(API_CALLS)))
    args, kwargs = API_CALLS[name]
    args, kwargs = list(args), dict(kwargs)
    slots = [("arg", i) for i in range(len(args))] + [("kw", k) for k in kwargs]
    kind, key = draw(st.sampled_from(slots))
    value = draw(st.sampled_from(API_VALUES))
    if kind == "arg":
        args[key] = value
    else:
        kwargs[key] = value
    if name == "plan":
        kwargs.update(executor="serial")
    return Case([f"api:{name}", str(key), repr(value)[:40]], kind="api", payload=(name, tuple(args), kwargs))


def run_api_case(case: Case, folder: Path, seconds: float) -> Outcome:
    """The call must return, or raise the library's own error naming a field; nothing else escapes."""
    import infercast
    from infercast.errors import InfercastError

    name, args, kwargs = case.payload

    def alarm(signum, frame):  # pragma: no cover - only on hangs
        raise CaseTimeout()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        getattr(infercast, name)(*args, **kwargs)
        return Outcome("ok", 0, "", "")
    except InfercastError as exc:
        if not exc.field:
            return Outcome("bad_error", 2, "", str(exc), "InfercastError without a field")
        return Outcome("ok", 2, "", str(exc))
    except CaseTimeout:
        return Outcome("hang", "timeout", "", "")
    except Exception as exc:
        return Outcome("traceback", "exception", "", f"{type(exc).__name__}: {exc}"[:300], f"{type(exc).__name__}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.chdir(cwd)


ALL_STRATEGIES = {
    "cli_predict": predict_case(),
    "cli_memory": memory_case(),
    "cli_sweep": sweep_case(),
    "cli_simulate": simulate_case(),
    "config_json": config_json_case(),
    "hardware_yaml": hardware_yaml_case(),
    "traces": trace_case(),
    "output_paths": output_path_case(),
    "cli_analysis": analysis_case(),
    "cli_plan": plan_case(),
    "bench_files": bench_file_case(),
    "data_csv": data_csv_case(),
    "engine_cmds": engine_cmd_case(),
    "serve": serve_case(),
    "python_api": api_case(),
}
"""Every boundary the fuzz covers, by name (the campaign draws from each in turn)."""
