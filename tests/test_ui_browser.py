"""End to end in a real headless browser (Chromium + chromedriver from Debian's packages): each page is filled
in, run, and its numbers checked against the Python API's for the same inputs; a bad input shows its message;
a screenshot of each page is saved (to INFERCAST_UI_SCREENSHOTS, else a temporary folder)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.ui_driver import browser_missing

REASON = browser_missing()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no browser test: {REASON}")

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    where = os.environ.get("INFERCAST_UI_SCREENSHOTS")
    folder = Path(where) if where else tmp_path_factory.mktemp("ui-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    from infercast.ui.app import create_app
    from tests.ui_driver import chrome, live_server

    with live_server(create_app(root=tmp_path_factory.mktemp("ui-root"))) as base, chrome() as driver:
        yield base, driver


def test_predict_page_matches_the_api(ui, shots):
    import infercast
    from tests.ui_driver import run_page, screenshot

    base, driver = ui
    values = {"model": "llama-3.1-70b", "gpu": ["h100-sxm", "h200"], "tp": 4, "precision": "fp8"}
    values |= {"input_len": 2048, "output_len": 256, "batch": 16}
    assert run_page(driver, base, "predict", values) == "results"
    rows = driver.find_elements("css selector", "#predict-table tbody tr")
    assert [r.get_attribute("data-gpu") for r in rows] == ["h100-sxm", "h200"]
    for row, gpu in zip(rows, ["h100-sxm", "h200"], strict=True):
        p = infercast.predict(
            "llama-3.1-70b", gpu, tp=4, precision="fp8", input_len=2048, output_len=256, batch=16, strict=False
        )
        ttft = row.find_element("css selector", ".ttft .num")
        assert float(ttft.get_attribute("data-value")) == pytest.approx(p.ttft_s * 1e3, rel=1e-12)
        assert ttft.text == f"{p.ttft_s * 1e3:.1f}"
        tpot = row.find_element("css selector", ".tpot .num")
        assert tpot.text == f"{p.tpot_s * 1e3:.2f}"
    assert "tp=4" in driver.current_url and "gpu=h200" in driver.current_url  # a shareable address
    driver.find_element("id", "copy-cli").click()
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 5, poll_frequency=0.05).until(lambda d: d.find_element("id", "copy-cli").text == "Copied")
    assert screenshot(driver, shots / "ui-predict.png").stat().st_size > 20_000


def test_predict_bad_input_shows_its_message(ui):
    import infercast
    from infercast.errors import InfercastError
    from tests.ui_driver import run_page

    base, driver = ui
    assert run_page(driver, base, "predict", {"tp": 3, "gpu": ["h100-sxm"]}) == "error"
    with pytest.raises(InfercastError) as exc:
        infercast.predict("llama-3.1-8b", "h100-sxm", tp=3, input_len=2048, output_len=256)
    assert driver.find_element("id", "error-tp").text == str(exc.value)


def test_simulate_page_matches_the_api(ui, shots):
    import infercast
    from tests.ui_driver import number, run_page, screenshot

    base, driver = ui
    values = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "input_len": "lognormal:1000,0.6", "output_len": 256}
    values |= {"num_requests": 400, "rate": 12, "goodput": "ttft:500 tpot:50"}
    assert run_page(driver, base, "simulate", values) == "results"
    api = infercast.simulate(
        "llama-3.1-8b",
        "h100-sxm",
        input_len="lognormal:1000,0.6",
        output_len=256,
        num_requests=400,
        rate=12,
        goodput="ttft:500 tpot:50",
    ).summary.to_dict()
    assert number(driver, "#ttft-p99") == pytest.approx(api["ttft_s"]["p99"], rel=1e-12)
    assert number(driver, "#tpot-p50") == pytest.approx(api["tpot_s"]["p50"], rel=1e-12)
    assert number(driver, "#goodput") == pytest.approx(api["goodput_req_s"], rel=1e-12)
    assert driver.find_element("id", "download-trace").get_attribute("href").endswith("/trace.json.gz")
    assert screenshot(driver, shots / "ui-simulate.png").stat().st_size > 20_000


def test_plan_page_matches_the_api(ui, shots):
    import infercast
    from tests.ui_driver import number, run_page, screenshot

    base, driver = ui
    values = {"model": "llama-3.1-8b", "gpus": ["h100-sxm", "a100-80gb"], "precisions": ["bf16", "fp8"]}
    values |= {"tps": "1,2", "rate": 20}
    assert run_page(driver, base, "plan", values) == "results"
    api = infercast.plan(
        "llama-3.1-8b",
        ["h100-sxm", "a100-80gb"],
        slo="ttft:p99:500ms tpot:p90:50ms",
        rate=20,
        input_len=1024,
        output_len=256,
        precisions=["bf16", "fp8"],
        tps=[1, 2],
        executor="serial",
    )
    assert number(driver, "#chosen-usd-mtok") == pytest.approx(api.chosen["usd_per_mtok_output"], rel=1e-12)
    assert api.chosen["label"] in driver.find_element("id", "plan-chosen").text
    assert driver.find_element("id", "plan-launch").text.splitlines()[1] == api.launch[1]
    assert screenshot(driver, shots / "ui-plan.png").stat().st_size > 20_000


def test_validate_page_uploads_compares_and_fits(ui, shots):
    from infercast.ui import bench_adapter
    from tests.ui_driver import fill, screenshot

    base, driver = ui
    bench = FIXTURES / "bench" / "guidellm_benchmarks.json"
    driver.get(f"{base}/validate")
    driver.find_element("id", "upload-bench").send_keys(str(bench))
    driver.find_element("css selector", "form.upload button").click()
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30).until(lambda d: "bench=upload" in d.current_url)  # back on the page, file named
    fill(driver, {"gpu": "h100-sxm", "tp": 1, "engine": "vllm"})
    driver.find_element("id", "run").click()
    WebDriverWait(driver, 120).until(lambda d: d.find_elements("id", "results"))
    recs = bench_adapter.records(str(bench), "auto", {"gpu": "h100-sxm", "tp": 1, "engine": "vllm"})
    points, _, _ = bench_adapter.compare(recs)
    shown = [
        float(e.get_attribute("data-value"))
        for e in driver.find_elements("css selector", "#validate-points .predicted .num")
    ]
    assert shown == pytest.approx([p["predicted"] for p in points], rel=1e-12)
    assert driver.find_element("id", "download-profile").get_attribute("href").endswith("/h100-sxm.yaml")
    assert screenshot(driver, shots / "ui-validate.png").stat().st_size > 20_000
