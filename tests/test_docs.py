"""The docs stay true: docs/cli.md is the generated one, relative links resolve, --version is pyproject's."""

from __future__ import annotations

import importlib.util
import json
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from tests.cli_helpers import run

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def _generator():
    spec = importlib.util.spec_from_file_location("gen_cli_docs", ROOT / "scripts" / "gen_cli_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_generated_from_the_app():
    committed = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert committed == _generator().render(), "docs/cli.md is stale: run python scripts/gen_cli_docs.py"


def test_cli_reference_lists_every_command_and_option():
    import typer.main

    from infercast.cli import app

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    group = typer.main.get_command(app)
    for name, command in group.commands.items():
        assert f"## `{name}`" in text
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert f"`{opt}`" in text, f"{name} {opt} missing from docs/cli.md"


def _relative_links(path: Path) -> list[str]:
    text = INLINE_CODE.sub("", FENCE.sub("", path.read_text(encoding="utf-8")))
    targets = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (https:, mailto:) or an anchor on the same page
        targets.append(target.split("#", 1)[0])
    return targets


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path):
    missing = [t for t in _relative_links(path) if not (path.parent / t).exists()]
    assert not missing, f"{path.relative_to(ROOT)} links to missing files: {missing}"


def test_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[ok](page.md) [gone](nothing.md#x) [web](https://example.com) `[no](code.md)`\n")
    assert [t for t in _relative_links(page) if not (tmp_path / t).exists()] == ["nothing.md"]


def test_readme_is_short_and_leads_with_the_two_commands():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    head = "\n".join(lines[:20])
    assert "pip install -e . && infercast predict" in head
    assert 'python -m pip install -e ".[dev]" && python -m pytest -q' in head


def test_version_comes_from_the_installed_metadata(monkeypatch, capsys):
    import infercast

    saved = vars(infercast).pop("__version__", None)
    monkeypatch.setattr(metadata, "version", lambda name: "9.8.7" if name == "infercast" else "0")
    try:
        code, out, _ = run(capsys, "--version")
    finally:
        vars(infercast).pop("__version__", None)  # drop the cached fake
        if saved is not None:
            infercast.__version__ = saved
    assert code == 0 and out.strip() == "infercast 9.8.7"


def test_version_matches_pyproject(capsys):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    dist = metadata.distribution("infercast")
    url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
    if url.startswith("file://") and Path(url[len("file://") :]).resolve() != ROOT:
        pytest.skip(f"the installed infercast is another checkout ({url}); install this one to check --version")
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"infercast {project['version']}"


def test_every_docs_page_is_in_the_site_nav():
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["strict"] is True and config["docs_dir"] == "docs"
    in_nav = {page for entry in config["nav"] for page in entry.values()}
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert pages <= in_nav, f"pages missing from mkdocs.yml's nav: {sorted(pages - in_nav)}"
    assert in_nav <= pages, f"nav entries without a page: {sorted(in_nav - pages)}"


def test_accuracy_headline_is_the_generated_tables():
    """README's and docs/accuracy.md's accuracy figures are copied by a script, never typed by hand."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parent.parent / "scripts" / "sync_accuracy_docs.py"
    out = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr + " (run: python scripts/sync_accuracy_docs.py)"
