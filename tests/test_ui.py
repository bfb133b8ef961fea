"""The web UI (``infercast ui``) through FastAPI's test client: every page and endpoint, numbers equal to the
Python API's, bad input answered with the CLI's line beside its field, the limits (upload size, run time,
runs at once, non-loopback binds) and 50 concurrent requests to a live server on loopback."""

from __future__ import annotations

import gzip
import html
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the ui extra is not installed (pip install -e '.[ui]')")
pytest.importorskip("uvicorn", reason="the ui extra is not installed (pip install -e '.[ui]')")
pytest.importorskip("plotly", reason="the ui extra is not installed (pip install -e '.[ui]')")
pytest.importorskip("multipart", reason="the ui extra is not installed (pip install -e '.[ui]')")
httpx = pytest.importorskip("httpx", reason="the ui extra is not installed (pip install -e '.[ui]')")

import warnings  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

import infercast  # noqa: E402
from infercast.errors import InfercastError  # noqa: E402
from infercast.ui import check_bind, is_loopback  # noqa: E402
from infercast.ui.app import Limits, create_app  # noqa: E402
from tests.cli_helpers import run  # noqa: E402
from tests.ui_driver import live_server  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
GUIDELLM = FIXTURES / "bench" / "guidellm_benchmarks.json"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    app = create_app(root=tmp_path_factory.mktemp("ui"))
    with TestClient(app) as c:
        yield c


def values(page: str, css_class: str) -> list[float]:
    """The raw numbers behind the cells of one column (their data-value)."""
    cells = re.findall(rf'class="{css_class}"><span class="num" data-value="([^"]+)"', page)
    return [float(v) for v in cells]


def field_error(page: str, name: str) -> str | None:
    hit = re.search(rf'id="error-{name}" role="alert">([^<]*)</div>', page)
    return html.unescape(hit.group(1)) if hit else None


def banners(page: str) -> list[str]:
    return [html.unescape(b) for b in re.findall(r'class="banner (?:error|warn)"[^>]*>([^<]*)', page)]


def finish(client, url: str, timeout: float = 120) -> tuple[str, dict]:
    """Open a job page, wait for its job, and reload it as the browser does; (page, job status)."""
    page = client.get(url).text
    job = re.search(r'data-job="(\w+)"', page)
    assert job, banners(page) or field_error(page, "run")
    deadline = time.monotonic() + timeout
    while (status := client.get(f"/api/jobs/{job.group(1)}").json())["state"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    return client.get(f"{url}&job={job.group(1)}").text, status


def cli_error(capsys, *args: str) -> str:
    code, _, err = run(capsys, *args)
    assert code == 2
    return err.strip().removeprefix("error: ")


# ----- pages and the numbers on them -----------------------------------------------------------------


@pytest.mark.parametrize("page", ["predict", "simulate", "plan", "validate"])
def test_every_page_renders_its_form_offline(client, page):
    r = client.get(f"/{page}")
    assert r.status_code == 200
    assert 'id="inputs"' in r.text and 'id="copy-cli"' in r.text
    assert "http://" not in r.text and "https://" not in r.text  # no CDN: every asset from this server
    assert '<script src="/vendor/plotly.min.js">' in r.text
    js = client.get("/vendor/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000


def test_index_goes_to_predict(client):
    assert client.get("/", follow_redirects=False).headers["location"] == "/predict"


def test_predict_compares_gpus_with_the_api_numbers(client):
    query = "model=llama-3.1-8b&gpu=h100-sxm&gpu=h200&input_len=1024&output_len=256&batch=8&precision=fp8"
    page = client.get(f"/predict?run=1&{query}").text
    assert not any(field_error(page, f) for f in ("gpu", "precision")) and 'class="banner error"' not in page
    for i, gpu in enumerate(["h100-sxm", "h200"]):
        p = infercast.predict(
            "llama-3.1-8b", gpu, input_len=1024, output_len=256, batch=8, precision="fp8", strict=False
        )
        assert values(page, "ttft")[i] == pytest.approx(p.ttft_s * 1e3, rel=1e-12)
        assert values(page, "tpot")[i] == pytest.approx(p.tpot_s * 1e3, rel=1e-12)
        assert values(page, "out_tok_s")[i] == pytest.approx(p.output_throughput_tok_s, rel=1e-12)
        assert values(page, "max_concurrency")[i] == p.to_dict()["memory"]["max_concurrency"]
    for chart in ("chart-roofline", "chart-memory"):
        assert f'id="{chart}" data-figure=' in page
    assert "What would help" in page and "prefill" in page and "decode" in page
    assert '<option value="h200" selected>' in page  # the URL refills the form


def test_predict_copy_as_cli_command_gives_the_same_numbers(client, capsys):
    page = client.get("/predict?run=1&model=llama-3.1-8b&gpu=h200&input_len=512&output_len=128&batch=4&tp=2").text
    line = html.unescape(re.search(r'<pre id="cli-command">([^<]*)</pre>', page).group(1))
    args = line.split()[1:]
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    assert json.loads(out)["ttft_s"] * 1e3 == pytest.approx(values(page, "ttft")[0], rel=1e-12)


@pytest.mark.parametrize(
    ("query", "field", "cli"),
    [
        ("tp=3", "tp", ["predict", "--tp", "3"]),
        ("tp=abc", "tp", ["predict", "--tp", "abc"]),
        ("gpu=h100x", "gpu", ["predict", "--gpu", "h100x"]),
        ("precision=fp7", "precision", ["predict", "--precision", "fp7"]),
        ("input_len=0", "input_len", ["predict", "--input-len", "0"]),
    ],
)
def test_predict_bad_input_shows_the_cli_line_beside_the_field(client, capsys, query, field, cli):
    page = client.get(f"/predict?run=1&{query}").text
    assert field_error(page, field) == cli_error(capsys, *cli)
    assert "Traceback" not in page and 'id="results"' not in page


def test_predict_refuses_too_many_gpus_naming_the_limit(client):
    query = "&".join(f"gpu={g}" for g in [h.id for h in infercast.list_hardware()][:9])
    assert "at most 8 GPUs" in field_error(client.get(f"/predict?run=1&{query}").text, "gpu")


def test_predict_takes_an_uploaded_config(client, hf_configs):
    config = hf_configs / "qwen2.5-7b.json"
    r = client.post(
        "/upload",
        data={"back": "/predict?gpu=h200&run=1", "field": "model", "kind": "config"},
        files={"file": ("config.json", config.read_bytes())},
        follow_redirects=False,
    )
    assert r.status_code == 303 and "model=upload%3A" in r.headers["location"]
    page = client.get(r.headers["location"] + "&run=1").text
    expected = infercast.predict(str(config), "h200", input_len=2048, output_len=256, strict=False)
    assert values(page, "ttft")[0] == pytest.approx(expected.ttft_s * 1e3, rel=1e-12)
    assert "--model config.json" in html.unescape(page)


def test_simulate_runs_as_a_job_with_the_api_numbers_and_downloads(client):
    query = "model=llama-3.1-8b&gpu=h100-sxm&input_len=1024&output_len=256&num_requests=200&rate=5&goodput=ttft:200"
    page, status = finish(client, f"/simulate?run=1&{query}")
    assert status["state"] == "done" and status["fraction"] == 1.0
    api = infercast.simulate(
        "llama-3.1-8b", "h100-sxm", input_len=1024, output_len=256, num_requests=200, rate=5, goodput="ttft:200"
    )
    s = api.summary.to_dict()
    for key, expected in (("ttft-p99", s["ttft_s"]["p99"]), ("tpot-p50", s["tpot_s"]["p50"])):
        shown = float(re.search(rf'id="{key}" data-value="([^"]+)"', page).group(1))
        assert shown == pytest.approx(expected, rel=1e-12)
    goodput = float(re.search(r'id="goodput" data-value="([^"]+)"', page).group(1))
    assert goodput == pytest.approx(s["goodput_req_s"], rel=1e-12)
    for chart in ("chart-ttft", "chart-tpot", "chart-e2e", "chart-timeline"):
        assert f'id="{chart}"' in page
    job = status["id"]
    csv = client.get(f"/jobs/{job}/requests.csv").text.splitlines()
    assert len(csv) == 201 and csv[0].startswith("request_id,")
    trace = json.loads(gzip.decompress(client.get(f"/jobs/{job}/trace.json.gz").content))
    assert trace["traceEvents"]
    assert client.get(f"/jobs/{job}/..%2Fsecret").status_code == 404


def test_simulate_warns_of_saturation_in_a_banner(client):
    query = "model=llama-3.1-8b&gpu=l4&input_len=2048&output_len=256&num_requests=300&rate=50"
    page, _ = finish(client, f"/simulate?run=1&{query}")
    assert any("aturat" in b for b in banners(page))


@pytest.mark.parametrize(
    ("query", "field", "cli"),
    [
        ("rate=-1", "rate", ["simulate", "--rate", "-1", "--input-len", "100", "--output-len", "10"]),
        ("rate=abc", "rate", ["simulate", "--rate", "abc", "--input-len", "100", "--output-len", "10"]),
        (
            "router=nearest",
            "router",
            ["simulate", "--router", "nearest", "--rate", "1", "--input-len", "9", "--output-len", "9"],
        ),
    ],
)
def test_simulate_bad_input_shows_the_cli_line(client, capsys, query, field, cli):
    page = client.get(f"/simulate?run=1&input_len=100&output_len=10&{query}").text
    assert field_error(page, field) == cli_error(capsys, *cli)
    assert 'data-job="' not in page  # refused before any run starts


def test_simulate_refuses_a_run_too_long_naming_the_limit(client):
    message = field_error(client.get("/simulate?run=1&num_requests=50000").text, "num_requests")
    assert "at most 20000" in message and "120 s" in message


def test_a_run_can_be_cancelled(client):
    page = client.get("/simulate?run=1&num_requests=20000&rate=1000&input_len=4096&output_len=1024&seed=7").text
    job = re.search(r'data-job="(\w+)"', page).group(1)
    assert client.post(f"/api/jobs/{job}/cancel").json()["state"] == "cancelled"
    after = client.get(f"/simulate?run=1&num_requests=20000&rate=1000&input_len=4096&output_len=1024&seed=7&job={job}")
    assert any("cancelled" in b for b in banners(after.text))


def test_a_run_past_the_time_limit_is_stopped_naming_it(tmp_path):
    with TestClient(create_app(Limits(run_s=0.3), root=tmp_path)) as c:
        page, status = finish(c, "/simulate?run=1&num_requests=2000&input_len=1024&output_len=256&rate=20")
    assert status["state"] == "timeout"
    assert any("limit of 0.3 s" in b for b in banners(page))


def test_runs_at_once_are_limited(tmp_path):
    with TestClient(create_app(Limits(running=1), root=tmp_path)) as c:
        first = c.get("/simulate?run=1&num_requests=20000&rate=1000&input_len=4096&output_len=1024&seed=1").text
        second = c.get("/simulate?run=1&num_requests=20000&rate=1000&input_len=4096&output_len=1024&seed=2").text
        assert any("1 runs are in progress" in b for b in banners(second))
        job = re.search(r'data-job="(\w+)"', first).group(1)
        c.post(f"/api/jobs/{job}/cancel")


def test_plan_ranks_candidates_like_the_api(client):
    query = "model=llama-3.1-8b&gpus=h100-sxm&gpus=a100-80gb&precisions=bf16&precisions=fp8&tps=1,2&rate=10"
    page, status = finish(client, f"/plan?run=1&{query}")
    assert status["state"] == "done"
    api = infercast.plan(
        "llama-3.1-8b",
        ["h100-sxm", "a100-80gb"],
        slo="ttft:p99:500ms tpot:p90:50ms",
        rate=10,
        input_len=1024,
        output_len=256,
        precisions=["bf16", "fp8"],
        tps=[1, 2],
        executor="serial",
    )
    shown = float(re.search(r'id="chosen-usd-mtok" data-value="([^"]+)"', page).group(1))
    assert shown == pytest.approx(api.chosen["usd_per_mtok_output"], rel=1e-12)
    assert api.chosen["label"] in page and api.launch[1] in html.unescape(page)
    assert 'id="chart-pareto"' in page and 'id="fleet-check"' in page
    assert values(page, "usd")[0] == pytest.approx(api.table["usd_per_mtok_output"].iloc[0], rel=1e-12)


def test_plan_bad_slo_shows_the_library_line(client):
    page, _ = finish(client, "/plan?run=1&slo=bogus&gpus=h100-sxm&tps=1")
    with pytest.raises(InfercastError) as exc:
        infercast.plan("llama-3.1-8b", "h100-sxm", slo="bogus", rate=10, input_len=1024, output_len=256)
    assert field_error(page, "slo") == str(exc.value)


def test_plan_refuses_a_search_too_large(client):
    gpus = "&".join(f"gpus={h.id}" for h in infercast.list_hardware()[:8])
    assert "at most 96" in field_error(
        client.get(f"/plan?run=1&{gpus}&tps=1,2,4,8&precisions=bf16,fp8&kv_precisions=bf16,fp8").text, "gpus"
    )


def test_validate_compares_and_fits_an_uploaded_benchmark(client):
    from infercast.ui import bench_adapter

    r = client.post(
        "/upload",
        data={"back": "/validate", "field": "bench", "kind": "bench"},
        files={"file": (GUIDELLM.name, GUIDELLM.read_bytes())},
        follow_redirects=False,
    )
    url = r.headers["location"] + "&run=1&gpu=h100-sxm&tp=1&engine=vllm"
    page, status = finish(client, url)
    assert status["state"] == "done"
    recs = bench_adapter.records(str(GUIDELLM), "auto", {"gpu": "h100-sxm", "tp": 1, "engine": "vllm"})
    points, _, summary = bench_adapter.compare(recs)
    assert values(page, "predicted") == pytest.approx([p["predicted"] for p in points], rel=1e-12)
    assert values(page, "median")[-1] == pytest.approx(summary["all"]["median_ape"], rel=1e-12)
    profile = client.get(f"/jobs/{status['id']}/h100-sxm.yaml")
    assert profile.status_code == 200 and "h100-sxm" in profile.text
    assert 'id="chart-validate"' in page


def test_validate_missing_fact_names_the_file_not_the_server_path(client, capsys):
    r = client.post(
        "/upload",
        data={"back": "/validate", "field": "bench", "kind": "bench"},
        files={"file": (GUIDELLM.name, GUIDELLM.read_bytes())},
        follow_redirects=False,
    )
    page, _ = finish(client, r.headers["location"] + "&run=1&gpu=h100-sxm&tp=1")
    message = field_error(page, "engine")
    assert message.startswith("engine: is required") and "guidellm_benchmarks.json" in message
    assert "/uploads/" not in message


# ----- uploads and binds -----------------------------------------------------------------------------


def test_uploads_over_the_limit_are_refused_naming_it(tmp_path):
    with TestClient(create_app(Limits(upload_bytes=1024), root=tmp_path)) as c:
        r = c.post(
            "/upload",
            data={"back": "/simulate", "field": "trace", "kind": "trace"},
            files={"file": ("big.csv", b"x" * 10_000)},
        )
    assert r.status_code == 413
    assert r.json()["error"]["message"] == "file: larger than the web UI's upload limit of 0.000976562 MiB"


def test_uploads_of_the_wrong_kind_are_refused(client):
    r = client.post(
        "/upload", data={"back": "/predict", "field": "model", "kind": "config"}, files={"file": ("x.exe", b"MZ")}
    )
    assert r.status_code == 400 and "is not one of .json" in r.json()["error"]["message"]
    r = client.post(
        "/upload",
        data={"back": "//evil.example", "field": "model", "kind": "config"},
        files={"file": ("c.json", b"{}")},
    )
    assert r.status_code == 400


def test_unknown_job_is_a_json_404(client):
    r = client.get("/api/jobs/nope")
    assert r.status_code == 404 and r.json()["error"]["field"] == "job"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        *[("127.0.0.1", True), ("127.5.0.1", True), ("::1", True), ("localhost", True)],
        *[("0.0.0.0", False), ("192.168.1.4", False), ("::", False), ("example.com", False)],
    ],
)
def test_loopback_hosts(host, loopback):
    assert is_loopback(host) is loopback


def test_non_loopback_binds_are_refused_unless_asked(capsys):
    with pytest.raises(InfercastError, match="not a loopback address"):
        check_bind("0.0.0.0", 8765, allow_remote=False)
    check_bind("0.0.0.0", 8765, allow_remote=True)
    message = cli_error(capsys, "ui", "--host", "0.0.0.0")
    assert message.startswith("host: '0.0.0.0' is not a loopback address") and "--allow-remote" in message
    assert cli_error(capsys, "ui", "--port", "70000") == "port: must be 0-65535, got 70000"


def test_50_concurrent_requests_on_loopback(tmp_path):
    """A bounded loop: 50 requests at once (40 predictions, 10 simulation starts past the 2-run limit)."""
    urls = [f"/predict?run=1&gpu=h100-sxm&input_len={256 + i}&output_len=64" for i in range(40)]
    urls += [f"/simulate?run=1&num_requests=300&rate=5&input_len=256&output_len=64&seed={i}" for i in range(10)]
    with live_server(create_app(root=tmp_path)) as base, httpx.Client(base_url=base, timeout=120) as http:

        def get(url: str) -> tuple[int, str]:
            r = http.get(url)
            return r.status_code, r.text

        with ThreadPoolExecutor(max_workers=50) as pool:
            answers = list(pool.map(get, urls))
        assert [code for code, _ in answers] == [200] * 50
        predicted = [values(text, "ttft")[0] for _, text in answers[:40]]
        assert predicted[5] == pytest.approx(
            infercast.predict("llama-3.1-8b", "h100-sxm", input_len=261, output_len=64).ttft_s * 1e3, rel=1e-12
        )
        started = sum('data-job="' in text for _, text in answers[40:])
        refused = sum(any("runs are in progress" in b for b in banners(text)) for _, text in answers[40:])
        assert started + refused == 10 and 1 <= started <= 10
        assert http.get("/healthz").json()["ok"] is True
        for job in re.findall(r'data-job="(\w+)"', "".join(t for _, t in answers[40:])):
            http.post(f"/api/jobs/{job}/cancel")


def test_cli_startup_does_not_load_the_web_stack():
    import subprocess
    import sys

    probe = (
        "import sys, infercast.cli; print(sorted(m for m in ('fastapi', 'uvicorn', 'starlette') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"


def test_infercast_ui_prints_its_url_and_stops_cleanly_on_ctrl_c():
    import os
    import signal
    import subprocess
    import sys

    from tests.ui_driver import free_port

    port = free_port()
    env = os.environ | {"PYTHONPATH": str(Path(infercast.__file__).parents[1])}
    cmd = [sys.executable, "-c", "from infercast.cli import main; main()", "ui", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.strip() == f"infercast ui: http://127.0.0.1:{port}/  (Ctrl-C stops it)"
        deadline = time.monotonic() + 60
        while True:
            try:
                assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()["ok"] is True
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "Traceback" not in err


def test_simulate_pool_sizes_need_the_disagg_scheduler_as_in_the_cli(client, capsys):
    page = client.get("/simulate?run=1&prefill_instances=2&rate=1&input_len=9&output_len=9").text
    cli = ["simulate", "--prefill-instances", "2", "--rate", "1", "--input-len", "9", "--output-len", "9"]
    assert field_error(page, "prefill_instances") == cli_error(capsys, *cli)


def test_simulate_disaggregated_and_trace_runs_match_the_api(client):
    from infercast.sim.config import DisaggConfig

    page, _ = finish(client, "/simulate?run=1&scheduler=disagg&decode_instances=2&num_requests=150&rate=6")
    api = infercast.simulate(
        "llama-3.1-8b",
        "h100-sxm",
        scheduler="disagg",
        disagg=DisaggConfig(decode_instances=2),
        input_len=1024,
        output_len=256,
        num_requests=150,
        rate=6,
    )
    shown = float(re.search(r'id="ttft-p99" data-value="([^"]+)"', page).group(1))
    assert shown == pytest.approx(api.summary.to_dict()["ttft_s"]["p99"], rel=1e-12)
    page, _ = finish(client, "/simulate?run=1&workload=trace&trace=azure_code&num_requests=150&rate=4")
    api = infercast.simulate("llama-3.1-8b", "h100-sxm", trace="azure_code", num_requests=150, rate=4)
    shown = float(re.search(r'id="ttft-p99" data-value="([^"]+)"', page).group(1))
    assert shown == pytest.approx(api.summary.to_dict()["ttft_s"]["p99"], rel=1e-12)


def test_plan_daily_load_sizes_for_the_peak(client):
    page, status = finish(client, "/plan?run=1&load=daily&daily=diurnal&rate=8&gpus=h100-sxm&tps=1&precisions=fp8")
    assert status["state"] == "done", banners(page)
    assert "--daily diurnal" in page and 'id="plan-chosen"' in page


def test_a_bug_shows_one_line_not_a_traceback(client, monkeypatch):
    from infercast.ui import predict_page

    def broken(_inputs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(predict_page, "predictions", broken)
    r = client.get("/predict?run=1")
    assert r.status_code == 500 and "Traceback" not in r.text
    (line,) = [b for b in re.findall(r'class="banner error"[^>]*>([^<]*)', r.text)]
    assert re.fullmatch(
        r"internal error ZeroDivisionError at test_ui\.py:\d+: division by zero \(please report\)", line
    )


def test_without_the_extra_infercast_ui_says_how_to_get_it(capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if the ui extra were not installed
    message = cli_error(capsys, "ui", "--port", "0")
    assert message.startswith('ui: the web UI needs its extra: pip install -e ".[ui]"')
