"""Built-in model and hardware catalogs (YAML inside the package), loaded once."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from pathlib import Path

from infercast.errors import InfercastError, unknown_choice
from infercast.files import parse_package_yaml
from infercast.specs.hardware import HardwareSpec, load_hardware_file
from infercast.specs.model import ModelSpec

_DATA = "infercast.specs.data"


def _load_yaml(name: str) -> list[dict]:
    text = resources.files(_DATA).joinpath(name).read_text()
    data = parse_package_yaml(text)
    if not isinstance(data, list):
        raise RuntimeError(f"catalog {name} must be a YAML list")
    return data


@cache
def model_catalog() -> dict[str, ModelSpec]:
    """All built-in models by id."""
    return {m.id: m for m in (ModelSpec.model_validate(e) for e in _load_yaml("models.yaml"))}


@cache
def hardware_catalog() -> dict[str, HardwareSpec]:
    """All built-in accelerators by id."""
    return {h.id: h for h in (HardwareSpec.model_validate(e) for e in _load_yaml("hardware.yaml"))}


_user_hardware: dict[str, HardwareSpec] = {}


def register_hardware(spec: HardwareSpec) -> HardwareSpec:
    """Add a user-defined accelerator so it can be used by id (case-insensitive).

    A built-in id or alias is refused: the user entry would silently replace the datasheet numbers and still
    pick up the built-in chip's fitted cost profile (``cost/profiles/<id>.yaml``), and built-in ids may be
    resolved once and shared (``Deployment.resolve``). Registering a user id again replaces the earlier user entry.
    """
    key = spec.id.strip().lower()
    if key in hardware_catalog() or key in aliases("gpu"):
        raise InfercastError(
            f"id {spec.id!r} is a built-in accelerator or its alias; give the user definition a distinct id "
            f"(e.g. {key + '-custom'!r}) so it cannot shadow the built-in spec and its fitted cost profile",
            field="gpu",
        )
    _user_hardware[key] = spec
    return spec


def load_hardware(path: str | Path) -> list[HardwareSpec]:
    """Register every accelerator defined in a user YAML file; returns them."""
    return [register_hardware(spec) for spec in load_hardware_file(path)]


def get_model(ref: str | ModelSpec) -> ModelSpec:
    """A model by catalog id, or from a HuggingFace ``config.json`` path (file or folder)."""
    if isinstance(ref, ModelSpec):
        return ref
    ref = str(ref)
    catalog = model_catalog()
    key = ref.strip().lower()
    if key in catalog:
        return catalog[key]
    path = Path(ref).expanduser()
    looks_like_path = ref.endswith(".json") or "/" in ref or _exists(path)
    if looks_like_path:
        from infercast.specs.hf_config import load_hf_config

        return load_hf_config(path)
    raise unknown_choice("model", ref, catalog)


CHECKPOINT_SUFFIX = re.compile(
    r"-(instruct|chat|hf|it|base|thinking|fp8|fp8-dynamic|fp8-block|fp4|nvfp4|mxfp4|awq|gptq|int4|int8|w4a16|w8a8|"
    r"v\d+(\.\d+)?|\d{4})$"
)
"""Checkpoint-name endings that do not change the architecture: chat tuning, quantised releases, dated refreshes
(``-0528``, ``-2507``) and version tags (``-v0.1``)."""


def model_id_for_repo(name: str) -> str | None:
    """The catalog id of a HuggingFace repo id (or a local checkpoint folder); None when the catalog has no such
    model. The entry whose cited ``config.json`` is that repo's wins; else the one whose id or source repo name
    equals the name with checkpoint suffixes stripped one at a time (``nvidia/DeepSeek-R1-FP4`` ->
    ``deepseek-r1``, ``meta-llama/Llama-3.1-8B-Instruct`` -> ``llama-3.1-8b``)."""
    by_repo, by_name = _catalog_names()
    key = name.strip().rstrip("/").lower()
    if key in by_repo:
        return by_repo[key]
    bare = key.rsplit("/", 1)[-1].removeprefix("meta-")
    while bare not in by_name:
        stripped = CHECKPOINT_SUFFIX.sub("", bare)
        if stripped == bare:
            return None
        bare = stripped
    return by_name[bare]


@cache
def _catalog_names() -> tuple[dict[str, str], dict[str, str]]:
    """(source repo -> id, bare name -> id) over the model catalog, lower case; ids win over repo names."""
    by_repo: dict[str, str] = {}
    by_name: dict[str, str] = {cid: cid for cid in model_catalog()}
    for cid, spec in model_catalog().items():
        found = re.search(r"huggingface\.co/([^/\s]+/[^/\s]+)", spec.source or "")
        if found:
            repo = found.group(1).lower()
            by_repo[repo] = cid
            bare = repo.rsplit("/", 1)[-1].removeprefix("meta-")
            by_name.setdefault(bare, cid)
            by_name.setdefault(CHECKPOINT_SUFFIX.sub("", bare), cid)
    return by_repo, by_name


def is_builtin(model: object, gpu: object) -> bool:
    """Whether ``model`` and ``gpu`` name built-in catalog entries by id (not paths or user-registered GPUs:
    those can change between calls)."""
    if not isinstance(model, str) or not isinstance(gpu, str):
        return False
    key = gpu.strip().lower()
    return (
        model.strip().lower() in model_catalog()
        and key not in _user_hardware
        and aliases("gpu").get(key, key) in hardware_catalog()
    )


def _exists(path: Path) -> bool:
    """``path.exists()``, False for names the OS refuses (too long, NUL bytes) instead of raising."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def get_hardware(ref: str | HardwareSpec) -> HardwareSpec:
    """An accelerator by id (built-in or registered), or from a YAML file path holding exactly one."""
    if isinstance(ref, HardwareSpec):
        return ref
    ref = str(ref)
    key = ref.strip().lower()
    if key in _user_hardware:
        return _user_hardware[key]
    catalog = hardware_catalog()
    key = aliases("gpu").get(key, key)
    if key in catalog:
        return catalog[key]
    if ref.endswith((".yaml", ".yml")):
        specs = load_hardware(ref)
        if len(specs) != 1:
            raise InfercastError(f"{ref} defines {len(specs)} accelerators; pass one id", field="gpu")
        return specs[0]
    raise unknown_choice("gpu", ref, list(catalog) + list(_user_hardware))


@cache
def aliases(kind: str) -> dict[str, str]:
    """Short names for catalog ids (``specs/data/aliases.yaml``): ``aliases("gpu")["h100"] == "h100-sxm"``."""
    text = resources.files(_DATA).joinpath("aliases.yaml").read_text()
    table = (parse_package_yaml(text) or {}).get(kind) or {}
    return {str(k).strip().lower(): str(v).strip().lower() for k, v in table.items()}


def list_models() -> list[ModelSpec]:
    return list(model_catalog().values())


def list_hardware() -> list[HardwareSpec]:
    return list(hardware_catalog().values()) + list(_user_hardware.values())
