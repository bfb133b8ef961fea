"""A closed loop's opening burst: when most of the mean TTFT is the first request of each client (all sent at once),
the run says so and gives the TTFT of the requests after them."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from infercast.sim.api import config_from_keywords, run
from infercast.sim.burst import BURST_SHARE, opening_burst

COLUMNS = "id,engine,engine_version,model,gpu,precision,tp,input_len,output_len,concurrency,ttft_ms_mean,tpot_ms_mean"
BURSTY = dict(precision="fp8", kv_precision="fp8", concurrency=128, input_len=4000, output_len=200, num_requests=512)


def _table(arrival: list[float], first_token: list[float]) -> SimpleNamespace:
    return SimpleNamespace(arrival=np.asarray(arrival), first_token=np.asarray(first_token))


def test_burst_share_and_means_from_the_first_requests_by_arrival():
    # 2 clients, 4 requests: the two sent at t=0 take 3 s and 5 s, the later ones 0.5 s each
    burst = opening_burst(_table([2.0, 0.0, 0.0, 7.0], [2.5, 3.0, 5.0, 7.5]), clients=2)
    assert burst is not None
    assert burst["requests"] == 2 and burst["ttft_mean_s"] == pytest.approx(4.0)
    assert burst["rest_ttft_mean_s"] == pytest.approx(0.5) and burst["share"] == pytest.approx(8 / 9, abs=1e-3)
    assert "89% of the mean TTFT is the opening burst" in burst["message"]


def test_no_note_below_the_share_for_an_open_loop_or_without_later_requests():
    even = _table([0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 2.0, 2.0])  # the burst holds exactly half: noted
    assert opening_burst(even, clients=2) is not None and BURST_SHARE == 0.5
    light = _table([0.0, 0.0, 1.0, 1.0], [0.1, 0.1, 1.2, 1.2])
    assert opening_burst(light, clients=2) is None
    assert opening_burst(light, clients=None) is None
    assert opening_burst(_table([0.0, 0.0], [1.0, 2.0]), clients=2) is None


def test_a_long_prompt_burst_is_noted_with_its_later_ttft():
    result = run(config_from_keywords("llama-3.1-8b", "h200", **BURSTY))
    burst = result.to_dict()["burst"]
    assert burst is not None and burst["share"] >= BURST_SHARE
    assert burst["ttft_mean_s"] > 5 * burst["rest_ttft_mean_s"]
    assert any(w.startswith("burst: ") for w in result.confidence.warnings)
    kept = result.requests().sort_values("arrival_s", kind="stable").ttft_s.to_numpy()
    assert burst["rest_ttft_mean_s"] == pytest.approx(float(kept[128:].mean()))


def test_no_burst_note_for_a_light_closed_loop_or_an_open_loop():
    light = run(config_from_keywords("llama-3.1-8b", "h100-sxm", concurrency=2, input_len=256, output_len=256))
    assert light.burst is None and not any(w.startswith("burst") for w in light.confidence.warnings)
    open_loop = run(
        config_from_keywords("llama-3.1-8b", "h100-sxm", rate=5.0, num_requests=200, input_len=512, output_len=64)
    )
    assert open_loop.burst is None and open_loop.to_dict()["burst"] is None


def test_a_measured_point_carries_the_ttft_after_its_burst():
    from infercast.calibrate.validation import comparison
    from infercast.records.silicon_rows import convert

    values = ["r_c128_tp1_epnone_1", "vllm", "0.12.0", "nvidia/Llama-3.1-8B-Instruct-FP8", "h200_sxm", "fp8", "1"]
    values += ["4000", "200", "128", "100.0", "20.0"]
    ttft, tpot = convert(dict(zip(COLUMNS.split(","), values, strict=True)))
    point = comparison(ttft)
    assert point.burst is not None and 0.0 < point.burst < point.predicted
    assert comparison(tpot).burst is None


def test_validate_points_name_the_burst(tmp_path, capsys):
    from tests.cli_helpers import run, run_json

    values = ["r_c128_tp1_epnone_1", "vllm", "0.12.0", "nvidia/Llama-3.1-8B-Instruct-FP8", "h200_sxm", "fp8", "1"]
    data = tmp_path / "rows.csv"
    data.write_text(COLUMNS + "\n" + ",".join([*values, "4000", "200", "128", "100.0", "20.0"]) + "\n")
    points = run_json(capsys, "validate", "--data", str(data), "--points")["points"]
    ttft, tpot = points
    assert ttft["burst_rest_ttft_s"] > 0 and ttft["cliff"] is None and tpot["burst_rest_ttft_s"] is None
    code, out, _ = run(capsys, "validate", "--data", str(data), "--points")
    assert code == 0 and "burst;" in out
