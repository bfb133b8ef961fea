"""The ``infercast`` command-line interface (typer). Every command has ``--json``."""

from __future__ import annotations

import sys

import typer

from infercast.cli import (
    analysis_cmds,
    calibration_cmds,
    catalog_cmds,
    engine_cmds,
    measure_cmd,
    memory_cmd,
    plan_cmd,
    predict_cmd,
    simulate_cmd,
    sweep_cmd,
)
from infercast.errors import InfercastError

app = typer.Typer(
    name="infercast",
    help="Predict, simulate and measure LLM serving performance.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("models")(catalog_cmds.models)
app.command("gpus")(catalog_cmds.gpus)
app.command("show-model")(catalog_cmds.show_model)
app.command("memory")(memory_cmd.memory)
app.command("predict")(predict_cmd.predict)
app.command("sweep")(sweep_cmd.sweep)
app.command("compare")(analysis_cmds.compare)
app.command("roofline")(analysis_cmds.roofline)
app.command("select")(analysis_cmds.select)
app.command("crossover")(analysis_cmds.crossover)
app.command("simulate")(simulate_cmd.simulate)
app.command("plan")(plan_cmd.plan)
app.command("measure")(measure_cmd.measure)
app.command("calibrate")(calibration_cmds.calibrate)
app.command("validate")(calibration_cmds.validate)
app.command("calibrate-cpu")(engine_cmds.calibrate_cpu)
app.command("validate-sim")(engine_cmds.validate_sim)

MULTI_VALUE_OPTIONS = ("--goodput", "--slo")
"""Options that take several space-separated values, as in ``vllm bench serve --goodput ttft:200 tpot:50``."""


def _join_multi_values(argv: list[str]) -> list[str]:
    """Fold ``--goodput a b`` (or ``--slo a b``) into ``--goodput "a b"`` (typer options take one value each)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        out.append(arg)
        i += 1
        if arg in MULTI_VALUE_OPTIONS:
            values = []
            while i < len(argv) and not argv[i].startswith("--"):
                values.append(argv[i])
                i += 1
            out.append(" ".join(values))
    return out


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one line on stderr and exit status 2, never a traceback.

    Usage errors (unknown option, non-integer value) are reported by typer itself, also with status 2.
    """
    args = _join_multi_values(list(sys.argv[1:] if argv is None else argv))
    try:
        app(args=args)
    except InfercastError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
