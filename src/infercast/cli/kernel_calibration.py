"""`infercast calibrate --from aiconfigurator[:PATH]`: measured kernel profiles from aiconfigurator-core's tables."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from infercast.calibrate.kernel_fit import build_kernel_profile, write_kernel_profile
from infercast.cli.common import console, emit_json
from infercast.errors import InfercastError
from infercast.records.kernel_tables import GPU_DIRS, locate

KERNEL_PROFILE_DIR = Path(__file__).resolve().parents[1] / "cost" / "profiles" / "kernels"
SOURCES = ("aiconfigurator",)


def parse_source(text: str) -> tuple[str, str | None]:
    """'aiconfigurator' or 'aiconfigurator:PATH' -> (name, path or None); one error naming the allowed forms."""
    name, _, path = text.partition(":")
    if name not in SOURCES:
        raise InfercastError(
            f"unknown source {text!r}; allowed: aiconfigurator or aiconfigurator:PATH (an unpacked wheel)",
            field="from",
            allowed=list(SOURCES),
        )
    return name, path or None


def calibrate_kernels(
    source_text: str, gpus: list[str] | None, out: Path | None, install: bool, dry_run: bool, json_out: bool
) -> None:
    """Import the tables of each GPU, write ``<out>/kernels/<gpu>.yaml`` (or into the package), and report."""
    _, path = parse_source(source_text)
    source = locate(path)
    targets = gpus or [g for g, folder in GPU_DIRS.items() if (source.data / folder).is_dir()]
    for gpu in targets:
        if gpu not in GPU_DIRS:
            raise InfercastError(
                f"no aiconfigurator tables for {gpu!r}; known: {', '.join(GPU_DIRS)}",
                field="gpu",
                allowed=list(GPU_DIRS),
            )
    folder = KERNEL_PROFILE_DIR if install else (out or Path("infercast-profiles")) / "kernels"
    rows = []
    for gpu in targets:
        data = build_kernel_profile(source, gpu)
        written = None if dry_run else str(write_kernel_profile(data, folder / f"{gpu}.yaml"))
        rows.append(
            {
                "gpu": gpu,
                "source": data["source"],
                "kernels": data["kernels"],
                "fit": data["fit"],
                "collectives": {k: sorted(v) for k, v in data["collectives"].items()},
                "written": written,
            }
        )
    if json_out:
        emit_json({"profiles": rows})
        return
    table = Table(title=f"Kernel profiles from aiconfigurator-core {source.version}")
    for col in ("gpu", "fit (points, RMS log residual)", "collective curves", "written"):
        table.add_column(col)
    for r in rows:
        fits = "; ".join(f"{k} {v['points']}, {v['rms_log_residual']:.3f}" for k, v in r["fit"].items())
        coll = "; ".join(f"{k}: {', '.join(v)}" for k, v in r["collectives"].items())
        table.add_row(r["gpu"], fits or "-", coll or "-", r["written"] or "(dry run)")
    console.print(table)
    if install and not dry_run:
        console.print("installed: predictions use these kernel profiles from the next process on")
