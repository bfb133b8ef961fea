"""Re-run the README's example commands and paste their real output under each one.

Every fenced block in README.md that starts with ``$ infercast ...`` (continued with trailing backslashes) is
run at a 120-column terminal and its output replaces the rest of the block.

    python scripts/readme_examples.py
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"```\n(\$ infercast .*?)```\n", re.S)


def _run(block: str) -> str:
    lines = block.splitlines()
    n = 1
    while lines[n - 1].endswith("\\"):
        n += 1
    command = " ".join(line.rstrip("\\").strip() for line in lines[:n]).removeprefix("$ ")
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1", "TERM": "dumb"}
    cli = [sys.executable, "-m", "infercast", *shlex.split(command)[1:]]
    out = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"{command!r} failed: {out.stderr.strip()}")
    body = "\n".join(line.rstrip() for line in (out.stdout + out.stderr).rstrip("\n").splitlines())
    return "\n".join(lines[:n]) + "\n" + body + "\n"


def main() -> int:
    text = README.read_text(encoding="utf-8")
    new = BLOCK.sub(lambda m: "```\n" + _run(m.group(1)) + "```\n", text)
    README.write_text(new, encoding="utf-8")
    print("README examples: " + ("updated" if new != text else "unchanged"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
