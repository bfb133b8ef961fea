"""How many experts the harness's random-weight router touches in a decode step, against uniform routing.

The cost model prices a MoE step by the experts its T tokens touch, E·(1 − (1 − k/E)^T) with top-k of E
routed uniformly. The harness (``measure/``) routes with random weights; if its hidden states were alike across
tokens, its routing would concentrate and its MoE steps would read fewer experts than the model assumes. This
runs the harness on the CPU (a cut of the model, random tokens, a prefill then one decode step of ``--batch``
sequences) and counts, per layer, the distinct experts the decode step's tokens chose.

    python benchmarks/harness_moe_routing.py [--model qwen3-30b-a3b] [--layers 2] [--batch 32]

About a minute on two cores for Qwen3-30B-A3B (most of it drawing 128 experts' random weights per layer).
"""

from __future__ import annotations

import argparse

import torch

from infercast.harness.torch_ffn import MoEFFN
from infercast.harness.torch_model import TransformerModel
from infercast.specs.catalog import get_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen3-30b-a3b")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=64, help="prompt tokens prefilled before the decode step")
    args = parser.parse_args()
    spec = get_model(args.model)
    if spec.moe is None:
        parser.error(f"{args.model} has no routed experts")
    e, k = spec.moe.num_experts, spec.moe.experts_per_token
    model = TransformerModel(spec, num_layers=args.layers, precision="bf16", device="cpu")
    counts: list[int] = []

    def count(_module: torch.nn.Module, _inputs: tuple, logits: torch.Tensor) -> None:
        counts.append(int(logits.topk(k, dim=-1).indices.unique().numel()))

    for layer in model.modules():
        if isinstance(layer, MoEFFN):
            layer.router.register_forward_hook(count)
    gen = torch.Generator().manual_seed(0)
    model.allocate_cache(args.batch, args.context + 8)
    with torch.no_grad():
        model.prefill(torch.randint(0, spec.vocab_size, (args.batch, args.context), generator=gen), [0] * args.batch)
        counts.clear()
        model.decode(torch.randint(0, spec.vocab_size, (args.batch, 1), generator=gen), [args.context] * args.batch)
    uniform = e * (1 - (1 - k / e) ** args.batch)
    print(f"{args.model}: decode step of {args.batch} sequences, top-{k} of {e} experts")
    print(f"distinct experts per layer: {counts}; uniform routing touches {uniform:.1f} on average")


if __name__ == "__main__":
    main()
