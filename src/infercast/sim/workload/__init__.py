"""Workloads for the serving simulator: who arrives when, with how many prompt and output tokens.

A :class:`Workload` is a handful of NumPy arrays (one entry per request), so a million requests cost a few
megabytes and build in a fraction of a second. Builders:

* :func:`synthetic` — lengths from :func:`lengths` distributions, arrivals from :func:`arrivals`
  (Poisson / gamma-bursty / constant / offline), or a closed loop of ``concurrency`` clients;
* :func:`load_trace_csv`, :func:`load_mooncake_jsonl`, :func:`load_trace`, :func:`builtin_trace` — replay of
  real traces (Azure LLM inference 2023, Mooncake/FAST'25);
* :func:`with_system_prompts`, :func:`multi_turn` (:class:`MultiTurnSpec`) — shared prompt prefixes, expressed as
  block-hash ids;
* :func:`retime` — the same requests under another arrival process;
* :class:`WorkloadSpec` — the workload options of ``simulate``, validated together and built in one place.

Modules: ``core`` (:class:`Workload`, hash helpers), ``lengths``, ``arrivals``, ``synthetic``, ``traces``,
``prefixes``, ``spec``.

Block hashes. ``block_hashes[i]`` lists ids of the consecutive ``hash_block_size``-token blocks at the start
of request *i*'s prompt (the last one may be a partial block, as in Mooncake traces; consumers count only
full blocks). Two requests share a cached prefix of *b* blocks iff their first *b* ids are equal. Every
builder here also keeps ids *prefix-closed*: an id at position *j* determines the whole prefix before it
(like vLLM's chained block hashes), so a cache keyed by the id alone is correct. The id arrays may be
read-only views into a shared buffer; copy before mutating.
"""

from infercast.sim.workload.arrivals import ARRIVAL_KINDS, arrivals
from infercast.sim.workload.core import DEFAULT_HASH_BLOCK_SIZE, RngLike, Workload, from_frame
from infercast.sim.workload.lengths import (
    BENCHMARK_RANGE_RATIO,
    DISTRIBUTIONS,
    LengthLike,
    LengthSpec,
    length_range,
    lengths,
)
from infercast.sim.workload.prefixes import MultiTurnSpec, multi_turn, with_system_prompts
from infercast.sim.workload.spec import WORKLOAD_FIELDS, WorkloadSpec
from infercast.sim.workload.synthetic import PrefixSpec, retime, synthetic
from infercast.sim.workload.traces import (
    BUILTIN_TRACES,
    MOONCAKE_BLOCK_SIZE,
    TRACE_SUFFIXES,
    builtin_trace,
    load_mooncake_jsonl,
    load_trace,
    load_trace_csv,
)

__all__ = [
    "ARRIVAL_KINDS",
    "BENCHMARK_RANGE_RATIO",
    "BUILTIN_TRACES",
    "DEFAULT_HASH_BLOCK_SIZE",
    "DISTRIBUTIONS",
    "MOONCAKE_BLOCK_SIZE",
    "TRACE_SUFFIXES",
    "WORKLOAD_FIELDS",
    "LengthLike",
    "LengthSpec",
    "MultiTurnSpec",
    "PrefixSpec",
    "RngLike",
    "Workload",
    "WorkloadSpec",
    "arrivals",
    "builtin_trace",
    "from_frame",
    "length_range",
    "lengths",
    "load_mooncake_jsonl",
    "load_trace",
    "load_trace_csv",
    "multi_turn",
    "retime",
    "synthetic",
    "with_system_prompts",
]
