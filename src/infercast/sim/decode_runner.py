"""Decode-only steps of one replica: spans of them in O(1) each, and speculative decoding steps.

Between events (arrival, completion, block boundary, window crossing, time limit) the running batch evolves
deterministically, so a whole span of decode steps is accounted at once: closed-form sums of the step times
(:mod:`infercast.sim.decode_cost`), the batch state advanced incrementally (:mod:`infercast.sim.decode_set`),
the blocks it grows into allocated in one go (:class:`~infercast.sim.blocks.BlockLedger`). With
``Replica.skip`` off the same code runs one step at a time.
"""

from __future__ import annotations

import math
from array import array
from typing import TYPE_CHECKING

from infercast.sim.decode_cost import DecodeSpan, steps_to_reach
from infercast.sim.recorder import StepRecord

if TYPE_CHECKING:
    from infercast.cost.compiled import DecodeTable
    from infercast.sim.replica import Replica


def single_line(table: DecodeTable) -> tuple | None:
    """With one context-dependent operator (the common case): its lines' intercepts and slopes in Σ context by
    batch size, for :func:`decode_span`'s inline path (without a window Σ min(ctx, W) = Σ ctx, so the window
    slope folds into the context slope); None otherwise."""
    if table.num_varying != 1:
        return None
    cs = [a + b for a, b in zip(table.cs_f[0], table.cw_f[0], strict=True)]
    ms = [a + b for a, b in zip(table.ms_f[0], table.mw_f[0], strict=True)]
    return table.constant_f, table.c0_f[0], table.m0_f[0], cs, ms


def decode_gaps(rep: Replica, end: float) -> None:
    """Gaps of a decode step ending at ``end`` after a change (a join, a prefill step, a swap): newcomers
    from their own last token, the others together from the last decode step."""
    batch = rep.decoding
    others = batch.n
    push = rep.rec.gaps.point_buffer().extend
    if batch.joined:
        for _, t_last in batch.joined:
            push((end - t_last, 1.0))
            others -= 1
        batch.joined = []
    if others:
        push((end - batch.last_decode, others))


def _stops_at_arrivals(rep: Replica) -> bool:
    """Whether a span ends where a request joins the queue: a continuous batch takes it at the next step; with
    polls its first poll counts (even for a static batch); under an overlap scheduler a static batch's queue
    decides the admission cut-off of the step after the batch (a queued request makes the engine busy), so the
    request must join the queue at the step the reference simulator moves it."""
    return rep.scheduler.continuous or rep.recv_interval > 1 or rep.overlap


def decode_span(rep: Replica, t_limit: float) -> None:
    """Decode steps until the next event, in O(1) each (one step at a time when ``rep.skip`` is off).

    A span's step j costs ``const + Σ_v max(a_v + j·da_v, b_v + j·db_v)`` (:class:`DecodeSpan`). Completions
    end a span; when nothing else could be scheduled afterwards (no queue, no prefill, no closed-loop
    client waiting) the next span starts here instead of in the replica's loop.
    """
    batch, blocks, table = rep.decoding, rep.blocks, rep.decode_table
    kv, ramps = blocks.kv, rep.rec.gaps.ramp_buffer(table.num_varying)
    # spans end where a request joins the queue: an arrival, or with polls its first poll (even for a static batch)
    arrivals, visible, pending = _stops_at_arrivals(rep), rep.table.visible, rep.pending
    waiting, swapped, swaps = rep.waiting, rep.table.swapped, rep.config.preemption == "swap"
    window, skip, limited, overlap = rep.window, rep.skip, t_limit < math.inf, rep.overlap
    one_line = rep.one_line
    simple_lines, waits = one_line is not None and not window, rep.wait_iters or rep.adp_iters
    if one_line is not None:
        const_f, c0_f, m0_f, cs_f, ms_f = one_line
    while True:
        n = batch.n
        s = float(batch.sum_base + n * batch.D)
        swap = rep.swap_cost  # host transfers of preempted KV delay this span
        if swap:
            rep.swap_cost = 0.0
        origin = rep.t + swap
        if not skip:
            k = 1
        else:  # steps to the next completion (DecodeSet.steps_to_completion, whose stale-entry skip is rare)
            top = batch.heap[0]
            k = top[0] - batch.D if batch.finish_at.get(top[1]) == top[0] else batch.steps_to_completion()
            if swaps and k > 1 and waiting and swapped[waiting[0]] and _swaps_in_next_step(rep):
                k = 1  # the replica's loop brings the head of the queue back before the second step
            if k > 1 and rep.inbox and _joins_from_inbox_next_step(rep):
                k = 1  # blocks a preemption freed just now let the inbox's head join before the second step
        k = _waiting_cut(rep, k) if waits and k > 1 and waiting else k
        line = None
        if simple_lines:
            # step j costs K + max(ca + j·dca, ma + j·dma); when one line stays on top over the k steps, the span
            # is one arithmetic series (the common case: no objects made, deadlines by decode_cost.steps_to_reach)
            const, cs, ms = const_f[n], cs_f[n], ms_f[n]
            ca, dca = c0_f[n] + cs * s, cs * n
            ma, dma = m0_f[n] + ms * s, ms * n
            last = k - 1
            if (ca >= ma) == (ca + dca * last >= ma + dma * last):
                base, slope = (const + ca, dca) if ca >= ma else (const + ma, dma)
                line = (ca, dca, ma, dma)
                first = base
                if k > 1 and arrivals and pending:
                    until = visible[pending[0]] - origin
                    if k * base + slope * k * (k - 1) * 0.5 >= until:  # the span reaches the next arrival
                        k = polled_at(rep, steps_to_reach(base, slope, until, k), k)
                if k > 1 and limited:
                    k = steps_to_reach(base, slope, t_limit - origin, k)
        span = None
        if line is None:  # several lines, a window, or the top line changes within the span
            span, const, line, first, k = _general_span(rep, n, s, k, origin, t_limit)
        now = blocks.reserved  # the first step's growth, reserved by Replica.ensure_decode_blocks
        if k > 1:
            grown = batch.growth_over(k)
            if grown - now > kv.free + kv.evictable:
                k = _steps_with_blocks(rep, k)
                grown = batch.growth_over(k)
            if grown > now and not kv.allocate(grown - now):
                raise RuntimeError("block accounting error: a decode span exceeded the checked budget")
            total = span.total(k) if span is not None else k * base + slope * k * (k - 1) / 2
        else:
            grown, total = now, first
        blocks.reserved = 0
        if rep.holding or rep.adp_iters or rep.recv_interval > 1:
            _count_steps(rep, k)
        start = rep.t
        if swap:
            first += swap
            total += swap
        end = start + total
        if overlap and k == 1:  # where the span's last step started (an overlap scheduler's admission cut-off)
            rep.last_step_start = start
        elif overlap:
            rep.last_step_start = end - (span.step(k - 1) if span is not None else base + slope * (k - 1))
        if not _book_span(rep, ramps, n, k, grown, start, end, first, total, swap, const, line, span, t_limit):
            return


def _waiting_cut(rep: Replica, k: int) -> int:
    """Steps of a span while prompts queue under batch waiting (which decides at every step: one at a time) or
    attention-DP balancing: held prompts go when the wait times out."""
    if rep.adp_iters:
        return min(k, rep.adp_iters - 1 - rep.adp_count) if rep.holding else k
    return min(k, rep.wait_iters - rep.wait_count) if rep.holding else 1


def count_waits(rep: Replica, k: int) -> None:
    """Count ``k`` decode steps towards the prompt-holding timeouts: attention-DP balancing counts every step
    (restarting at its timeout), batch waiting the steps it held prompts."""
    if rep.adp_iters:
        rep.adp_count = (rep.adp_count + k) % rep.adp_iters
    elif rep.holding:
        rep.wait_count += k


def _count_steps(rep: Replica, k: int) -> None:
    """Count a span's ``k`` decode steps towards the prompt-holding timeouts and the next poll for requests."""
    count_waits(rep, k)
    if rep.recv_interval > 1:
        rep.recv_count = counted(rep.recv_count + k, rep.recv_interval)


def polled_at(rep: Replica, reach: int, cap: int) -> int:
    """Steps of a span until the engine takes in a request that reaches it by the end of step ``reach``: that
    step's end, or with polls every ``recv_interval`` decode steps the first poll from there (at most ``cap``)."""
    n = rep.recv_interval
    if n == 1:
        return reach
    first = n - rep.recv_count  # the span's first poll follows this many steps
    if reach <= first:
        return min(first, cap)
    return min(first + -(-(reach - first) // n) * n, cap)


def counted(steps: int, n: int) -> int:
    """Decode steps since the last poll after ``steps`` counted from the one before (polls every ``n``; ``n``:
    one is due at the next step's start)."""
    return steps if steps <= n else (steps - n - 1) % n + 1


def _general_span(
    rep: Replica, n: int, s: float, k: int, origin: float, t_limit: float
) -> tuple[DecodeSpan, float, tuple | None, float, int]:
    """A span priced by a :class:`DecodeSpan` (several lines, a window, or a line that does not stay on top):
    the span, its constant, its line when the replica has one, its first step's time and its steps (``k`` cut
    at the next window crossing, arrival or ``t_limit``)."""
    batch, window = rep.decoding, rep.window
    span = DecodeSpan(
        rep.decode_table, n, s, float(batch.window_sum()) if window else s, n, batch.n_below if window else n
    )
    first = span.step(0)
    if k > 1:
        if window:
            k = min(k, batch.steps_to_window())
        if _stops_at_arrivals(rep) and rep.pending:
            k = polled_at(rep, span.steps_until(rep.table.visible[rep.pending[0]] - origin, k, first), k)
        if t_limit < math.inf:
            k = span.steps_until(t_limit - origin, k, first)
    return span, span.const, span.lines[0] if rep.one_line is not None else None, first, k


def _book_span(
    rep: Replica,
    ramps: array,
    n: int,
    k: int,
    grown: int,
    start: float,
    end: float,
    first: float,
    total: float,
    swap: float,
    const: float,
    line: tuple | None,
    span: DecodeSpan | None,
    t_limit: float,
) -> bool:
    """Book a span of ``k`` steps of ``n`` sequences from ``start`` to ``end`` (the first step ``first``
    seconds, ``swap`` of it a swap-in): its token gaps, the batch's growth by ``grown`` blocks, the clock, the
    recorder, the front-end, completions and the occupancy sample. True when the next span starts here: a
    sequence finished and nothing else could be scheduled (see :func:`decode_span`)."""
    batch, rec = rep.decoding, rep.rec
    # gaps: every sequence sees every step of the span; the first step's gap is measured from each
    # sequence's last token (the last decode step, or its own first token if it just joined)
    if not batch.joined and not swap and batch.last_decode == start:
        j0 = 0  # every sequence's previous token came out at the last decode step: one ramp
    else:
        j0 = 1
        decode_gaps(rep, start + first)
    if k > j0:  # steps j0..k-1, each a gap of every sequence: (j0, j1, weight, const, lines...)
        if line is not None:  # set exactly when the replica has one line (single)
            ramps.extend((j0, k, n, const, line[0], line[1], line[2], line[3]))
        else:
            assert span is not None  # several lines: priced by a DecodeSpan
            ramps.extend((j0, k, n, const))
            for each in span.lines:
                ramps.extend(each)
    if rep.window:
        batch.advance(k, grown)
    else:  # DecodeSet.advance without window crossings
        batch.held += grown
        batch.D += k
    batch.last_decode = end
    rep.t = end
    rep.busy += total
    if rec.tracing:
        rec.step(StepRecord(rep.rid, start, total, "decode", 0, n, steps=k))
    else:
        rec.step_count += k
        rec.busy_time += total
        rec.decode_seqs += n * k
    if rep.front_end is not None:
        rep.stream_delay = rep.front_end.emit(start, end, n, k, first)
    finished = batch.heap[0][0] <= batch.D and rep.complete(end)
    if end >= rep.next_sample:
        rep.next_sample = rec.sample(rep.rid, end, rep.blocks.kv.used, batch.n, len(rep.waiting), len(rep.prefilling))
    if not (finished and rep.skip and batch.n and not rep.waiting and not rep.prefilling and end < t_limit):
        return False
    if rep.inbox:  # freed room may take a prefilled request (disaggregated decode pool)
        return False
    pending = rep.pending
    if (pending and rep.table.visible[pending[0]] <= end) or rep.yield_on_event:
        return False
    if batch.residue[(-batch.D) % batch.bs] != rep.blocks.reserved:
        rep.ensure_decode_blocks()
        if rep.waiting or not batch.n:  # a preemption queued work for the scheduler
            return False
    return True


def speculative_step(rep: Replica) -> None:
    """Draft k tokens, verify k + 1 per sequence in one target pass, emit 1 + accepted (see speculative.py)."""
    batch, blocks, spec = rep.decoding, rep.blocks, rep.spec
    assert spec is not None  # Replica._step calls this only with a speculator
    k = spec.config.num_tokens
    # room for the most tokens the step can emit
    while batch.n and not blocks.fits(batch.growth_over(k + 1) - blocks.reserved):
        rep.preempt(batch.victim())
    if not batch.n:
        return
    rep.recv_count += 1  # a verify pass polls as a decode step does (SchedulerRecvSkipper: TARGET_VERIFY 1)
    n, s = batch.n, float(batch.context_sum())
    sw = float(batch.window_sum())
    q = n * (k + 1)  # query tokens of the verification pass
    kv_read = (k + 1) * s + n * k * (k + 1) / 2
    kv_read_w = (k + 1) * sw + n * k * (k + 1) / 2 if not rep.window else (k + 1) * sw
    verify = rep.step_fn(
        one=1.0,
        tokens=q,
        sampled=q,
        prefill_tokens=0.0,
        decode_tokens=q,
        prefill_pairs=0.0,
        prefill_pairs_win=0.0,
        prefill_kv=0.0,
        prefill_kv_win=0.0,
        decode_kv=kv_read,
        decode_kv_win=kv_read_w,
        seqs=n,
        prefill_seqs=0.0,
    )
    below = batch.n_below if rep.window else n
    if spec.draft_table is not None:
        draft = DecodeSpan(spec.draft_table, n, s, sw, n, below).total(k)
    else:
        draft = spec.config.draft_cost * k * DecodeSpan(rep.decode_table, n, s, sw, n, n).step(0)
    dt = verify + draft + rep.swap_cost
    rep.swap_cost = 0.0
    m = 1 + spec.accepted()
    grown = batch.growth_over(m)
    blocks.settle(grown)
    start, end = rep.t, rep.t + dt
    rep.last_step_start = start
    if rep.front_end is not None:
        rep.stream_delay = rep.front_end.emit(start, end, n * m)
    decode_gaps(rep, end)
    batch.advance(m, grown)
    batch.last_decode = end
    rep.t = end
    rep.busy += dt
    if rep.rec.tracing:
        rep.rec.step(StepRecord(rep.rid, start, dt, "decode", 0, n))
    else:
        rep.rec.count(1, dt, n)
    rep.complete(end)
    rep.next_sample = rep.rec.sample(rep.rid, end, blocks.kv.used, batch.n, len(rep.waiting), len(rep.prefilling))


def _swaps_in_next_step(rep: Replica) -> bool:
    """Whether the swapped-out request at the head of the queue fits back (``Replica._swap_in``) before the
    next decode step but one: blocks only shrink inside a span (by the second step's growth), so that is the
    last chance before the next completion."""
    if rep.num_seqs >= rep.max_seqs:
        return False
    blocks, batch = rep.blocks, rep.decoding
    room = blocks.count(int(rep.table.computed[rep.waiting[0]]) - 1) + blocks.rule.step_units + blocks.state_blocks
    return room <= blocks.kv.free + blocks.kv.evictable - (batch.growth_over(2) - batch.growth_over(1))


def _joins_from_inbox_next_step(rep: Replica) -> bool:
    """Whether the head of a disaggregated decode pool's inbox fits (``Replica._take_inbox``) before the next
    decode step: the loop retries it before every step, ahead of the next step's growth, and a preemption may
    have freed blocks since its last try."""
    if rep.num_seqs >= rep.max_seqs:
        return False
    i, blocks, tb = rep.inbox[0], rep.blocks, rep.table
    need = blocks.count(int(tb.prompt[i] + tb.generated[i]) - 1) + blocks.state_need(i)
    return need <= blocks.kv.free + blocks.kv.evictable


def _steps_with_blocks(rep: Replica, k: int) -> int:
    """Most steps (>= 1) whose block growth fits in what is available now (frees not counted)."""
    batch, avail = rep.decoding, rep.blocks.kv.available + rep.blocks.reserved
    lo, hi = 1, k
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if batch.growth_over(mid) <= avail:
            lo = mid
        else:
            hi = mid - 1
    return lo
