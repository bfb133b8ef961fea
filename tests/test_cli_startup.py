"""What the CLI loads to answer the light commands: none of the heavy libraries that only simulation,
calibration, planning or measurement need (each adds a fraction of a second to every invocation)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("pandas", "scipy", "matplotlib", "torch", "pyarrow", "ray")

_PROBE = """
import contextlib, io, json, sys
heavy = json.loads(sys.argv[2])
sys.argv = ["infercast", *json.loads(sys.argv[1])]
from infercast.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
print(json.dumps({"code": code, "loaded": sorted(m for m in heavy if m in sys.modules),
                  "output": out.getvalue()}))
"""


def _run(args: list[str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["predict", "--json"],
        ["memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--json"],
        ["gpus", "--json"],
    ],
)
def test_light_commands_load_no_heavy_library(args):
    res = _run(args)
    assert res["code"] in (0, None), res["output"][-500:]
    assert res["output"].strip(), "the command printed nothing"
    assert res["loaded"] == [], f"infercast {' '.join(args)} imported {res['loaded']}"


def test_heavy_commands_still_load_what_they_need():
    """The lazy imports are real imports: a sweep builds its DataFrame with pandas."""
    res = _run(["sweep", "--batches", "1,8", "--input-lens", "512", "--output-lens", "128", "--json"])
    assert res["code"] in (0, None), res["output"][-500:]
    assert "pandas" in res["loaded"]
    assert json.loads(res["output"])["rows"]


def test_the_package_yaml_reads_the_same_with_the_fast_loader():
    """parse_package_yaml (libyaml's safe loader where present) gives the pure-Python safe loader's data for every
    YAML file the package ships."""
    from pathlib import Path

    import yaml

    import infercast
    from infercast.files import parse_package_yaml

    files = sorted(Path(infercast.__file__).parent.rglob("*.yaml"))
    assert len(files) >= 10
    for path in files:
        text = path.read_text()
        assert parse_package_yaml(text) == yaml.safe_load(text), path.name
