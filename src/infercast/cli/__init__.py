"""The ``infercast`` command-line interface (typer). Every command has ``--json``."""

from __future__ import annotations

import sys

import typer

from infercast.cli import catalog_cmds, memory_cmd, predict_cmd
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


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one line on stderr and exit status 2, never a traceback.

    Usage errors (unknown option, non-integer value) are reported by typer itself, also with status 2.
    """
    try:
        app(args=argv)
    except InfercastError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
