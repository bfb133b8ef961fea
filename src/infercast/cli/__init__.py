"""The ``infercast`` command-line interface (typer). Every command has ``--json``."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import typer

try:  # typer >= 0.16 ships its own copy of click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_exceptions  # type: ignore[no-redef]  # the same module, older home

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
    ui_cmd,
)
from infercast.cli.flags import with_flags
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
app.command("serve")(engine_cmds.serve)
app.command("ui")(ui_cmd.ui)
for _command in app.registered_commands:  # library messages quote API names (`tp`); commands show their flags
    if _command.callback is not None:
        _command.callback = with_flags(_command.callback, fields=False)

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


def _version(value: bool) -> None:
    if value:
        from infercast import __version__

        print(f"infercast {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", callback=_version, is_eager=True
    ),
    profile: list[Path] | None = typer.Option(
        None,
        "--profile",
        help="A cost profile `infercast calibrate` wrote (FILE.yaml, repeatable; before or after the command): its "
        "fitted values replace the package's for its GPU in this run.",
    ),
) -> None:
    """Predict, simulate and measure LLM serving performance."""
    from infercast.cost.profile import use_profile_file

    for path in profile or []:
        use_profile_file(path)


def _hoist_profiles(argv: list[str]) -> list[str]:
    """Move every ``--profile FILE`` to the front, where the root command takes it: every command accepts it."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--profile" and i + 1 < len(argv):
            front += argv[i : i + 2]
            i += 2
            continue
        if arg.startswith("--profile="):
            front.append(arg)
        else:
            rest.append(arg)
        i += 1
    return front + rest


def _usage_field(exc: click_exceptions.UsageError) -> str | None:
    """The option a click usage error is about, as the field name (``--num-requests`` -> ``num_requests``)."""
    param = getattr(exc, "param", None)
    if param is not None and getattr(param, "name", None):
        return str(param.name)
    return None


def _report(message: str, field: str | None, allowed: list[str] | None, as_json: bool, code: int) -> None:
    """Print one error line on stderr (a JSON object under ``--json``) and exit with ``code``."""
    if as_json:
        error: dict[str, str | list[str] | None] = {"field": field, "message": message}
        if allowed:
            error["allowed"] = allowed
        print(json.dumps({"error": error, "exit_code": code}), file=sys.stderr)
    else:
        print(f"error: {f'{field}: ' if field else ''}{message}", file=sys.stderr)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every error is ONE line on stderr (a JSON object with ``--json``), never a traceback.

    Exit status 2: a user error (bad value, usage, a file that cannot be read or written, a configuration that
    does not fit). Exit status 1: an internal error (a bug, reported in one line; ``INFERCAST_DEBUG=1`` shows
    the traceback). Warnings raised while a command runs are held back: dropped when the command fails (the
    error line is what matters), printed after the output when it succeeds.
    """
    args = _hoist_profiles(_join_multi_values(list(sys.argv[1:] if argv is None else argv)))
    try:
        _main(args)
    finally:  # --profile holds for one run (tests call main many times in one process)
        profiles = sys.modules.get("infercast.cost.profile")  # not imported: nothing to clear (fast start)
        if profiles is not None:
            profiles.clear_profile_files()


def _main(args: list[str]) -> None:
    """:func:`main` after the arguments are arranged."""
    as_json = "--json" in args
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            status = app(args=args, standalone_mode=False)  # typer.Exit(code) comes back as the return value
        except InfercastError as exc:
            _report(exc.message, exc.field, exc.allowed, as_json, 2)
        except click_exceptions.NoArgsIsHelpError as exc:
            print(exc.ctx.get_help() if exc.ctx else exc.format_message())
            sys.exit(2)
        except click_exceptions.UsageError as exc:
            _report(" ".join(exc.format_message().split()), _usage_field(exc), None, as_json, 2)
        except typer.Abort:
            _report("aborted", None, None, as_json, 130)
        except click_exceptions.ClickException as exc:
            _report(" ".join(exc.format_message().split()), None, None, as_json, exc.exit_code or 2)
        except (SystemExit, KeyboardInterrupt):
            raise
        except OSError as exc:  # the OS refused a file operation (name too long, permissions, disk full)
            name = f": {exc.filename}" if getattr(exc, "filename", None) else ""
            _report(f"{exc.strerror or exc}{name}"[:400], None, None, as_json, 2)
        except Exception as exc:
            import os

            if os.environ.get("INFERCAST_DEBUG"):
                raise
            where = exc.__traceback__
            while where is not None and where.tb_next is not None:
                where = where.tb_next
            place = f" at {where.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{where.tb_lineno}" if where else ""
            text = " ".join(str(exc).split())[:300]
            _report(
                f"internal error {type(exc).__name__}{place}: {text} (please report; INFERCAST_DEBUG=1 shows "
                "the traceback)",
                None,
                None,
                as_json,
                1,
            )
    for w in caught:
        print(f"warning: {w.category.__name__}: {w.message}", file=sys.stderr)
    if isinstance(status, int) and status:
        sys.exit(status)
