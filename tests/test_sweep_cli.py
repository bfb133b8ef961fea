"""`infercast sweep` on the command line: --out formats and folders, --eps / --kv-precisions, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.cli_helpers import run

SMALL = ["--batches", "1,8", "--input-lens", "512", "--output-lens", "64"]


@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet"])
def test_out_writes_every_row_in_the_format_of_its_extension(capsys, tmp_path: Path, suffix: str):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    out = tmp_path / f"rows{suffix}"
    code, stdout, err = run(capsys, "sweep", *SMALL, "--out", str(out))
    assert code == 0, err
    read = {".csv": pd.read_csv, ".json": pd.read_json, ".parquet": pd.read_parquet}[suffix]
    df = read(out)
    assert len(df) == 2 and sorted(df["batch"]) == [1, 8] and (df["ttft_s"] > 0).all()
    assert "written to" in stdout


@pytest.mark.parametrize(
    ("name", "message"),
    [("rows.xlsx", "must end in .csv, .parquet, .json"), ("missing/dir/rows.csv", "does not exist")],
)
def test_bad_out_paths_fail_before_sweeping(capsys, tmp_path: Path, name: str, message: str):
    out = tmp_path / name
    code, _, err = run(capsys, "sweep", *SMALL, "--out", str(out))
    assert code == 2 and err.startswith("error: out: ") and message in err
    assert not out.exists() and len(err.strip().splitlines()) == 1


def test_eps_and_kv_precisions(capsys):
    code, out, err = run(
        capsys,
        "sweep",
        "--models",
        "qwen3-30b-a3b",
        "--tps",
        "2",
        "--eps",
        "1,2,4",
        "--kv-precisions",
        "bf16,fp8",
        *SMALL,
        "--json",
    )
    assert code == 0, err
    payload = json.loads(out)
    combos = {(r["ep"], r["kv_precision"]) for r in payload["rows"]}
    assert combos == {(1, "bf16"), (1, "fp8"), (2, "bf16"), (2, "fp8")}
    skipped = payload["skipped"]
    assert {s["ep"] for s in skipped} == {4} and all(s["field"] == "ep" for s in skipped)


def test_no_valid_configuration_names_the_field(capsys):
    code, _, err = run(capsys, "sweep", "--gpus", "a100-80gb", "--precisions", "fp8", *SMALL)
    assert code == 2 and err.startswith("error: precision: no valid configuration")
    code, _, err = run(capsys, "sweep", "--eps", "0", *SMALL)
    assert code == 2 and err.startswith("error: eps:")
