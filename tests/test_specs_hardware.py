"""Hardware catalog, precision schemes, user-defined hardware."""

from __future__ import annotations

import pytest

from infercast.errors import InfercastError
from infercast.specs.catalog import get_hardware, hardware_catalog, load_hardware
from infercast.specs.precision import FORMATS, get_kv_format, get_scheme, schemes_for

REQUIRED = [
    "t4",
    "l4",
    "a10g",
    "l40s",
    "a100-40gb",
    "a100-80gb",
    "h100-pcie",
    "h100-sxm",
    "h200",
    "b200",
    "gb200",
    "mi300x",
    "mi325x",
    "rtx-4090",
]


def test_catalog_ids_and_citations():
    cat = hardware_catalog()
    assert set(REQUIRED) <= set(cat)
    for h in cat.values():
        assert {"peak_flops", "memory"} <= set(h.sources), h.id
        assert h.price_per_hour_usd > 0 and h.price_source


def test_h100_sxm_datasheet_numbers_in_si():
    h = get_hardware("h100-sxm")
    assert h.memory.bandwidth_bytes_s == 3.35e12  # not 3.35 TiB/s, not 3.072e12
    assert h.memory.capacity_bytes == 80 * 2**30  # "80 GB" is 80 GiB of HBM3
    assert h.peak_flops["bf16"] == pytest.approx(989.4e12)  # dense, not the 1979 sparsity figure
    assert h.peak_flops["fp8"] == pytest.approx(2 * h.peak_flops["bf16"], rel=1e-3)
    assert h.ridge_point("bf16") == pytest.approx(295, rel=0.01)


def test_dense_peaks_are_plausible():
    for h in hardware_catalog().values():
        sixteen = h.peak_flops.get("bf16", h.peak_flops.get("fp16"))
        assert sixteen, h.id
        if "fp8" in h.peak_flops:
            assert h.peak_flops["fp8"] == pytest.approx(2 * sixteen, rel=0.05), h.id
        assert 0.05e12 < h.memory.bandwidth_bytes_s < 20e12


def test_format_bytes_count_scales():
    assert FORMATS["bf16"].bytes_per_element == 2
    assert FORMATS["int4"].bytes_per_element == pytest.approx((4 + 20 / 128) / 8)
    assert FORMATS["nvfp4"].bytes_per_element == pytest.approx(4.5 / 8)
    assert FORMATS["mxfp4"].bytes_per_element == pytest.approx(4.25 / 8)


def test_scheme_compute_rates():
    h100, a100, t4, b200 = (get_hardware(x) for x in ("h100-sxm", "a100-80gb", "t4", "b200"))
    assert get_scheme("int4").compute_key(h100) == "bf16"  # W4A16 multiplies at the 16-bit rate
    assert get_scheme("awq").compute_key(t4) == "fp16"
    assert get_scheme("fp8").compute_key(h100) == "fp8"
    assert get_scheme("nvfp4").compute_key(b200) == "fp4"
    with pytest.raises(InfercastError, match="no FP8 tensor cores") as exc:
        get_scheme("fp8").compute_key(a100)
    assert "int4" in exc.value.allowed and "fp8" not in exc.value.allowed
    with pytest.raises(InfercastError, match="BF16"):
        get_scheme("bf16").compute_key(t4)
    with pytest.raises(InfercastError, match="FP4"):
        get_scheme("fp4").compute_key(h100)
    assert "fp8" not in schemes_for(a100) and "nvfp4" in schemes_for(b200)


def test_unknown_precision_and_kv_format():
    with pytest.raises(InfercastError, match="precision"):
        get_scheme("fp6")
    with pytest.raises(InfercastError, match="kv_precision"):
        get_kv_format("int3")
    assert get_kv_format("fp8_e4m3").bytes_per_element == 1


def test_unknown_gpu_suggests():
    with pytest.raises(InfercastError) as exc:
        get_hardware("h100-sx")
    assert "h100-sxm" in str(exc.value)


def test_gpu_aliases_from_catalog_data():
    """'h100' is an alias of 'h100-sxm' (specs/data/aliases.yaml), and every alias names a catalog id."""
    from infercast.specs.catalog import aliases, hardware_catalog

    assert get_hardware("h100").id == "h100-sxm" and get_hardware("H100").id == "h100-sxm"
    assert all(target in hardware_catalog() for target in aliases("gpu").values())


def test_user_hardware_yaml(tmp_path):
    f = tmp_path / "mygpu.yaml"
    f.write_text(
        """
id: my-gpu
name: My accelerator
vendor: acme
architecture: hopper
memory: {capacity_bytes: 64.0e9, capacity_as_sold: "64 GB", bandwidth_bytes_s: 2.0e12}
peak_flops: {bf16: 500.0e12, fp8: 1000.0e12}
l2_bytes: 4.0e7
sm_count: 100
interconnect: {name: custom, bandwidth_bytes_s: 100.0e9}
host_link: {name: PCIe Gen5 x16, bandwidth_bytes_s: 64.0e9}
tdp_w: 500
price_per_hour_usd: 1.5
"""
    )
    (spec,) = load_hardware(f)
    assert get_hardware("my-gpu") is spec
    assert get_hardware(str(f)).id == "my-gpu"
    f.write_text("id: broken\nname: x\n")
    with pytest.raises(InfercastError, match="hardware file"):
        load_hardware(f)
    f.write_text("id: [unclosed\n")
    with pytest.raises(InfercastError, match="not valid YAML"):
        load_hardware(f)


USER_GPU = """
id: {id}
name: My accelerator
vendor: acme
architecture: hopper
memory: {{capacity_bytes: 64.0e9, capacity_as_sold: "64 GB", bandwidth_bytes_s: 2.0e12}}
peak_flops: {{bf16: 500.0e12, fp8: 1000.0e12, fp32: 60.0e12}}
l2_bytes: 4.0e7
sm_count: 100
interconnect: {{name: none, bandwidth_bytes_s: {link}}}
host_link: {{name: PCIe Gen5 x16, bandwidth_bytes_s: {host}}}
tdp_w: 500
price_per_hour_usd: {price}
"""


@pytest.fixture(autouse=True)
def _restore_user_hardware():
    """User accelerators are process-wide: drop the ones a test registers so later tests see the catalog."""
    from infercast.specs import catalog

    before = dict(catalog._user_hardware)
    yield
    catalog._user_hardware.clear()
    catalog._user_hardware.update(before)


def _user_gpu(tmp_path, gpu_id: str, link: float = 100e9, host: float = 64e9, price: float = 1.5):
    f = tmp_path / f"{gpu_id}.yaml"
    f.write_text(USER_GPU.format(id=gpu_id, link=link, host=host, price=price))
    (spec,) = load_hardware(f)
    return spec


def test_user_yaml_cannot_shadow_a_built_in_id(tmp_path):
    builtin = hardware_catalog()["h100-sxm"]
    for gpu_id in ("h100-sxm", "H100-SXM"):
        with pytest.raises(InfercastError, match="built-in accelerator") as exc:
            _user_gpu(tmp_path, gpu_id)
        assert exc.value.field == "gpu" and "distinct id" in str(exc.value)
    assert get_hardware("h100-sxm") is builtin  # still the datasheet entry
    spec = _user_gpu(tmp_path, "My-Shadow-Free-GPU")
    assert get_hardware("my-shadow-free-gpu") is spec  # user ids are case-insensitive like built-in ones
    assert _user_gpu(tmp_path, "My-Shadow-Free-GPU", price=2.0).price_per_hour_usd == 2.0  # reloading replaces


def test_tensor_parallelism_needs_a_link(tmp_path):
    import infercast

    _user_gpu(tmp_path, "no-links", link=0, host=0)
    p = infercast.predict("llama-3.1-8b", "no-links", input_len=128, output_len=16)  # one GPU needs no link
    assert p.tpot_s > 0
    for tp in (2, 4):
        with pytest.raises(InfercastError, match="no link for tensor-parallel collectives") as exc:
            infercast.predict("llama-3.1-8b", "no-links", tp=tp, input_len=128, output_len=16)
        assert exc.value.field == "tp"
    with pytest.raises(InfercastError) as exc:
        infercast.memory_budget("mixtral-8x7b", "no-links", tp=2, ep=2)
    assert exc.value.field == "tp"
    # without a scale-up fabric, collectives run over the host link
    pcie = _user_gpu(tmp_path, "pcie-only", link=0, host=64e9)
    assert pcie.collective_bandwidth_bytes_s == 64e9
    assert infercast.predict("llama-3.1-8b", "pcie-only", tp=2, input_len=128, output_len=16).tpot_s > 0
    with pytest.raises(InfercastError, match="hardware file"):
        _user_gpu(tmp_path, "negative-link", link=-1)


def test_collective_bandwidth_prefers_the_scale_up_fabric():
    assert get_hardware("h100-sxm").collective_bandwidth_bytes_s == 450e9  # NVLink, not PCIe
    assert get_hardware("l4").collective_bandwidth_bytes_s == get_hardware("l4").host_link.bandwidth_bytes_s
