"""How many ops the torch harness dispatches per decoder layer, against the operator table's kernels (CPU).

The harness (harness/torch_model.py) runs its layers unfused. This counts the ATen ops one step dispatches,
with ``TorchDispatchMode``, at two depths: one layer and two layers. The difference is the cost of one layer.
Views (reshape, transpose, slicing and the like) launch no kernel, so ops and kernels are counted apart. The
``torch`` engine's per-layer overheads (cost/profiles/engine_load.yaml, ``harness_fit``) stand for this
difference from the table's fused kernels.

    python benchmarks/harness_kernel_count.py [MODEL ...]      # default: llama-3.2-1b qwen3-8b

It runs on the CPU with random weights, a few seconds per model. The counts are those of the CPU dispatch; on
CUDA an op may launch more than one kernel.
"""

from __future__ import annotations

import argparse

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from infercast.cost.operators import build_op_table
from infercast.harness.torch_model import TransformerModel
from infercast.specs.catalog import get_model
from infercast.specs.deployment import Deployment
from infercast.specs.truncate import truncated

VIEW_OPS = frozenset(
    (
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "view_as",
        "expand",
        "slice",
        "select",
        "narrow",
        "transpose",
        "t",
        "permute",
        "unsqueeze",
        "squeeze",
        "flatten",
        "unflatten",
        "as_strided",
        "alias",
        "detach",
        "lift_fresh",
        "split",
        "split_with_sizes",
        "unbind",
        "chunk",
    )
)
"""ATen ops that return a view of their input: no kernel runs."""


class OpCounter(TorchDispatchMode):
    """Records the name of every ATen op dispatched inside the ``with`` block."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


def step_ops(model_id: str, layers: int, tokens: int) -> tuple[int, int]:
    """(ops, kernel-launching ops) of one step: a decode step (``tokens`` 1) or a prefill of ``tokens``."""
    model = TransformerModel(get_model(model_id), num_layers=layers, precision="bf16", device="cpu")
    model.allocate_cache(1, 512 + tokens + 1)
    prompt = torch.randint(0, 100, (1, tokens))
    with torch.no_grad(), OpCounter() as counter:
        if tokens == 1:
            model.decode(prompt[:, 0], [512])
        else:
            model.prefill(prompt)
    return len(counter.ops), sum(op not in VIEW_OPS for op in counter.ops)


def table_kernels_per_layer(model_id: str) -> float:
    """Kernels of one decoder layer in the operator table (the fused kernels a serving engine runs)."""
    one, two = (build_op_table(Deployment.resolve(truncated(get_model(model_id), n), "h100-sxm")) for n in (1, 2))
    return sum(r.kernels for r in two.rows) - sum(r.kernels for r in one.rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["llama-3.2-1b", "qwen3-8b"])
    args = parser.parse_args()
    print(f"{'model':16} {'step':12} {'ops/layer':>10} {'kernels/layer':>14} {'table kernels/layer':>20}")
    for model_id in args.models:
        table = table_kernels_per_layer(model_id)
        for name, tokens in (("decode", 1), ("prefill 64", 64)):
            (ops1, k1), (ops2, k2) = step_ops(model_id, 1, tokens), step_ops(model_id, 2, tokens)
            print(f"{model_id:16} {name:12} {ops2 - ops1:>10} {k2 - k1:>14} {table:>20g}")


if __name__ == "__main__":
    main()
