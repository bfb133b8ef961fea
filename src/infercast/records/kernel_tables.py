"""Read measured kernel tables from NVIDIA's aiconfigurator-core wheel: locate an unpacked wheel, pick the newest
table of an op, and read collective latency curves.

The wheel (Apache-2.0, ``pip install 'infercast[aiconfigurator]'``) ships per-GPU, per-engine-version
parquet tables under ``aiconfigurator_core/systems/data/<gpu>/<op>/<engine>/<version>/``. Kernel parameters are
fitted to the GEMM and attention tables, and ``cost/profiles/kernels/<gpu>.yaml`` written, by
:mod:`infercast.calibrate.kernel_fit`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from infercast.errors import InfercastError

GPU_DIRS = {
    "h100-sxm": "h100_sxm",
    "h200": "h200_sxm",
    "b200": "b200_sxm",
    "b300": "b300_sxm",
    "gb200": "gb200",
    "a100-80gb": "a100_sxm",
    "l40s": "l40s",
}
"""infercast hardware id -> aiconfigurator system folder (the tables' ``device`` column names the exact part:
"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", ...)."""

INSTALL_HINT = (
    "aiconfigurator tables not found: pip install 'infercast[aiconfigurator]' (installs aiconfigurator-core), "
    "or give --from aiconfigurator:PATH to an unpacked aiconfigurator-core wheel"
)

CUSTOM_ALLREDUCE = {"vllm": "vllm_graph", "sglang": "sglang_graph", "trtllm": "trtllm"}
"""Engine folder -> the backend/implementation rows used: CUDA-graph replays (how engines run decode)."""

ELEMENT_BYTES = {"bfloat16": 2, "half": 2, "float16": 2, "int8": 1, "fp8": 1, "float32": 4}


@dataclass(frozen=True)
class Source:
    """An unpacked aiconfigurator-core: where its system tables are and which wheel version they came from."""

    data: Path
    version: str

    def gpu(self, gpu_id: str) -> Path:
        folder = GPU_DIRS.get(gpu_id)
        if folder is None:
            raise InfercastError(
                f"no aiconfigurator tables for {gpu_id!r}; known: {', '.join(GPU_DIRS)}",
                field="gpu",
                allowed=list(GPU_DIRS),
            )
        return self.data / folder


def locate(path: str | Path | None = None) -> Source:
    """Find the tables: ``path`` may be an unpacked wheel, its ``aiconfigurator_core`` package, ``systems`` or
    ``systems/data``; without it, the installed ``aiconfigurator_core`` package. One clear error otherwise."""
    if path is None:
        spec = find_spec("aiconfigurator_core")
        if spec is None or not spec.submodule_search_locations:
            raise InfercastError(INSTALL_HINT, field="from")
        candidates = [Path(p) for p in spec.submodule_search_locations]
    else:
        root = Path(path).expanduser()
        if not root.exists():
            raise InfercastError(f"no such folder: {root} ({INSTALL_HINT})", field="from")
        candidates = [root, root / "aiconfigurator_core"]
    for base in candidates:
        for data in (base / "systems" / "data", base / "data", base):
            if data.is_dir() and any((data / d).is_dir() for d in GPU_DIRS.values()):
                return Source(data, _wheel_version(data))
    raise InfercastError(f"{path or candidates[0]} holds no systems/data/<gpu> tables ({INSTALL_HINT})", field="from")


def _wheel_version(data: Path) -> str:
    """Version from the wheel's dist-info METADATA next to the package, else the package's __version__."""
    for parent in data.parents:
        for meta in parent.glob("aiconfigurator_core-*.dist-info/METADATA"):
            for line in meta.read_text(errors="replace").splitlines():
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    return "unknown"


def version_key(version: str) -> tuple:
    """Sort key for engine versions such as 0.5.6.post2, 1.3.0rc20, 2.27.3, 0.1.dev19262 (PEP 440 order, so a dev or
    rc build sorts below its release); a string that is not a PEP 440 version sorts below every one that is."""
    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, tuple(int(x) for x in re.findall(r"\d+", version)))


def latest(folder: Path, filename: str) -> Path | None:
    """The newest ``<version>/<filename>`` under ``folder`` (None if no version has it)."""
    if not folder.is_dir():
        return None
    found = [v for v in folder.iterdir() if (v / filename).is_file()]
    if not found:
        return None
    return max(found, key=lambda v: version_key(v.name)) / filename


def read_table(path: Path) -> Any:
    """A parquet table as a pandas DataFrame (pandas and pyarrow come with the ``aiconfigurator`` extra)."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency of infercast
        raise InfercastError("reading aiconfigurator tables needs pandas", field="from") from None
    try:
        return pd.read_parquet(path)
    except ImportError:
        raise InfercastError(
            "reading aiconfigurator tables needs pyarrow: pip install 'infercast[aiconfigurator]'", field="from"
        ) from None


def relative(source: Source, path: Path) -> str:
    """Table path as the provenance names it: <op>/<engine>/<version>/<file> of the GPU folder."""
    return "/".join(path.parts[-4:])


def _curves(frame: Any, dtype_col: str) -> dict[int, dict[str, list[float]]]:
    """Per group size: message bytes and microseconds (aiconfigurator's message_size counts elements)."""
    out: dict[int, dict[str, list[float]]] = {}
    for n, rows in frame.groupby("num_gpus"):
        rows = rows.groupby("message_size", as_index=False)["latency"].median().sort_values("message_size")
        width = ELEMENT_BYTES.get(str(frame[dtype_col].iloc[0]), 2)
        out[int(n)] = {
            "bytes": [int(x) * width for x in rows["message_size"]],
            "us": [round(float(ms) * 1000.0, 4) for ms in rows["latency"]],  # tables are in milliseconds
        }
    return out


def import_collectives(source: Source, gpu_id: str) -> dict[str, dict[str, Any]]:
    """Measured collective curves of one GPU: {kind: {engine: {table, points, sizes: {n: {bytes, us}}}}}."""
    base = source.gpu(gpu_id) / "comm"
    out: dict[str, dict[str, Any]] = {}
    for engine, backend in CUSTOM_ALLREDUCE.items():
        path = latest(base / engine, "custom_allreduce_perf.parquet")
        if path is None:
            continue
        frame = read_table(path)
        column = "backend" if "backend" in frame.columns else "implementation"
        if column in frame.columns:
            frame = frame[frame[column] == backend]
        frame = frame[frame["allreduce_dtype"] == "bfloat16"]
        if frame.empty:
            continue
        out.setdefault("all_reduce", {})[engine] = {
            "table": f"{relative(source, path)} ({backend})",
            "points": len(frame),
            "sizes": _curves(frame, "allreduce_dtype"),
        }
    path = latest(base / "nccl", "nccl_perf.parquet")
    if path is not None:
        frame = read_table(path)
        frame = frame[frame["nccl_dtype"] == "half"]
        for kind in ("all_reduce", "all_gather", "alltoall"):
            rows = frame[frame["op_name"] == kind]
            if not rows.empty:
                out.setdefault(kind, {})["nccl"] = {
                    "table": f"{relative(source, path)} ({kind}, fp16)",
                    "points": len(rows),
                    "sizes": _curves(rows, "nccl_dtype"),
                }
    return out
