"""Forward pass of :class:`~infercast.harness.torch_model.TransformerModel` over a paged KV cache.

One step runs a *ragged* batch: every sequence contributes a run of new tokens (a prefill chunk, or one
decode token) at its own positions. The dense layers (projections, FFN, norms) run once over all the step's
tokens flattened together, as in vLLM; attention reads each sequence's keys through its block table:
prefill chunks one sequence at a time, decode tokens together (keys gathered into a padded batch, masked).

The cache per layer is ``[num_blocks * block_size, kv_heads, head_dim]`` for K and for V: token ``p`` of a
sequence lives in slot ``table[p // block_size] * block_size + p % block_size``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor

from infercast.errors import InfercastError
from infercast.harness.torch_attention import GQAAttention, rope_tables
from infercast.harness.torch_model import TransformerModel


@dataclass
class SeqChunk:
    """One sequence's share of a step: new tokens at positions ``start .. start + len(tokens) - 1``."""

    tokens: list[int]
    start: int
    table: list[int]
    sample: bool  # whether its last token's logits are needed


class PagedKV:
    """K and V pages of every layer of ``model`` for ``num_blocks`` blocks of ``block_size`` tokens."""

    def __init__(self, model: TransformerModel, num_blocks: int, block_size: int):
        attn = gqa_layers(model)[0]
        self.block_size = block_size
        slots = num_blocks * block_size
        shape = (slots, attn.nkv, attn.d)
        self.k = [torch.zeros(shape, device=model.device, dtype=model.dtype) for _ in model.decoders]
        self.v = [torch.zeros(shape, device=model.device, dtype=model.dtype) for _ in model.decoders]

    @staticmethod
    def bytes_per_block(model: TransformerModel, block_size: int) -> int:
        attn = gqa_layers(model)[0]
        item = torch.empty((), dtype=model.dtype).element_size()
        return 2 * len(model.decoders) * block_size * attn.nkv * attn.d * item


def gqa_layers(model: TransformerModel) -> list[GQAAttention]:
    """Every layer's attention, refused unless MHA/GQA/MQA (the paged path has no MLA latent cache)."""
    layers = [layer.attn for layer in model.decoders]
    if not all(isinstance(a, GQAAttention) for a in layers):
        raise InfercastError(
            f"the engine's paged attention supports MHA/GQA/MQA models; {model.spec.id} uses MLA", field="model"
        )
    return cast("list[GQAAttention]", layers)


def _slots(table: list[int], start: int, stop: int, bs: int) -> list[int]:
    return [table[p // bs] * bs + p % bs for p in range(start, stop)]


class PagedRunner:
    """Runs steps of ``model`` over a :class:`PagedKV` cache; returns the logits of sampled sequences."""

    def __init__(self, model: TransformerModel, kv: PagedKV):
        self.model, self.kv = model, kv
        self.attns = gqa_layers(model)
        self.bs = kv.block_size
        self.device = model.device

    @torch.inference_mode()
    def step(self, prefills: list[SeqChunk], decodes: list[SeqChunk]) -> Tensor:
        """Logits ``[S, vocab]`` of the sampled sequences, prefill chunks first then decodes, in order."""
        model, bs, dev = self.model, self.bs, self.device
        chunks = prefills + decodes
        tokens: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        for c in chunks:
            n = len(c.tokens)
            tokens.extend(c.tokens)
            positions.extend(range(c.start, c.start + n))
            slots.extend(_slots(c.table, c.start, c.start + n, bs))
        tok = torch.tensor(tokens, device=dev)
        pos = torch.tensor(positions, device=dev)
        slot = torch.tensor(slots, device=dev)
        cos, sin = rope_tables(pos[None], model.rot_dim)
        # decode keys: each decode sequence's slots [0, ctx), padded to the longest with slot 0 and masked off
        dec_q = sum(len(c.tokens) for c in prefills)
        if decodes:
            lens = [c.start + 1 for c in decodes]
            width = max(lens)
            gather = torch.zeros((len(decodes), width), dtype=torch.long)
            for r, c in enumerate(decodes):
                gather[r, : lens[r]] = torch.tensor(_slots(c.table, 0, lens[r], bs))
            gather = gather.to(dev)
            key_pos = torch.arange(width, device=dev)[None, :]
            q_pos = torch.tensor([c.start for c in decodes], device=dev)[:, None]
            dec_visible = key_pos <= q_pos
        # prefill keys: each chunk attends its sequence's slots [0, start + n), causal (and windowed) mask
        pre = []
        for c in prefills:
            ctx = c.start + len(c.tokens)
            kp = torch.arange(ctx, device=dev)[None, :]
            qp = torch.arange(c.start, ctx, device=dev)[:, None]
            pre.append((torch.tensor(_slots(c.table, 0, ctx, bs), device=dev), kp, qp))
        x = F.embedding(tok, model.embed)[None]  # [1, N, h]
        for li, layer in enumerate(model.decoders[: model.active_layers]):
            attn = self.attns[li]
            h = layer.attn_norm(x)
            q, k, v = attn._project(h, cos, sin)  # [1, N, H, D]
            q, k, v = q[0], k[0], v[0]
            kc, vc = self.kv.k[li], self.kv.v[li]
            kc.index_copy_(0, slot, k.to(kc.dtype))
            vc.index_copy_(0, slot, v.to(vc.dtype))
            out = torch.empty((q.shape[0], attn.nq, attn.d), device=dev, dtype=q.dtype)
            g = attn.nq // attn.nkv
            at = 0
            for c, (ks, kp, qp) in zip(prefills, pre, strict=True):
                n = len(c.tokens)
                kk, vv = kc[ks].transpose(0, 1), vc[ks].transpose(0, 1)  # [Hkv, ctx, D]
                qq = q[at : at + n].transpose(0, 1)  # [H, n, D]
                mask = kp <= qp
                if attn.window is not None:
                    mask = mask & (kp > qp - attn.window)
                o = F.scaled_dot_product_attention(
                    qq[None], kk[None], vv[None], attn_mask=mask, scale=attn.scale, enable_gqa=g > 1
                )
                out[at : at + n] = o[0].transpose(0, 1)
                at += n
            if decodes:
                kk = kc[gather].permute(0, 2, 1, 3)  # [B, Hkv, W, D]
                vv = vc[gather].permute(0, 2, 1, 3)
                qq = q[dec_q:].reshape(len(decodes), attn.nkv, g, attn.d)  # query group rows per KV head
                mask = dec_visible
                if attn.window is not None:
                    mask = mask & (key_pos > q_pos - attn.window)
                o = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask[:, None, None, :], scale=attn.scale)
                out[dec_q:] = o.reshape(len(decodes), attn.nq, attn.d)
            y = attn.o(out.reshape(1, -1, attn.nq * attn.d))
            x = layer._residual(x, y, layer.post_attn_norm)
            x = layer._residual(x, layer.ffn(layer.ffn_norm(x)), layer.post_ffn_norm)
        rows: list[int] = []
        end = 0
        for c in chunks:
            end += len(c.tokens)
            if c.sample:
                rows.append(end - 1)
        if not rows:
            return torch.empty((0, model.spec.vocab_size), device=dev)
        return model._logits(x[0, rows])
