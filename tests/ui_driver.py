"""Drive ``infercast ui`` in a real headless browser (Chromium + chromedriver from Debian's packages, Selenium):
a live server on loopback, form filling, waiting for results, full-page screenshots. Shared by
tests/test_ui_browser.py and scripts/ui_screenshots.py."""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    for module in ("fastapi", "uvicorn", "plotly", "selenium"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install -e '.[ui]')"
    if not any(shutil.which(b) for b in CHROMIUM):
        return "no Chromium (apt-get install -y chromium chromium-driver)"
    if not shutil.which("chromedriver"):
        return "no chromedriver (apt-get install -y chromium-driver)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def live_server(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port in a thread; yields its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the UI server did not start within 30 s")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.contextmanager
def chrome(width: int = 1440, height: int = 1000) -> Iterator[Any]:
    """A headless Chromium driven by the system chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    binary = next((shutil.which(b) for b in CHROMIUM if shutil.which(b)), None)
    if binary:
        options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    options.add_argument(f"--window-size={width},{height}")
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def fill(driver: Any, values: dict[str, Any]) -> None:
    """Set the page form's fields: text inputs typed, selects chosen (a list: a multi-select's choices)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    for name, value in values.items():
        el = driver.find_element(By.ID, f"f-{name}")
        if el.tag_name == "select":
            select = Select(el)
            if select.is_multiple:
                select.deselect_all()
            for v in value if isinstance(value, list) else [value]:
                select.select_by_value(str(v))
        else:
            el.clear()
            el.send_keys(str(value))


def run_page(driver: Any, base: str, page: str, values: dict[str, Any], timeout: float = 120) -> str:
    """Open ``page``, fill it, press Run and wait for its results (or a field error); returns the outcome:
    "results" or "error"."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{base}/{page}")
    fill(driver, values)
    driver.find_element(By.ID, "run").click()

    def outcome(d: Any) -> str | bool:
        if d.find_elements(By.ID, "results"):
            charts = d.find_elements(By.CSS_SELECTOR, ".chart")
            return "results" if all(c.get_attribute("data-drawn") == "1" for c in charts) else False
        if d.find_elements(By.CSS_SELECTOR, ".field-error, .banner.error"):
            return "error"
        return False

    return WebDriverWait(driver, timeout, poll_frequency=0.25).until(outcome)


def number(driver: Any, css: str) -> float:
    """The raw value behind a displayed number (its ``data-value``)."""
    from selenium.webdriver.common.by import By

    return float(driver.find_element(By.CSS_SELECTOR, css).get_attribute("data-value"))


def screenshot(driver: Any, path: Path) -> Path:
    """A full-page PNG (the window stretched to the page's height for the shot)."""
    width = driver.execute_script("return document.documentElement.scrollWidth")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    size = driver.get_window_size()
    driver.set_window_size(max(size["width"], width), min(height + 40, 6000))
    time.sleep(0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    driver.set_window_size(size["width"], size["height"])
    return path
