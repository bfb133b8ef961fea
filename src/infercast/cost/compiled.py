"""Fast paths of ``step_time`` for the simulator's hot loop, derived from the same operator table.

* :func:`compile_scalar` turns the coefficient tables of a :class:`StepCostModel` into one straight-line
  Python function of a step's features (no NumPy call overhead: a few microseconds per step).
* :class:`DecodeTable` precomputes, for every decode batch size n, the parts of a decode-only step that do
  not depend on context, and the two roofline lines of the parts that do; a decode step is then
  ``K[n] + sum(max(line_compute, line_memory))`` — exact, and vectorised over many steps at once.

Both reproduce :meth:`StepCostModel.step_time` to floating-point rounding (tests check it).
"""

from __future__ import annotations

import copy
import math
from bisect import bisect_right
from collections.abc import Callable

import numpy as np

from infercast.cost.batch import FEATURES, NUM_FEATURES, F, StepBatch
from infercast.cost.step import StepCostModel


def _graphed(model: StepCostModel) -> str:
    """The step's CUDA-graph test (:meth:`StepCostModel.evaluate`): decode-only graphs are captured by batch size."""
    if model.graphs_decode_only:
        return f"seqs <= {model.graph_max_tokens!r} and prefill_tokens <= 0.0"
    return f"tokens <= {model.graph_max_tokens!r}"


def compile_scalar(model: StepCostModel) -> Callable[..., float]:
    """A Python function ``f(**features) -> seconds`` for one step, called with every name of
    :data:`~infercast.cost.batch.FEATURES` as a keyword (a missing or unknown feature is a TypeError).

    Generated from one template, with the model's coefficients folded in as literals::

        def step_time(*, one, tokens, sampled, ...):          # every FEATURES name
            frac = -expm1(tokens * log(1 - k/E))              # MoE: share of experts a step touches
            graphed = tokens <= <graph max> [and prefill_tokens <= 0]   # replayed as a CUDA graph
            pk = <graph launch s> if graphed else <eager launch s>
            total = 0.0
            if <active feature> > 0:                          # one block per operator
                r = max(<rows>, <gemm_m_floor>)               # GEMMs with an efficiency curve only
                c = (<flops / peak>) * (r + <m_half>) / r     # or <flops / peak>, or 0.0
                m = <bytes / bandwidth>                       # or a measured curve of the message size
                [m = max(m, <bytes x s/B per block> / decode_tokens)]   # decode attention without split-KV
                total += max(c, m) + <kernels> * pk + <latency> [+ <s> * decode_tokens] [+ <s> * tokens]
            [if tokens > 0 and not graphed: total = max(total, <layers x eager host s>)]   # host-bound
            if tokens > 0:
                total += <step overhead> + <seq overhead> * seqs
                [total += <layers x layer overhead, graph> if graphed else <..., eager>]   # unfused engines
            return total

    Generated rather than interpreted because it runs once per prefill step of the simulator (about one per
    request): ``python benchmarks/bench_step_fn.py`` measures 5 us per call against 43 us for the same loop
    interpreted (Llama-3.1-8B, loaded machine), i.e. ~35 s more on the 1M-request benchmark. Tests check it
    equals :meth:`StepCostModel.step_time`.
    """
    n = model.n_ops
    names = [*list(FEATURES), "frac"]
    p = model.profile
    lines = [f"def step_time(*, {', '.join(FEATURES)}):"]
    if model.pp > 1:  # pipeline: min(pp, seqs) micro-batches, each 1/m of the work (see StepCostModel.columns)
        split = [f for f in FEATURES[1:] if f != "seqs"]
        lines.append(f"    _m = seqs if seqs < {float(model.pp)!r} else {float(model.pp)!r}")
        lines.append("    _m = _m if _m > 1.0 else 1.0")
        lines.append(f"    ({', '.join(split)},) = ({', '.join(f'{f} / _m' for f in split)},)")
    if model.table.moe_k_over_e:
        lines.append(f"    frac = -_expm1(tokens * {float(model.log1m_k_over_e)!r}) if tokens > 0 else 0.0")
    lines.append(f"    graphed = {_graphed(model)}")
    lines.append(f"    pk = {float(p.kernel_overhead_graph_s)!r} if graphed else {float(p.kernel_overhead_eager_s)!r}")
    lines.append("    total = 0.0")
    namespace: dict[str, object] = {"_expm1": math.expm1, "inf": math.inf, "_bisect": bisect_right}
    curves = {i: (message, calls, curve) for i, message, calls, curve in model.curves}

    def linear(row: np.ndarray, scale: float = 1.0) -> str:
        """``Σ c_j·x_j`` with the scale folded into the coefficients (constants computed once, here)."""
        terms = []
        for j, c in enumerate(row):
            if c != 0.0:
                c = float(c) * scale
                terms.append(names[j] if c == 1.0 else f"{c!r} * {names[j]}")
        return " + ".join(terms) if terms else "0.0"

    # operators grouped by the feature that switches them on (one test per group), each group's launches,
    # latencies and per-token host terms summed into one line: the same sum as the vector path, reordered
    groups: dict[str, list[int]] = {}
    for i in range(n):
        groups.setdefault(FEATURES[model.active[i]], []).append(i)
    for active, ops in groups.items():
        lines.append(f"    if {active} > 0:  # {', '.join(model.names[i] for i in ops)}")
        kernels = latency = 0.0
        scaled: dict[str, float] = {}  # seconds per unit of a feature: element-wise rooflines, per-token host work
        rows: list[str] = []  # the GEMM row count last computed in this group (``r``)
        for i in ops:
            lines.extend(_roofline_lines(model, i, names, namespace, curves, linear, scaled, rows))
            kernels += float(model.kernels[i, 0])
            latency += float(model.latency[i, 0])
            for feature, per_op in (("decode_tokens", model.per_decode), ("tokens", model.per_token)):
                for j, sec in per_op:
                    if j == i:
                        scaled[feature] = scaled.get(feature, 0.0) + float(sec)
        extra = [f"{kernels!r} * pk"] if kernels else []
        extra += [f"{latency!r}"] if latency else []
        extra += [f"{sec!r} * {feature}" for feature, sec in scaled.items()]
        if extra:
            lines.append(f"        total += {' + '.join(extra)}")
    if model.eager_floor_s:  # an eager step: the host launching it may bind
        floor = float(model.eager_floor_s)
        lines.append(f"    if tokens > 0.0 and not graphed and total < {floor!r}:\n        total = {floor!r}")
    so, ss = float(p.step_overhead_s), float(p.seq_overhead_s)
    lines.append(f"    if tokens > 0:\n        total += {so!r} + {ss!r} * seqs")
    if any(model.layer_overhead_s):  # an unfused engine's extra kernels per layer (graph or eager, as pk)
        lg, le = (float(v) for v in model.layer_overhead_s)
        lines.append(f"        total += {lg!r} if graphed else {le!r}")
    lines.append("    return total")
    exec("\n".join(lines), namespace)
    fn = namespace["step_time"]
    fn.__doc__ = f"Step time (s) of {model.dep.label}; generated by infercast.cost.compiled."
    return fn  # type: ignore[return-value]


def _roofline_lines(
    model: StepCostModel,
    i: int,
    names: list[str],
    namespace: dict[str, object],
    curves: dict,
    linear: Callable[..., str],
    scaled: dict[str, float],
    rows: list[str],
) -> list[str]:
    """Lines adding operator ``i``'s roofline time, max(compute, memory), to ``total`` inside its group's test.

    Where one side is zero or both are one multiple of the same feature (element-wise ops), the larger
    coefficient binds for every step: it goes into ``scaled`` (seconds per unit of that feature), no line.
    Decode attention without split-KV and gated DeltaNet's chunks in series add a floor to the memory side.
    ``rows`` holds the GEMM row count already in ``r`` in this group, reused when the next GEMM has the same.
    """
    n, coef = model.n_ops, model.coef
    ipe, mh = float(model.inv_peak_eff[i, 0]), float(model.m_half[i, 0])
    ibw = float(model.inv_bw[i, 0])
    compute, memory = linear(coef[i], ipe), linear(coef[n + i], ibw)
    blocks_bound = [per_block for j, per_block in model.cta_bound if j == i]
    serial = [per_token for j, per_token in model.chunk_serial if j == i]
    if i not in curves and not mh and not blocks_bound and not serial:
        c_terms, m_terms = np.flatnonzero(coef[i]), np.flatnonzero(coef[n + i])
        terms = {int(j) for j in (*c_terms, *m_terms)}
        if len(terms) == 1 and c_terms.size <= 1 and m_terms.size <= 1:
            (j,) = terms
            seconds = max(float(coef[i, j]) * ipe, float(coef[n + i, j]) * ibw)
            scaled[names[j]] = scaled.get(names[j], 0.0) + seconds
            return []
        if not terms:
            return []
    out = []
    if i in curves:  # measured curve of the message size: the same arithmetic as Curve.__call__
        message, calls, curve = curves[i]
        namespace[f"_cx{i}"], namespace[f"_ct{i}"], namespace[f"_cs{i}"] = curve.sizes, curve.seconds, curve.slopes
        out.append(f"        v = {linear(message)}")
        out.append(f"        v = v if v > {curve.sizes[0]!r} else {curve.sizes[0]!r}")
        out.append(f"        j = _bisect(_cx{i}, v) - 1")
        memory = f"{float(calls)!r} * (_ct{i}[j] + (v - _cx{i}[j]) * _cs{i}[j])"
    if compute == "0.0":
        out.append("        c = 0.0")
    elif mh:
        count = linear(coef[2 * n + i])
        if rows != [count]:
            floor = float(model.profile.gemm_m_floor)
            out.append(f"        r = {count}")
            out.append(f"        r = r if r > {floor!r} else {floor!r}")
            rows[:] = [count]
        out.append(f"        c = ({compute}) * (r + {mh!r}) / r")
    else:
        out.append(f"        c = {compute}")
    out.append(f"        m = {memory}")
    for per_block in blocks_bound:  # decode attention without split-KV: the blocks may bind
        bound = linear(coef[n + i], per_block)
        out.append(f"        b = ({bound}) / (decode_tokens if decode_tokens > 1.0 else 1.0)")
        out.append("        m = m if m > b else b")
    for per_token in serial:  # chunks of one sequence in series: its mean chunk may bind
        out.append(f"        b = {float(per_token)!r} * prefill_tokens / (prefill_seqs if prefill_seqs > 1.0 else 1.0)")
        out.append("        m = m if m > b else b")
    out.append("        total += c if c > m else m")
    return out


class DecodeTable:
    """Decode-only step times for batch sizes 0..max_n as ``K[n] + Σ max(compute line, memory line)``.

    The lines are in the decode context sums ``S = Σ ctx`` and ``Sw = Σ min(ctx, window)``.
    """

    def __init__(self, model: StepCostModel, max_n: int):
        self.max_n = max_n
        ns = np.arange(max_n + 1, dtype=float)
        base = _decode_features(ns, 0.0, 0.0)
        step_s = _decode_features(ns, 1.0, 0.0)
        step_w = _decode_features(ns, 0.0, 1.0)
        cols0 = model.columns(StepBatch(base))
        _, _, c0, m0, o0, e0 = model.evaluate(cols0, fast=True)
        _, _, c1, m1, _, _ = model.evaluate(model.columns(StepBatch(step_s)), fast=True)
        _, _, c2, m2, _, _ = model.evaluate(model.columns(StepBatch(step_w)), fast=True)
        dcs, dms, dcw, dmw = c1 - c0, m1 - m0, c2 - c0, m2 - m0
        varies = (np.abs(dcs) + np.abs(dms) + np.abs(dcw) + np.abs(dmw)).max(axis=1) > 0
        fixed = ~varies
        self.constant = (np.maximum(c0[fixed], m0[fixed]) + o0[fixed]).sum(axis=0) + e0 + o0[varies].sum(axis=0)
        self.constant[0] = 0.0
        # per varying op: intercepts and slopes by n (the slopes are the same for every n, except under pipeline
        # parallelism with fewer sequences than stages, whose micro-batches each carry 1/n of the context)
        self.c0, self.m0 = c0[varies], m0[varies]
        self.cs, self.ms = dcs[varies], dms[varies]
        self.cw, self.mw = dcw[varies], dmw[varies]
        self.num_varying = int(varies.sum())
        self._lists()

    def _lists(self) -> None:
        """The plain-float copies of the coefficients the simulator's pure-Python paths read: [op][n]."""
        self.cs_f, self.ms_f = self.cs.tolist(), self.ms.tolist()
        self.cw_f, self.mw_f = self.cw.tolist(), self.mw.tolist()
        self.constant_f = self.constant.tolist()
        self.c0_f, self.m0_f = self.c0.tolist(), self.m0.tolist()

    def scaled(self, factor: float) -> DecodeTable:
        """A copy whose every step takes ``factor`` times as long (a max of lines scales with its lines)."""
        out = copy.copy(self)
        for name in ("constant", "c0", "m0", "cs", "ms", "cw", "mw"):
            setattr(out, name, getattr(self, name) * factor)
        out._lists()
        return out

    def step_times(self, n: np.ndarray, s: np.ndarray, sw: np.ndarray) -> np.ndarray:
        """Seconds of decode-only steps with ``n`` sequences and context sums ``s``/``sw`` (arrays)."""
        n = np.asarray(n, dtype=np.intp)
        total = self.constant[n]
        for i in range(self.c0.shape[0]):
            comp = self.c0[i, n] + self.cs[i, n] * s + self.cw[i, n] * sw
            mem = self.m0[i, n] + self.ms[i, n] * s + self.mw[i, n] * sw
            total = total + np.where(n > 0, np.maximum(comp, mem), 0.0)
        return total


def _decode_features(n: np.ndarray, s: float, sw: float) -> np.ndarray:
    x = np.zeros((NUM_FEATURES, n.size))
    x[F["one"]] = 1.0
    for name in ("tokens", "sampled", "decode_tokens", "seqs"):
        x[F[name]] = n
    x[F["decode_kv"]] = s
    x[F["decode_kv_win"]] = sw
    return x
