"""infercast's H100 kernel parameters against its own harness timed on a real H100 SXM (data/harness/h100-sxm/).

These rows are never fitted (see that folder's README), so they are a held-out check of the kernel parameters
measured from aiconfigurator's tables: a re-import or refit that drifts away from the silicon fails here. The
bounds sit a little above the errors measured on 2026-11-26 (benchmarks/harness_h100.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from infercast.calibrate.validation import compare
from infercast.cost.profile import load_profile
from infercast.records.readers import load_records
from infercast.records.record import Record

HARNESS = Path(__file__).resolve().parents[1] / "data" / "harness" / "h100-sxm"


@pytest.fixture(scope="module")
def records() -> list[Record]:
    return load_records([HARNESS])


def _errors(records: list[Record], keep, *, fitted: bool) -> np.ndarray:
    rows = [r for r in records if keep(r)]
    assert rows, "no harness rows matched"
    profiles = {f"{r.gpu}/{r.engine}": load_profile("h100-sxm", "hopper", r.engine, fitted=fitted) for r in rows}
    return np.array([c.error for c in compare(rows, profiles)])


def test_the_harness_ran_on_an_h100_sxm(records) -> None:
    assert {r.gpu for r in records} == {"h100-sxm"}
    assert {r.gpu_name for r in records} == {"NVIDIA H100 80GB HBM3"}
    assert {r.engine for r in records} == {"torch"}


def test_measured_kernels_predict_bf16_gemms_on_real_silicon(records) -> None:
    def layer_gemm(r: Record) -> bool:
        return r.kind == "gemm" and r.precision == "bf16" and r.op != "peak_matmul"

    errors = _errors(records, layer_gemm, fitted=False)
    assert errors.size == 140  # 7 token counts x 5 shapes x 4 models
    assert np.median(np.abs(errors)) < 0.07
    assert np.percentile(np.abs(errors), 90) < 0.20
    # and with the installed end-to-end fits, which a user's prediction takes
    assert np.median(np.abs(_errors(records, layer_gemm, fitted=True))) < 0.12


def test_the_tensor_core_peak_is_the_measured_one(records) -> None:
    def peak(r: Record) -> bool:
        return r.op == "peak_matmul" and r.precision == "bf16"

    assert np.abs(_errors(records, peak, fitted=False)).max() < 0.03


def test_decode_attention_of_batches_is_within_its_band(records) -> None:
    def batched_decode(r: Record) -> bool:
        return r.kind == "op" and r.op == "attention_decode" and r.batch >= 8

    assert np.median(np.abs(_errors(records, batched_decode, fitted=False))) < 0.12


# ----- the torch engine fitted to these rows (scripts/fit_profiles.py, stage 3) ---------------------------------
def test_installed_torch_engine_predicts_the_harness_steps(records) -> None:
    """engine_load.yaml's torch values come from these rows (the GPU's parameters left as installed): in-sample they
    predict the graph-replayed decode steps and TPOT loops closely, and the summary holds the fit's error leaving
    one model out."""
    import yaml

    from infercast.calibrate.harness_fit import harness_rows
    from infercast.calibrate.profile_fit import PROFILE_DIR

    steps = harness_rows(records)
    errors = {k: _errors(records, lambda r, k=k: r.kind == k, fitted=True) for k in ("decode_step", "tpot")}
    assert np.median(np.abs(errors["decode_step"])) < 0.10
    assert np.median(np.abs(errors["tpot"])) < 0.10
    summary = yaml.safe_load((PROFILE_DIR / "engine_load.yaml").read_text())["harness_fit"]
    assert summary["points"] == len(steps)
    assert summary["median_abs_error"]["fitted"] < summary["median_abs_error"]["priors"]
    assert summary["held_out"]["all"] < 0.13
    assert set(summary["held_out"]["by_model"]) == {r.model for r in steps}
    assert "data/harness/h100-sxm/llama-3.1-8b-bf16.csv" in summary["source"]


def test_same_token_moe_decode_steps_are_left_out_of_the_fit(records) -> None:
    """MoE decode steps of several sequences timed before the runner fed each sequence its own token routed the
    whole batch like one token: the fit leaves such rows out. The committed Qwen3-30B-A3B rows were re-timed
    after the fix (2026-11-26, second lease), so they all count, and the same rows stamped before the fix would
    not."""
    from dataclasses import replace

    from infercast.calibrate.harness_fit import SAME_TOKEN_BEFORE, harness_rows, same_token_moe_step

    moe_batches = [r for r in records if r.model == "qwen3-30b-a3b" and r.kind == "decode_step" and r.batch > 1]
    assert len(moe_batches) == 18 and not any(same_token_moe_step(r) for r in moe_batches)
    assert all(r in harness_rows(records) for r in moe_batches)
    stale = [replace(r, timestamp="2026-11-26T17:53:00+00:00") for r in moe_batches]
    assert all(r.timestamp < SAME_TOKEN_BEFORE and same_token_moe_step(r) for r in stale)
    assert not any(same_token_moe_step(replace(r, batch=1)) for r in stale)  # one sequence routes as served
    dense = next(r for r in records if r.model == "llama-3.1-8b" and r.kind == "decode_step" and r.batch == 64)
    assert not same_token_moe_step(replace(dense, timestamp="2026-11-26T17:53:00+00:00"))


def test_torch_predictions_carry_the_harness_fits_error_bands() -> None:
    """predict's error bars for the torch engine are its harness fit's leave-one-model-out errors (TTFT from the
    prefill and TTFT rows, TPOT from the decode rows), and the warning says what it was fitted on."""
    import infercast
    from infercast.analysis.error_bands import Regime, confidence
    from infercast.cost.profile import harness_fit

    bands = harness_fit()["held_out"]["bands"]
    c = confidence(Regime("h100-sxm", "torch"))
    assert c.bands["ttft"].typical == bands["ttft"]["typical"] and c.bands["tpot"].p90 == bands["tpot"]["p90"]
    assert any("infercast's own harness" in w for w in c.warnings)
    assert not any("never measured under load: its overheads are priors" in w for w in c.warnings)
    vllm = confidence(Regime("h100-sxm", "vllm"))
    assert vllm.bands["tpot"].typical != bands["tpot"]["typical"]
    out = infercast.predict("llama-3.1-8b", "h100-sxm", engine="torch", batch=1, input_len=512, output_len=128)
    assert out.to_dict()["error_bands"]["tpot"]["typical_pct"] == round(100 * bands["tpot"]["typical"], 1)


def test_the_harness_fit_moves_only_the_torch_engine(records, tmp_path) -> None:
    import yaml

    from infercast.calibrate.harness_fit import HEADER, PARAMETERS, fit_harness, write_harness_fit
    from infercast.calibrate.profile_fit import PROFILE_DIR

    llama = [r for r in records if r.model == "llama-3.1-8b" and r.layers == 0]
    result = fit_harness(llama, source="llama rows")
    assert set(result.values) <= set(PARAMETERS) and result.values
    assert {r.kind for r in result.records} == {"prefill_step", "decode_step", "ttft", "tpot"}
    path = tmp_path / "engine_load.yaml"
    path.write_text((PROFILE_DIR / "engine_load.yaml").read_text())
    before = yaml.safe_load(path.read_text())
    write_harness_fit(result, {"all": 0.5}, path, "llama rows")
    after = yaml.safe_load(path.read_text())
    assert {k: v for k, v in after["engines"].items() if k != "torch"} == {
        k: v for k, v in before["engines"].items() if k != "torch"
    }
    for name, value in result.values.items():
        assert after["engines"]["torch"][name.split(":")[1]] == pytest.approx(value, rel=1e-4)
    assert after["harness_fit"]["source"] == "llama rows" and HEADER in path.read_text()
    assert after["load_fit"] == before["load_fit"]
