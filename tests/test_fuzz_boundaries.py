"""Property-based fuzz of every input boundary (issues 10 and 37): CLI arguments of every command, config.json,
hardware YAML, CSV/JSONL traces, output paths, benchmark result files, measurement CSVs, the serve endpoint and
the Python API. Each case must end in exit 0 with a sane answer or exit 2 with one line: never a
traceback, a hang or a silent wrong answer (see tests/fuzz_harness.py for the oracle).

CI profile: a few hundred cases in total (well under a minute or two). By hand, the long profile:
``INFERCAST_FUZZ=long python -m pytest tests/test_fuzz_boundaries.py`` (10x the cases); the campaign with
counts: ``python scripts/fuzz_campaign.py``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz_harness import ALL_STRATEGIES, Case, run_case

LONG = os.environ.get("INFERCAST_FUZZ") == "long"
NEEDS_TORCH = ("serve",)
"""Boundaries that start the CPU engine (skipped where torch is not installed)."""
EXAMPLES = {
    "cli_predict": 40,
    "cli_memory": 40,
    "cli_sweep": 30,
    "cli_simulate": 35,
    "config_json": 40,
    "hardware_yaml": 30,
    "traces": 35,
    "output_paths": 20,
    "cli_analysis": 20,
    "cli_plan": 10,
    "bench_files": 20,
    "data_csv": 15,
    "engine_cmds": 15,
    "serve": 20,
    "python_api": 30,
}
"""Cases per boundary in CI (400 in all, ~40 s on an idle 2-core machine); the long profile runs ten times as many."""


def _check(case: Case) -> None:
    with tempfile.TemporaryDirectory(prefix="infercast-fuzz-") as folder:
        outcome = run_case(case, Path(folder), seconds=60 if LONG else 30)
    assert outcome.kind == "ok", (
        f"{outcome.kind} (exit {outcome.code}) for infercast {' '.join(case.args)}: {outcome.detail}\n"
        f"stderr: {outcome.stderr[-2000:]}"
    )


def _fuzz(name: str):
    @settings(
        max_examples=EXAMPLES[name] * (10 if LONG else 1),
        deadline=None,
        database=None,
        derandomize=not LONG,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=ALL_STRATEGIES[name])
    def test(case: Case) -> None:
        if name in NEEDS_TORCH:
            pytest.importorskip("torch")
        _check(case)

    test.__name__ = f"test_fuzz_{name}"
    return test


test_fuzz_cli_predict = _fuzz("cli_predict")
test_fuzz_cli_memory = _fuzz("cli_memory")
test_fuzz_cli_sweep = _fuzz("cli_sweep")
test_fuzz_cli_simulate = _fuzz("cli_simulate")
test_fuzz_config_json = _fuzz("config_json")
test_fuzz_hardware_yaml = _fuzz("hardware_yaml")
test_fuzz_traces = _fuzz("traces")
test_fuzz_output_paths = _fuzz("output_paths")
test_fuzz_cli_analysis = _fuzz("cli_analysis")
test_fuzz_cli_plan = _fuzz("cli_plan")
test_fuzz_bench_files = _fuzz("bench_files")
test_fuzz_data_csv = _fuzz("data_csv")
test_fuzz_engine_cmds = _fuzz("engine_cmds")
test_fuzz_serve = _fuzz("serve")
test_fuzz_python_api = _fuzz("python_api")


def test_every_boundary_runs_in_ci():
    """A boundary added to the campaign runs here too (at its CI size)."""
    assert set(EXAMPLES) == set(ALL_STRATEGIES)


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "--input-len", "10", "--output-len", "5", "--num-requests", "3", "--rate", "1", "--json"],
        ["predict", "--json"],
        ["memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--json"],
    ],
)
def test_oracle_accepts_sane_runs(args):
    """The oracle itself: valid runs classify as ok (so a failing fuzz case is the code's fault, not the oracle's)."""
    _check(Case(args, num_requests=3 if args[0] == "simulate" else None))
