"""Running the real ``infercast`` entry point in tests: exit status, stdout and stderr, or the parsed JSON."""

from __future__ import annotations

import json

from infercast.cli import main


def run(capsys, *args: str) -> tuple[int, str, str]:
    """Call ``infercast ARGS`` as the console script does; returns (exit status, stdout, stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def run_json(capsys, *args: str) -> dict:
    """``infercast ARGS --json``, which must succeed; returns the parsed output."""
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)
