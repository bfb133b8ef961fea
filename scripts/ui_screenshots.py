"""Screenshots of the web UI's pages (docs/ui-predict.png is the README's): run from the repository root,
``python scripts/ui_screenshots.py [OUT_DIR [PAGE ...]]`` (default: docs/ and the predict page; needs the ``ui``
extra, Chromium and chromedriver)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from infercast.ui.app import create_app  # noqa: E402
from tests.ui_driver import browser_missing, chrome, live_server, run_page, screenshot  # noqa: E402

PAGES = {
    "predict": {"model": "llama-3.1-70b", "gpu": ["h100-sxm", "h200", "b200"], "tp": 4, "precision": "fp8"}
    | {"input_len": 2048, "output_len": 256, "batch": 16},
    "simulate": {"model": "llama-3.1-8b", "gpu": "h100-sxm", "input_len": "lognormal:1000,0.6"}
    | {"output_len": 256, "num_requests": 600, "rate": 14, "goodput": "ttft:500 tpot:50"},
    "plan": {"model": "llama-3.1-8b", "gpus": ["h100-sxm", "a100-80gb", "l40s"], "precisions": ["bf16", "fp8"]}
    | {"tps": "1,2", "rate": 20},
}


def main(out: Path, pages: list[str]) -> None:
    reason = browser_missing()
    if reason:
        sys.exit(f"cannot take screenshots: {reason}")
    with live_server(create_app()) as base, chrome() as driver:
        for page in pages:
            values = PAGES[page]
            outcome = run_page(driver, base, page, values)
            if outcome != "results":
                sys.exit(f"{page}: the page showed an error instead of results")
            print(screenshot(driver, out / f"ui-{page}.png"))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs", sys.argv[2:] or ["predict"])
