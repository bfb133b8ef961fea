"""The tutorial-style API: the seed tutorial's code cells run on infercast with only the import line changed.

The tutorial text is read from ``../shared/seeds/`` at test time (it is not part of this repository).
Its printed numbers come from another library's simplified formula, so the checks here are the physical
relations between infercast's own predictions, not the printed values.
"""

from __future__ import annotations

import ast
import contextlib
import io
import math
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

import infercast
from infercast import predict
from infercast.cost.profile import load_profile
from infercast.show import format_info, format_table, format_value, info, table
from infercast.specs.catalog import get_hardware, model_catalog
from infercast.tutorial_api import Accelerator, Hardware, Models, ServingModel, attribute_name
from infercast.units import quantity, ureg

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
LIBRARY = "mlsysim"
MAX_GAP = 40
"""Lines a cell may run on without parsing (an open bracket spanning them) before the scan gives up."""


# ----- cell extraction ----------------------------------------------------------------------------------


def _parse(src: str) -> ast.Module | None:
    try:
        return ast.parse(textwrap.dedent(src))
    except (SyntaxError, ValueError):
        return None


def _stored_names(node: ast.AST) -> set[str]:
    """Names a statement binds: assignment/for targets, imports, defs."""
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            out.add(sub.id)
        elif isinstance(sub, ast.Import | ast.ImportFrom):
            out.update((a.asname or a.name).split(".")[0] for a in sub.names)
        elif isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(sub.name)
    return out


def _loaded_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _mentions_library(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Import) and any(a.name.split(".")[0] == LIBRARY for a in sub.names):
            return True
        if isinstance(sub, ast.ImportFrom) and (sub.module or "").split(".")[0] == LIBRARY:
            return True
        if isinstance(sub, ast.Name) and sub.id == LIBRARY:
            return True
    return False


def _longest_run(lines: list[str], start: int) -> tuple[int, ast.Module | None]:
    """End (exclusive) of the longest run of lines from ``start`` that parses with at least one statement."""
    best, best_tree, misses = start, None, 0
    for end in range(start + 1, len(lines) + 1):
        tree = _parse("\n".join(lines[start:end]))
        if tree is not None and tree.body:
            best, best_tree, misses = end, tree, 0
        elif tree is None:
            misses += 1
            if misses > MAX_GAP:
                break
    return best, best_tree


def extract_cells(text: str) -> list[str]:
    """Python cells of a tutorial rendered as plain text, in order.

    Scans for maximal runs of consecutive lines that parse as Python. Within a run, bare expression
    statements that touch nothing known (a stray heading word such as ``Note``) are dropped; a run is a
    cell when what remains uses the library or a name bound by an earlier cell. Prose sentences and
    printed tables do not parse, so they end a run.
    """
    lines = text.splitlines()
    known: set[str] = set()
    cells: list[str] = []
    i = 0
    while i < len(lines):
        end, tree = _longest_run(lines, i)
        if tree is None:
            i += 1
            continue
        kept: list[ast.stmt] = []
        bound = set(known)
        for stmt in tree.body:
            if isinstance(stmt, ast.Expr) and not (_loaded_names(stmt) & bound or _mentions_library(stmt)):
                continue
            kept.append(stmt)
            bound |= _stored_names(stmt)
        relevant = any(_mentions_library(s) or _loaded_names(s) & known for s in kept)
        if kept and relevant:
            first, last = kept[0].lineno - 1, kept[-1].end_lineno or kept[-1].lineno
            cells.append(textwrap.dedent("\n".join(lines[i + first : i + last])))
            known = bound
        i = end
    return cells


_IMPORT = re.compile(rf"^(\s*)import {LIBRARY}\s*$", re.M)
_FROM = re.compile(rf"^(\s*)from {LIBRARY}((?:\.\w+)*) import ", re.M)


def to_infercast(cell: str) -> str:
    """The only change a cell gets: the library's import lines point at infercast."""
    cell = _IMPORT.sub(rf"\1import infercast as {LIBRARY}", cell)
    return _FROM.sub(r"\1from infercast\2 import ", cell)


def _snapshot(value: Any) -> Any:
    return [list(r) if isinstance(r, list | tuple) else r for r in value] if isinstance(value, list) else value


@pytest.fixture(scope="module")
def tutorial() -> dict[str, Any]:
    """Run every cell of the seed tutorial, in order, in one namespace; keep outputs and ``rows`` tables."""
    if not SEEDS.is_dir():
        pytest.skip(f"tutorial seeds not found at {SEEDS} (expected ../shared/seeds beside the checkout)")
    paths = sorted(SEEDS.glob("000_*.txt"))
    if not paths:
        pytest.skip(f"no 000_*.txt tutorial in {SEEDS}")
    cells = extract_cells(paths[0].read_text(encoding="utf-8"))
    ns: dict[str, Any] = {"__name__": "__tutorial__"}
    outputs: list[str] = []
    tables: list[list[Any]] = []
    for n, cell in enumerate(cells):
        code = to_infercast(cell)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            try:
                exec(compile(code, f"<tutorial cell {n}>", "exec"), ns)
            except Exception as exc:
                pytest.fail(f"tutorial cell {n} failed: {exc!r}\n{code}")
        outputs.append(buf.getvalue())
        if "rows" in ns and (not tables or ns["rows"] is not tables[-1][1]):
            tables.append([_snapshot(ns["rows"]), ns["rows"]])
    return {"cells": cells, "ns": ns, "outputs": outputs, "tables": [t[0] for t in tables]}


def _table(tutorial: dict[str, Any], labels: list[str]) -> dict[str, list[Any]]:
    for rows in tutorial["tables"]:
        if [r[0] for r in rows] == labels:
            return {r[0]: r for r in rows}
    raise AssertionError(f"no table with rows {labels}; got {[[r[0] for r in t] for t in tutorial['tables']]}")


def _ms(q: Any) -> float:
    return float(q.to("ms").magnitude)


# ----- the tutorial runs ----------------------------------------------------------------------------------


def test_extracts_every_cell(tutorial: dict[str, Any]) -> None:
    cells = tutorial["cells"]
    assert len(cells) >= 5
    joined = "\n".join(cells)
    for needle in ("import mlsysim", "ServingModel()", "from mlsysim.show import", "Hardware.Cloud.T4", '"int4"'):
        assert needle in joined
    for cell in cells:  # no prose or printed output swallowed
        assert "──" not in cell and "TFLOPs/s  " not in cell
        assert ast.parse(cell)


def test_import_substitution_only() -> None:
    lines = [f"import {LIBRARY}", f"from {LIBRARY} import ServingModel", f"from {LIBRARY}.show import info"]
    cell = "\n".join([*lines, f"x = {LIBRARY}.Models"])
    out = to_infercast(cell)
    assert out.splitlines() == [
        f"import infercast as {LIBRARY}",
        "from infercast import ServingModel",
        "from infercast.show import info",
        f"x = {LIBRARY}.Models",
    ]


def test_extractor_skips_prose_and_output() -> None:
    text = "\n".join(
        [
            "Heading",
            "",
            "Some prose that explains things (not code).",
            f"import {LIBRARY}",
            "a = 1",
            "",
            "b = [",
            "    a,",
            "]",
            "name    value",
            "A100    312 TFLOPs/s",
            "Note",
            "More prose, then code that uses b:",
            "print(b)",
            "Total: 3 items",
            "unrelated = 5",
        ]
    )
    cells = extract_cells(text)
    assert cells == [f"import {LIBRARY}\na = 1\n\nb = [\n    a,\n]", "print(b)"]


def test_all_cells_print(tutorial: dict[str, Any]) -> None:
    text = "".join(tutorial["outputs"])
    assert "TTFT prefill:" in text and "ITL per token:" in text and "Memory utilization:" in text
    assert re.search(r"H100\s+989\.4 TFLOPs/s\s+3\.35 TB/s", text)
    assert "PASS" in text


def test_prefill_tracks_compute_decode_tracks_bandwidth(tutorial: dict[str, Any]) -> None:
    gpus = _table(tutorial, ["A100", "H100", "H200"])
    ttft = {k: _ms(r[3]) for k, r in gpus.items()}
    itl = {k: _ms(r[4]) for k, r in gpus.items()}
    assert ttft["A100"] > 1.5 * ttft["H100"]  # 3.2x the FLOP/s
    assert ttft["H200"] == pytest.approx(ttft["H100"], rel=0.15)  # same compute (H200 only adds bandwidth)
    assert itl["H200"] < itl["H100"] < itl["A100"]  # bandwidth order
    assert gpus["A100"][1].to("TFLOPs/s").magnitude == pytest.approx(312)


def test_quantization_helps_decode_not_w4a16_prefill(tutorial: dict[str, Any]) -> None:
    prec = _table(tutorial, ["fp16", "int8", "int4"])
    # TTFT = the engine's fitted per-request overhead (the same at every precision; fitted on closed-loop serving
    # runs) + prefill: the prefill part is what the number format changes
    h100 = get_hardware("h100-sxm")
    overhead_ms = 1e3 * load_profile(h100.id, h100.architecture, "vllm").request_overhead_s
    ttft = {k: _ms(r[1]) - overhead_ms for k, r in prec.items()}
    itl = {k: _ms(r[2]) for k, r in prec.items()}
    weights = {k: r[3].to("GB").magnitude for k, r in prec.items()}
    assert itl["int4"] < itl["int8"] < itl["fp16"]
    assert weights["int4"] < weights["int8"] < weights["fp16"]
    assert ttft["int8"] < 0.85 * ttft["fp16"]  # W8A8 multiplies at the int8 rate
    assert ttft["int4"] == pytest.approx(ttft["fp16"], rel=0.10)  # W4A16 still multiplies in 16 bits


def test_decode_and_prefill_respect_rooflines(tutorial: dict[str, Any]) -> None:
    ns = tutorial["ns"]
    result, hw, model = ns["result"], ns["hardware"], ns["model"]
    bw = hw.memory.bandwidth.to("B/s").magnitude
    peak = hw.compute.peak_flops.to("FLOP/s").magnitude
    assert result.itl.to("s").magnitude >= result.model_weights_size.to("B").magnitude / bw
    tokens = 2048
    linear_flops = 2 * model.dense_linear_params * tokens
    assert result.prediction.prefill.flops >= linear_flops
    assert result.ttft.to("s").magnitude >= result.prediction.prefill.flops / peak
    assert result.model_weights_size.to("GB").magnitude == pytest.approx(16.06, rel=0.01)
    assert 0 < result.memory_utilization < 1 and result.feasible


def test_sla_table(tutorial: dict[str, Any]) -> None:
    sla = _table(tutorial, ["T4", "A100", "H100", "H200"])
    assert sla["T4"][-1] == "FAIL"
    assert sla["H100"][-1] == "PASS" and sla["H200"][-1] == "PASS"
    ttft = {k: float(r[1].split()[0]) for k, r in sla.items()}
    assert ttft["T4"] > ttft["A100"] > ttft["H100"]


def test_t4_fp16_8b_reports_infeasible(tutorial: dict[str, Any]) -> None:
    ns = tutorial["ns"]
    r = ns["solver"].solve(model=ns["model"], hardware=Hardware.Cloud.T4, seq_len=2048, precision="fp16")
    assert r.feasible is False
    assert r.memory_utilization > 1
    assert math.isfinite(_ms(r.ttft)) and _ms(r.itl) > 0


def test_exercise_models_exist(tutorial: dict[str, Any]) -> None:
    ns = tutorial["ns"]
    big = ns["solver"].solve(model=infercast.Models.Llama3_70B, hardware=ns["hardware"], seq_len=2048)
    small = ns["result"]
    assert big.feasible is False  # 141 GB of fp16 weights on one 80 GB GPU
    assert _ms(big.itl) > 5 * _ms(small.itl)


# ----- Models / Hardware / ServingModel ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "name"),
    [
        ("llama-3-8b", "Llama3_8B"),
        ("llama-3.1-70b", "Llama3_1_70B"),
        ("qwen3-30b-a3b", "Qwen3_30B_A3B"),
        ("mixtral-8x7b", "Mixtral_8x7B"),
        ("gpt-oss-20b", "GptOss_20B"),
        ("deepseek-v3", "DeepSeek_V3"),
        ("qwen2.5-72b", "Qwen2_5_72B"),
        ("qwen3-0.6b", "Qwen3_0_6B"),
        ("phi-3-mini", "Phi3_Mini"),
        ("mistral-7b", "Mistral_7B"),
    ],
)
def test_model_attribute_names(model_id: str, name: str) -> None:
    assert attribute_name(model_id) == name
    if model_id in model_catalog():
        assert getattr(Models, name) is model_catalog()[model_id]


def test_every_catalog_model_has_a_unique_identifier() -> None:
    names = [attribute_name(i) for i in model_catalog()]
    assert len(set(names)) == len(names)
    assert all(n.isidentifier() for n in names)
    assert sorted(names) == dir(Models)
    assert infercast.Models is Models


def test_typo_names_close_matches() -> None:
    with pytest.raises(AttributeError, match="Llama3_8B"):
        _ = Models.Llama3_8b
    with pytest.raises(AttributeError, match="H100"):
        _ = Hardware.Cloud.H10O
    with pytest.raises(AttributeError):
        Models.Foo = 1


def test_hardware_quantities() -> None:
    h100 = Hardware.Cloud.H100
    assert isinstance(h100, Accelerator) and h100.spec.id == "h100-sxm"
    assert h100.compute.peak_flops.to("TFLOPs/s").magnitude == pytest.approx(989.4)
    assert h100.compute.peak_flops.to("TFLOP/s").magnitude == pytest.approx(989.4)
    assert h100.memory.bandwidth.to("TB/s").magnitude == pytest.approx(3.35)
    assert h100.memory.capacity.to("GiB").magnitude == pytest.approx(80)
    assert "H100" in repr(h100) and "989.4 TFLOPs/s" in repr(h100)
    assert Hardware.Cloud.A100.spec.id == "a100-80gb"
    assert Hardware.Cloud.A100_40GB.memory.bandwidth.to("TB/s").magnitude == pytest.approx(1.555)
    assert Hardware.Cloud.T4.compute.peak_flops.to("TFLOPs/s").magnitude == pytest.approx(65)  # fp16, no bf16
    assert Hardware.Consumer.RTX4090.spec.id == "rtx-4090"
    for name in ("L4", "A10G", "L40S", "H100_PCIe", "H200", "B200", "GB200", "MI300X", "MI325X"):
        assert getattr(Hardware.Cloud, name).memory.capacity.to("B").magnitude > 0


def test_solve_accepts_ids_and_specs_and_defines_itl() -> None:
    solver = ServingModel()
    a = solver.solve(Models.Llama3_8B, Hardware.Cloud.H100, seq_len=1024)
    b = solver.solve("llama-3-8b", Hardware.Cloud.H100.spec, seq_len=1024)
    c = solver.solve("llama-3-8b", "h100-sxm", seq_len=1024)
    assert a.ttft == b.ttft == c.ttft and a.itl == b.itl == c.itl
    # ITL is the first decode step (context seq_len + 1) of the batch
    p = predict("llama-3-8b", "h100-sxm", input_len=1024, output_len=2, precision="fp16")
    assert a.itl.to("s").magnitude == pytest.approx(p.tpot_s)
    assert a.ttft.to("s").magnitude == pytest.approx(p.ttft_s)
    batched = solver.solve(Models.Llama3_8B, Hardware.Cloud.H100, seq_len=1024, batch_size=8)
    extra_flops = 2 * Models.Llama3_8B.dense_linear_params * 7 * 1024  # 7 more prompts of 1024 tokens
    peak = Hardware.Cloud.H100.compute.peak_flops.to("FLOP/s").magnitude
    assert (batched.ttft - a.ttft).to("s").magnitude >= extra_flops / peak  # prefill work grows with tokens
    assert a.itl < batched.itl < 2 * a.itl  # decode re-reads the same weights for the batch
    assert batched.kv_cache_size.to("B").magnitude == pytest.approx(8 * a.kv_cache_size.to("B").magnitude)
    with pytest.raises(infercast.InfercastError, match="output_len"):
        solver.solve(Models.Llama3_8B, Hardware.Cloud.H100, seq_len=1024, output_len=1)


# ----- units and show --------------------------------------------------------------------------------


def test_units_parse_flops_and_si_bytes() -> None:
    q = quantity(312e12, "FLOP/s")
    assert f"{q.to('TFLOPs/s'):~P}" == "312.0 TFLOPs/s"
    assert ureg("GFLOPs").to("FLOP").magnitude == pytest.approx(1e9)
    assert quantity(1, "GB").to("B").magnitude == 1e9
    assert quantity(3.35e12, "B/s").to("TB/s").magnitude == pytest.approx(3.35)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (quantity(0.0665207, "s").to("ms"), "66.52 ms"),
        (quantity(16.0605e9, "B"), "16.06 GB"),
        (quantity(270.5e6, "B"), "270.5 MB"),
        (quantity(312e12, "FLOP/s").to("TFLOPs/s"), "312 TFLOPs/s"),
        (quantity(3.35e12, "B/s").to("TB/s"), "3.35 TB/s"),
        (quantity(2.0241, "s").to("ms"), "2024 ms"),
        (quantity(12.3456, "s").to("ms"), "12346 ms"),
        (0.2012, "0.2012"),
        (3, "3"),
        ("✓", "✓"),
    ],
)
def test_format_value(value: Any, text: str) -> None:
    assert format_value(value) == text


def test_info_aligns_fields(capsys: pytest.CaptureFixture[str]) -> None:
    info("Budget", Model_weights=quantity(16.06e9, "B"), KV=quantity(0.5e9, "B"), Share="20.1%")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("── Budget ") and set(lines[0][len("── Budget ") :]) == {"─"}
    assert lines[1:] == ["Model weights:  16.06 GB", "KV:             500 MB", "Share:          20.1%"]
    assert format_info("Budget", Share="x").splitlines()[1] == "Share:  x"


def test_table_aligns_columns(capsys: pytest.CaptureFixture[str]) -> None:
    table(["GPU", "TTFT"], [["A100", quantity(0.2109, "s").to("ms")], ["H100", "✓"]])
    out = capsys.readouterr().out.splitlines()
    assert out == ["GPU       TTFT", "──────────────", "A100  210.9 ms", "H100         ✓"]
    assert format_table(["a"], []) == "a\n─"


def test_show_is_exported() -> None:
    assert infercast.show.info is info
