"""Simulation outputs: Chrome/Perfetto trace, plots, per-request files and the summary table."""

from __future__ import annotations

import gzip
import importlib.util
import io
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from infercast.errors import InfercastError
from infercast.sim.api import SimulationResult, simulate
from infercast.sim.export import summary_table, write_requests
from infercast.sim.perfetto import to_chrome_trace, validate_chrome_trace, write_chrome_trace
from infercast.sim.plots import plot_latency_cdfs, plot_rate_sweep, plot_timeline

N = 200
ROUNDING_US = 0.001  # the trace rounds times to the nanosecond


@pytest.fixture(scope="module")
def result() -> SimulationResult:
    return simulate(
        "llama-3.1-8b",
        "h100-sxm",
        input_len=1000,
        output_len=200,
        num_requests=N,
        rate=5,
        trace_steps=100_000,
        sample_interval=0.1,
        goodput="ttft:200 tpot:30",
    )


@pytest.fixture(scope="module")
def saturated() -> SimulationResult:
    """Two replicas pushed past capacity, keeping only the first 50 step records."""
    return simulate(
        "llama-3.1-8b",
        "h100-sxm",
        input_len=2000,
        output_len=300,
        num_requests=N,
        rate=60,
        max_num_seqs=16,
        replicas=2,
        trace_steps=50,
        sample_interval=0.2,
    )


@pytest.fixture(scope="module")
def trace(result: SimulationResult) -> dict:
    return to_chrome_trace(result)


def _events(trace: dict, ph: str) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == ph]


def _process_names(trace: dict) -> dict[int, str]:
    return {e["pid"]: e["args"]["name"] for e in _events(trace, "M") if e["name"] == "process_name"}


# ------------------------------------------------------------------------------------------- Chrome trace


def test_trace_structure(trace: dict, result: SimulationResult) -> None:
    assert isinstance(trace["traceEvents"], list) and trace["traceEvents"]
    assert trace["displayTimeUnit"] in ("ms", "ns")
    assert validate_chrome_trace(trace) == []
    xs = _events(trace, "X")
    assert xs
    for e in xs:
        assert {"name", "ph", "ts", "dur", "pid", "tid"} <= e.keys()
        assert isinstance(e["ts"], int | float) and e["ts"] >= 0
        assert isinstance(e["dur"], int | float) and e["dur"] > 0
    counters = _events(trace, "C")
    assert counters
    for e in counters:
        assert isinstance(e["args"], dict) and e["args"]
        assert all(isinstance(v, int | float) for v in e["args"].values())
    names = {e["name"] for e in counters}
    assert {"KV blocks", "Batch", "Queue", "KV usage"} <= names
    # one counter sample per occupancy sample and counter
    assert sum(e["name"] == "KV blocks" for e in counters) == len(result.occupancy())
    procs = _process_names(trace)
    assert procs[1].startswith("replica 0")
    assert any(name.startswith("requests") for name in procs.values())
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in _events(trace, "M") if e["name"] == "thread_name"}
    assert threads[(1, 1)] == "steps"
    tids = [tid for _, tid in threads]
    assert len(tids) == len(set(tids)) and 0 not in tids  # Perfetto keeps threads apart by tid
    # every event's process is named
    assert {e["pid"] for e in trace["traceEvents"]} <= procs.keys()


def test_trace_steps_match_recorder(trace: dict, result: SimulationResult) -> None:
    rec = result.recorder
    steps = [e for e in _events(trace, "X") if e.get("cat") == "step"]
    assert len(steps) == len(rec.steps) > 0
    assert {e["name"] for e in steps} <= {"prefill", "decode", "mixed"}
    assert all(e["tid"] == e["pid"] == 1 for e in steps)
    # the step slices cover exactly the engine's busy time
    total_us = sum(e["dur"] for e in steps)
    assert total_us == pytest.approx(rec.busy_time * 1e6, abs=ROUNDING_US * len(steps))
    assert sum(e["args"]["steps"] for e in steps) == rec.step_count
    assert sum(e["args"]["prefill_tokens"] for e in steps) == sum(s.prefill_tokens for s in rec.steps)
    # every request is prefilled somewhere, and steps on one replica do not overlap
    prefilled = {i for e in steps for i in e["args"].get("prefill_ids", [])}
    assert prefilled == set(range(N))
    ends = [(e["ts"], e["ts"] + e["dur"]) for e in sorted(steps, key=lambda e: e["ts"])]
    assert all(b0 >= a1 - 2 * ROUNDING_US for (_, a1), (b0, _) in itertools.pairwise(ends))


def test_trace_request_track(result: SimulationResult) -> None:
    trace = to_chrome_trace(result, max_requests=25)
    reqs = [e for e in _events(trace, "X") if e.get("cat") == "request"]
    parents = [e for e in reqs if e["name"].startswith("req ")]
    assert len(parents) == 25
    df = result.requests()
    first = set(df.sort_values("arrival_s").index[:25])
    assert {e["args"]["request"] for e in parents} == first
    assert any(e["name"] == "queued" for e in reqs) and any(e["name"] == "overhead" for e in reqs)
    for p in parents:
        rid = p["args"]["request"]
        assert p["args"]["ttft_ms"] == pytest.approx(df.loc[rid, "ttft_s"] * 1e3, abs=1e-3)
        kids = [e for e in reqs if e["args"]["request"] == rid and e is not p]
        row = df.loc[rid]
        overhead = (row.scheduled_s - row.queue_s - row.arrival_s) * 1e6  # arrival -> reaching the engine
        queued = bool(row.queue_s * 1e6 > ROUNDING_US)
        expected = ["overhead"] * bool(overhead > ROUNDING_US) + ["queued"] * queued + ["prefill", "decode"]
        assert [k["name"] for k in kids] == expected
        durations = {k["name"]: k["dur"] for k in kids}
        if queued:  # the queued slice is the engine's waiting queue: queue_s, as in the summary
            assert durations["queued"] == pytest.approx(row.queue_s * 1e6, abs=2 * ROUNDING_US)
        for k in kids:  # nested inside the request slice, on the same lane
            assert k["tid"] == p["tid"] and k["pid"] == p["pid"]
            assert p["ts"] <= k["ts"] and k["ts"] + k["dur"] <= p["ts"] + p["dur"] + ROUNDING_US
        assert sum(k["dur"] for k in kids) == pytest.approx(p["dur"], abs=3 * ROUNDING_US)
        assert kids[-2]["ts"] + kids[-2]["dur"] == pytest.approx(df.loc[rid, "first_token_s"] * 1e6, abs=ROUNDING_US)
    # requests sharing a lane never overlap
    lanes: dict[int, list[tuple[float, float]]] = {}
    for p in parents:
        lanes.setdefault(p["tid"], []).append((p["ts"], p["ts"] + p["dur"]))
    for spans in lanes.values():
        spans.sort()
        assert all(b[0] >= a[1] for a, b in itertools.pairwise(spans))
    assert not [e for e in _events(to_chrome_trace(result, max_requests=0), "X") if e.get("cat") == "request"]
    with pytest.raises(InfercastError):
        to_chrome_trace(result, max_requests=-1)


def test_trace_replicas_and_truncation(saturated: SimulationResult) -> None:
    trace = to_chrome_trace(saturated)
    assert validate_chrome_trace(trace) == []
    procs = _process_names(trace)
    assert {procs[1].split(" ·")[0], procs[2].split(" ·")[0]} == {"replica 0", "replica 1"}
    assert {e["pid"] for e in _events(trace, "C")} == {1, 2}
    assert len([e for e in _events(trace, "X") if e.get("cat") == "step"]) == 50
    assert "only the first 50" in trace["otherData"]["note"]
    quiet = simulate("llama-3.1-8b", "h100-sxm", input_len=100, output_len=10, num_requests=20, rate=5)
    assert "trace_steps" in to_chrome_trace(quiet)["otherData"]["note"]


def test_validator_reports_problems(trace: dict) -> None:
    bad = json.loads(json.dumps(trace))
    x = next(e for e in bad["traceEvents"] if e["ph"] == "X")
    x["dur"] = 0
    del next(e for e in bad["traceEvents"] if e["ph"] == "C")["args"]
    problems = validate_chrome_trace(bad)
    assert any("dur" in p for p in problems) and any("args" in p for p in problems)
    assert validate_chrome_trace({"events": []}) == ["traceEvents: missing or not a list"]


def test_trace_files_round_trip(result: SimulationResult, trace: dict, tmp_path: Path) -> None:
    plain = write_chrome_trace(result, tmp_path / "sim.json")
    loaded = json.loads(plain.read_text())
    assert loaded == json.loads(json.dumps(trace))
    packed = write_chrome_trace(result, tmp_path / "nested" / "sim.json.gz")
    assert packed.read_bytes()[:2] == b"\x1f\x8b"  # gzip magic
    with gzip.open(packed, "rt") as fh:
        assert json.load(fh) == loaded
    assert packed.stat().st_size < plain.stat().st_size
    assert plain.stat().st_size < 2_000_000  # stays small


# ---------------------------------------------------------------------------------------------------- plots


def _check_image(path: Path) -> None:
    import matplotlib.image as mpimg

    assert path.exists() and path.stat().st_size > 10_000
    img = mpimg.imread(path)
    assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 600
    assert img[..., :3].std() > 0.05  # not a blank canvas


def test_plot_latency_cdfs_and_timeline(result: SimulationResult, saturated: SimulationResult, tmp_path: Path) -> None:
    assert plot_latency_cdfs(result, tmp_path / "cdf.png") == tmp_path / "cdf.png"
    _check_image(tmp_path / "cdf.png")
    _check_image(plot_timeline(result, tmp_path / "timeline.png"))
    _check_image(plot_timeline(saturated, tmp_path / "timeline2.png", bin_s=1.0))
    svg = plot_latency_cdfs(saturated, tmp_path / "cdf.svg")
    assert svg.read_text().lstrip().startswith("<?xml")
    with pytest.raises(InfercastError):
        plot_timeline(result, tmp_path / "timeline.bmp")


def _sweep_table() -> pd.DataFrame:
    rate = np.array([2.0, 5.0, 10.0, 15.0, 20.0, 25.0])
    return pd.DataFrame(
        {
            "rate_req_s": rate,
            "request_throughput_req_s": np.minimum(rate, 17.0),
            "ttft_p50_s": 0.03 * (1 + rate / 10) ** 2,
            "ttft_p99_s": [0.06, 0.07, 0.1, 0.2, 4.0, 12.0],
            "tpot_p50_s": 0.006 + rate * 1e-3,
            "tpot_p99_s": 0.008 + rate * 1.5e-3,
            "goodput_req_s": [2.0, 5.0, 10.0, 14.0, 6.0, 2.0],
            "saturated": [False, False, False, False, True, True],
        }
    )


def test_plot_rate_sweep(tmp_path: Path) -> None:
    table = _sweep_table()
    _check_image(plot_rate_sweep(table, tmp_path / "sweep.png", slo="ttft:200 tpot:30"))
    _check_image(plot_rate_sweep(table.sample(frac=1, random_state=0), tmp_path / "s2.png", saturation_rate=15.0))
    with pytest.raises(InfercastError, match="goodput_req_s"):
        plot_rate_sweep(table.drop(columns="goodput_req_s"), tmp_path / "bad.png")


# ------------------------------------------------------------------------------------------ request files


@pytest.mark.parametrize(
    "name",
    [
        "requests.csv",
        "requests.csv.gz",
        pytest.param(
            "requests.parquet",
            marks=pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="needs the parquet extra"),
        ),
    ],
)
def test_write_requests_round_trip(result: SimulationResult, tmp_path: Path, name: str) -> None:
    path = write_requests(result, tmp_path / name)
    back = pd.read_parquet(path) if name.endswith(".parquet") else pd.read_csv(path)
    df = result.requests()
    assert list(back.columns) == ["request_id", *df.columns]
    assert len(back) == N
    assert back["request_id"].tolist() == list(range(N))
    for col in ("arrival_s", "ttft_s", "e2e_s", "finish_s"):
        np.testing.assert_allclose(back[col].to_numpy(), df[col].to_numpy(), rtol=1e-12)
    assert (back["output_tokens"] == df["output_tokens"]).all()


def test_write_requests_errors(result: SimulationResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InfercastError, match=r"\.csv"):
        write_requests(result, tmp_path / "requests.xlsx")
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    with pytest.raises(InfercastError, match=r"infercast\[parquet\]"):
        write_requests(result, tmp_path / "requests.parquet")
    assert not (tmp_path / "requests.parquet").exists()


# ------------------------------------------------------------------------------------------ summary table


def _render(result: SimulationResult) -> str:
    console = Console(record=True, width=120, file=io.StringIO())
    console.print(summary_table(result))
    return console.export_text()


def test_summary_table(result: SimulationResult) -> None:
    text = _render(result)
    s = result.summary
    for label in (
        "Successful requests",
        "Benchmark duration (s)",
        "Request throughput (req/s)",
        "Request goodput (req/s)",
        "Output token throughput (tok/s)",
        "Mean TTFT (ms)",
        "Median TPOT (ms)",
        "P99 ITL (ms)",
        "Mean E2EL (ms)",
        "P99 queue (ms)",
        "Preemptions",
        "Prefix-cache hit rate",
    ):
        assert label in text, label
    line = next(ln for ln in text.splitlines() if "Mean TTFT (ms)" in ln)
    assert f"{s['ttft_s']['mean'] * 1e3:,.2f}" in line
    line = next(ln for ln in text.splitlines() if "Successful requests" in ln)
    assert f"{N:,}" in line
    assert "llama-3.1-8b on h100-sxm" in text
    assert "saturated" not in text.lower()


def test_summary_table_shows_every_warning_in_full() -> None:
    """Warnings go under the table, wrapped, not into a cell that cuts them off."""
    from infercast.sim.api import simulate

    res = simulate("llama-3.2-1b", "l4", input_len=500, output_len=20, rate=2.0, num_requests=10)
    assert len(res.confidence.warnings) >= 2  # a prior-only GPU and a model never measured under load
    text = " ".join(_render(res).split())
    for warning in res.confidence.warnings:
        assert f"warning: {warning}" in text


def test_summary_table_saturated(saturated: SimulationResult) -> None:
    assert saturated.summary["saturated"]
    text = _render(saturated)
    assert "WARNING: saturated" in text
    assert "Request goodput" not in text  # no SLO given
    assert "2 replicas" in text
