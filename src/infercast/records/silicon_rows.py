"""Closed-loop benchmark rows in aiconfigurator's silicon format, read as infercast measurement records.

The format (one row per benchmark point; ``../shared/reference/closed_loop_h100.csv`` is a file of it, cut from
``systems/silicon_sample.csv`` in the aiconfigurator-core wheel): ``id, engine, engine_version, model, gpu,
precision, tp, input_len, output_len, concurrency, ttft_ms_mean, tpot_ms_mean``. ``ep`` and ``attention_dp`` are
optional: else the id's ``_epN_`` / ``_dpN_``, and experts spread wider than tp read as attention data
parallelism (:func:`layout_of`); concurrency counts all clients of the replica. ``model`` is a HuggingFace repo
id, mapped onto the catalog (:func:`catalog_model_id`: exact source repo, else the name without checkpoint
suffixes such as -Instruct, -FP8 or a date); ``gpu`` a system name such as ``h100-sxm``, ``h200_sxm`` or
``b200-sxm`` (:func:`catalog_gpu_id`). ``infercast validate --data FILE`` and ``calibrate --data FILE`` read such
a file directly (:func:`infercast.records.readers.read_records` recognises it by its ``ttft_ms_mean`` column), and
the wheel's own ``silicon_sample.csv`` too (its aggregated rows with a recorded concurrency: :func:`from_wheel_row`);
``scripts/import_closed_loop.py`` writes the committed calibration records.

Each row (mean TTFT and mean TPOT of one closed-loop benchmark point) becomes two records,
``serving_ttft`` and ``serving_tpot`` with statistic mean (concurrency C, num_prompts 10 x C, input_len /
output_len = the top L of the length range; see infercast.calibrate.serving). Interpretation choices, stated in
every row's notes:
- the engine version goes into the notes; the record's engine is the profile it calibrates (vllm, sglang,
  trtllm: their current major versions, named in the fitted profiles' provenance);
- The dated sweeps' fp8 rows run an 8-bit KV cache on every engine: a 16-bit one cannot hold what they
  measured (Llama-3.1-70B fp8 on one B200, vLLM, 64 clients at 1k/8k: 0.38 s mean TTFT, where a 16-bit pool
  holds 36 of the 64 and the rest would queue for minutes; MiniMax-M2.5 fp8 on vLLM 0.19, 512 clients at 8k/1k:
  3.3 s where a 16-bit pool holds 339 of 512). Read so, their TTFT MAPE falls from 56.5 to 51.3 %. Both scripts
  set ``--kv-cache-dtype fp8``; a vLLM script that sets none runs the checkpoint's ('auto', vLLM's CacheConfig
  default: the model's dtype unless its quantisation config names a KV scheme), 16-bit for the FP8 releases
  here (MiniMax-M2.5 fp8 on H100, TP 4, 8k/1k: ~32 of 64 clients in flight by the rows' own means, which a
  16-bit pool of 15 GB holds and an 8-bit one doubles). SGLang's scripts that set none keep the 8-bit reading
  (the checkpoint's would put SGLang DeepSeek-R1 H200 TPOT further over; docs/accuracy-notes.md).
- aiconfigurator's fp8 rows (Qwen3-32B FP8 checkpoints) keep a 16-bit KV cache on vLLM and SGLang (kv-cache dtype
  'auto' follows the checkpoint, which quantises weights and activations only) and an 8-bit one on TensorRT-LLM. The
  TensorRT-LLM rows cannot have run with a 16-bit cache: at TP 1, 64 clients, 4k prompts, the running requests
  hold 64 x 4.2k tokens = 66 GiB of 16-bit KV, against the ~39 GiB KV pool beside 32 GiB of FP8 weights (0.9 of the
  free memory), yet mean TTFT is 1.6 s (queueing for KV would add ~10 s: the 16-bit reading over-predicts
  those nine TP 1-2 points 2-6x); an 8-bit cache (33 GiB) holds them, as ModelOpt FP8 checkpoints'
  kv_cache_quant_algo FP8 sets. An interpretation, stated in every row. nvfp4 rows (none in the H100 file) get
  an 8-bit cache on every engine: their checkpoints are TensorRT Model Optimizer's, which quantises the KV cache
  to FP8 by default (:data:`FP8_KV_SCHEMES`); so do fp8 rows of NVIDIA's own checkpoints (:data:`MODELOPT_ORGS`:
  vLLM 0.12's H200 Llama-3.1-8B runs of nvidia/Llama-3.1-8B-Instruct-FP8: at 128 clients and 4k prompts they
  measured 22 ms TPOT, which with a 16-bit cache would need 94 % of the H200's peak bandwidth in every decode
  step, beside the prompts' work at the FP8 peak).
- Engine releases: a vLLM row of release 0.14 or later (or a nightly build) is read with the ``vllm-0.14`` preset,
  whose scheduler runs asynchronously (on by default since vLLM 0.14: its per-step CPU work overlaps the GPU
  step); earlier releases and rows without a version keep ``vllm`` (:data:`RELEASE_PRESETS`). The calibration
  rows are vLLM 0.12.
- Lengths: fixed (min_len_ratio 1) for aiconfigurator's own runs; the wheel's dated sweep tables
  (``source_file=2026-04-06.csv``, the ``-gap-analysis.csv`` files and the ``db-dump/`` rows of the same sweeps'
  results database: 1k/1k, 1k/8k, 8k/1k) draw them uniformly in
  [0.8 L, L], as the vLLM-style client of such sweeps does (:data:`SWEEP_LENGTH_RATIO`). Equal lengths keep the
  clients in lockstep waves that queue each prompt behind the others; the sweeps' measured TTFT at 4 clients is
  one prompt's prefill, which only drifting clients give. aiconfigurator's own runs' benchmark client is NVIDIA's
  (genai-perf / aiperf: ``--isl L --isl-stddev 0 --osl L --osl-stddev 0`` with
  ``ignore_eos`` and min_tokens = max_tokens; aiconfigurator's generator/config/backend_templates/benchmark/
  bench_run.sh.j2 and Dynamo's benchmark scripts), not ``vllm bench serve`` with a range ratio. The SGLang
  rows' own signature says so too: mean TTFT does not depend on the output length (TP 2, 1k prompts, 16
  clients: 841 / 806 / 844 ms at 128 / 256 / 512 output tokens) and equals the prefill time of all C prompts
  (TTFT x tp / (C x L) = 56-120 us per token, against 12 us for the vLLM rows), i.e. the clients stayed
  synchronised in waves, which only equal lengths sustain. How far equal-length clients drift apart is the
  engines' varying per-request latency (``request_jitter_s``, fitted with the load fit). Where the data rule the
  waves out, they are not assumed (:func:`drifting_runs`): a run set of an engine that prefills prompts apart from
  the decodes (SGLang) whose mean TTFT at C clients is somewhere below (C + 1) / 2 prompts' linear-layer FLOPs at
  the datasheet peak (:func:`lockstep_ttft_bound`, a wave's least mean TTFT) is read with lengths in [0.8 L, L],
  the simulator's drifting clients. One set is: SGLang 0.5.6 Llama-3.1-8B on H200 (17 of its 46 rows below the
  bound, down to 0.45 of it); SGLang 0.5.1 and 0.5.8 on H100 stay at 1.6x the bound or more.
- Dated sweep rows with a launch script: the settings of the SemiAnalysis InferenceMAX script version in effect on
  the row's measured date (:mod:`infercast.records.sweep_launches`, ``records/data/sweep_launches.yaml``: path @
  commit per version, rules on clients, lengths and TP): step budget (SGLang: its prefill batch cap), sequence
  limit, memory fraction, SGLang's scheduler-recv-interval, TensorRT-LLM's batch waiting
  (``batch_wait_timeout_iters`` / ``batch_wait_max_tokens_ratio``), attention-DP balancing
  (``attention_dp_config``) and CUDA graphs (``cuda_graph_config.max_batch_size``, and the piecewise graphs of
  ``torch_compile_config`` that also cover prompt steps), an 8-bit KV cache where the script sets one, and the
  ``vllm-0.14`` preset where its config turns async scheduling on. A setting the script leaves out is the engine
  preset's. They replace the engine bullets below; the notes say "launch: <source>". Rows of families or dates
  without a script version (GB200, B300 before April 2026, the undated gap-analysis tables) and the points only
  a family's MTP config ran then keep those bullets' readings.
- vLLM rows: a step budget of C + L + 500 tokens (``max_num_batched_tokens``), the rule of the TensorRT-LLM rows
  below: aiconfigurator's generator gives aggregated vLLM workers ``max_num_tokens`` = max_batch_size + isl + a
  margin (generator/rule_plugin/vllm.rule and benchmark/vllm.rule, + 1500 in both now; its backend mapping passes
  it as ``--max-num-batched-tokens``), so 1k prompts at 8 clients run with 1532 tokens per step and 4k prompts
  at 128 clients with 4724. The margin is chosen on the data, as for TensorRT-LLM: at the priors' per-request
  times (5 + 5 ms), + 500 gives a median TTFT error of 7.1 % against 10.5, 7.3, 13.0 and 13.9 % for + 0, + 250,
  + 1000 and + 1500, and 14.3 % for the reading it replaces (13.0 % at that reading's own fitted times): a fixed
  2048 tokens (vLLM's SchedulerConfig default), which
  matched the light-load waves (at 8 clients mean TTFT grows with the prompt 2.8-3.4x as fast as the kernel-level
  prefill time: benchmarks/ttft_signatures.py) but not 4k prompts at 128 clients, TP 4 and 8, whose measured
  TPOT (99-159 ms) needs ~4k prompt tokens in every step and whose TTFT (0.9-1.4 s) no queue behind 2048-token
  steps allows (simulated: 7.7-11.8 s). An interpretation, stated in every row.
- TensorRT-LLM rows: a step budget of C + L + 500 tokens (``max_num_batched_tokens``), whole prompts beside
  the decodes (the trtllm preset's in-flight scheduler: enable_chunked_prefill off), so a step holds one prompt
  (1k, 2k or 4k) beside the decodes. aiconfigurator's generator sets ``max_batch_size`` = the batch size (the
  file's C) and ``max_num_tokens`` = max_batch_size + isl + a margin for aggregated TensorRT-LLM workers; the
  margin has changed between its releases: + 1500 in both rules the repository holds now
  (generator/rule_plugin/trtllm.rule, rounded up to whole KV blocks of 32 tokens, and benchmark/trtllm.rule;
  either would fit two 1k prompts in a step), + 500 in earlier releases' trtllm.rule (quoted in public write-ups
  of the generator). The records do not round up to whole blocks: at most 31 tokens, never room for a second
  prompt at these lengths.
  The runs (TensorRT-LLM 1.0.0rc3) do not record which, so the data decide: with + 500 the 1k rows at 8-32 clients
  come out 8-32 % too slow at TP 2-4 (35-60 % with + 1500), the Qwen3-32B and Llama-3.1-8B rows prefer
  the same per-request overhead (20 ms each in a grid), and TensorRT-LLM's fitted TTFT median falls from 11.4 %
  to 8.5 % (benchmarks/accuracy.py). An interpretation, stated in every row.
- SGLang rows: prefill batches of up to 16,384 tokens (``max_num_batched_tokens``; the sglang preset prefills
  without the decodes, ``enable_mixed_chunk`` off), SGLang's ``max_prefill_tokens`` default, not the 8,192-token
  chunk its memory rule gives an H100 (``chunked_prefill_size``, which also caps a batch). The rows' own signature
  says so: mean TTFT at 16 clients is about the prefill of all 16 prompts when they total 16k tokens (TP 2, 1k
  prompts: 841 ms, where two 8,192-token batches give a mean of 1.5 batches, about 640 ms), and 2.5 batches of
  16k at 4k prompts. Read with 8,192-token batches, the load fit put SGLang's fixed per-request time at 150 ms,
  the largest value its grid tries, which then stood in every SGLang TTFT (a lone request's included); read
  with 16,384 at the priors' per-request times (5 + 5 ms) the SGLang points' median TTFT error is 8.1 % (p90
  19.6 %) against 9.4 % (35.4 %) and TPOT 3.3 % against 4.3 %, flat from 2 to 20 ms
  (``benchmarks/alternative_readings.py sglang-chunk-8192``); refitted, 33 + 1.5 ms, off the grid's edge. Why
  the runs' batches were not split at 8,192 (chunked prefill off, or a launch that set its size) is not
  recorded, so the sglang preset keeps SGLang's documented chunk. Chosen on the data, so an interpretation,
  stated in every row.
- TensorRT-LLM rows: a KV cache of 0.80 of the memory free after loading (``gpu_memory_utilization``, read by the
  trtllm preset as ``free_gpu_memory_fraction``): aiconfigurator's engine template for these runs
  (generator/config/backend_templates/trtllm/extra_engine_args.1.0.0rc3.yaml.j2: ``free_gpu_memory_fraction``
  default 0.80; TensorRT-LLM's own default is 0.9). With the in-flight scheduler's whole-request reservation
  (TensorRT-LLM's ``GUARANTEED_NO_EVICT``) that pool sets where the Qwen3-32B TP 1 rows start queueing: it holds
  128 x (2048 + 128) and 64 x (4096 + 256) reserved tokens (281k) but not 128 x (2048 + 256) or 64 x (4096 + 512)
  (295k), and the data jump exactly there (mean TTFT 0.8 -> 2.5 s and 1.6 -> 3.8 s).
- TensorRT-LLM Llama-3.1-8B rows: one sequence slot fewer than clients (``max_num_seqs`` = C - 1). Their mean
  TTFT grows with the output length by about D / C, D being one request's decode time (TP 1, 1k prompts,
  8 clients: 191 / 318 / 550 ms at 128 / 256 / 512 output tokens, D / 8 = 127 / 240 / 474 ms), at 8-64
  clients and every TP: in a closed loop that is one client always waiting for a slot. The cause is not known
  (a pool of max_batch_size = C slots with one held by an internal request, such as a CUDA-graph padding
  request, would give it); the Qwen3-32B rows of the same engine version show no such wait (their TTFT does
  not grow with the output length). Chosen on the data (fitted
  TTFT median 36 % -> 16 % on these rows; the Qwen3-32B rows, sharing the refitted per-request overhead, 16 % ->
  22 %), so an interpretation, stated in every row.
- Left out: every row of a dated sweep that writes GPU totals as TP (:func:`gpu_total_sweeps`: the GB200
  DeepSeek-R1 table of 2025-11 names TP 12-72 for a 128-head model; its TP 32 and 64 rows are multi-worker
  deployments too), every row of a dated sweep's client count at which a run held fewer than a quarter of its
  clients in flight with room for all (:func:`client_capped_sweeps`: vLLM gpt-oss-120b on H100 at 512 clients,
  ~100 in flight at every TP and length), and each measurement's repeats (:func:`repeats`).
- Left out: the seven rows whose benchmark concurrency was not recorded (their source id reads ``_c_`` with no
  number, and the wheel's source column has no ``silicon_concurrency``, unlike every other H100 row: Dynamo
  0.8 runs of TensorRT-LLM 1.2 and vLLM 0.12, 4000/1000 tokens). The file's concurrency for them is the
  deployment's batch size, and their own figures say the clients were fewer: the vLLM TP 1 and TP 2 rows
  measured TPOT 16.9 and 11.6 ms where a decode-only batch of 24 and 48 such sequences takes 27 and 23 ms
  (infercast.predict; 23 and 18 ms even with an 8-bit cache), and the TensorRT-LLM rows measured the decode-only
  batch's TPOT (22.4 / 19.2 / 18.5 / 21.2 ms against 24.2 / 19.0 / 17.9 / 19.2 ms predicted) with no room for
  the C prefills of 4000 tokens that each request's 1000 decode steps overlap in a closed loop of C clients
  (the closed-loop simulation at C = batch size over-predicts their TPOT by 40-57 %, every other TensorRT-LLM
  row by 5 % median). Read at C = batch size they were 14 of the 1,068 records, among them the 3rd and 4th
  worst TTFT and five of the nine worst TPOT records (held-out error, benchmarks/accuracy.csv before the change).
"""

from __future__ import annotations

import csv
import re
import warnings
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from infercast.errors import InfercastError, require_positive_int, unknown_choice
from infercast.records.record import CLOSED_LOOP_PROMPTS_PER_CLIENT, Record, check_record
from infercast.records.sweep_launches import CONFIG_MODELS, Launch, SweepRow, launch_for, mtp_acceptance
from infercast.specs.catalog import (
    aliases,
    get_hardware,
    get_model,
    hardware_catalog,
    model_catalog,
    model_id_for_repo,
)
from infercast.specs.engine import get_engine
from infercast.specs.precision import get_scheme

REQUIRED = (
    "engine",
    "model",
    "gpu",
    "precision",
    "tp",
    "input_len",
    "output_len",
    "concurrency",
    "ttft_ms_mean",
    "tpot_ms_mean",
)
"""Columns a closed-loop row needs (``id``, ``engine_version``, ``ep`` and ``attention_dp`` are optional)."""
BUDGET_MARGIN = {"trtllm": 500, "vllm": 500}
"""Engines whose step budget was C + L + this many tokens (aiconfigurator's benchmark rule; module docstring)."""
PREFILL_BATCH = {"sglang": 16384}
"""Engines whose prefill batches (prompts prefilled together, decodes aside) held up to this many tokens rather
than the preset's chunk (SGLang's ``max_prefill_tokens`` default; read from the data: module docstring)."""
KV_FRACTION = {"trtllm": 0.80}
"""Engines whose runs gave the KV cache this memory fraction rather than the preset's (see the docstring)."""
FP8_KV_ENGINES = {"trtllm"}
"""Engines whose fp8 rows ran with an 8-bit KV cache (see the module docstring)."""
FP8_KV_SCHEMES = {"nvfp4"}
"""Weight schemes whose checkpoints carry an 8-bit KV cache on every engine: NVFP4 checkpoints come from NVIDIA's
TensorRT Model Optimizer, whose PTQ script quantises the KV cache to FP8 unless told otherwise
(examples/llm_ptq/hf_ptq.py, ``--kv_cache_qformat`` default ``fp8``, written to hf_quant_config.json as
``kv_cache_quant_algo``), and the engines' 'auto' KV dtype follows the checkpoint."""
MODELOPT_ORGS = ("nvidia/",)
"""Hugging Face organisations whose FP8 checkpoints come from TensorRT Model Optimizer too, with the same
``kv_cache_quant_algo`` FP8 default as its NVFP4 ones (:data:`FP8_KV_SCHEMES`); other FP8 checkpoints (Qwen's,
MiniMax's, DeepSeek's) quantise the weights only."""
SLOTS_BELOW_CLIENTS = {("trtllm", "meta-llama/Llama-3.1-8B-Instruct"): 1}
"""(engine, model) runs whose engine held this many fewer sequence slots than clients (see the docstring)."""
RELEASE_PRESETS = {"vllm": ((0, 14, "vllm-0.14"),), "trtllm": ((1, 1, "trtllm-1.1"),)}
"""Engine presets of later releases, by the first (major, minor) release they describe: vLLM's scheduler runs
asynchronously by default from 0.14 (``specs/data/engines.yaml``, ``vllm-0.14``); TensorRT-LLM 1.1 and later
stream tokens faster than 1.0's fitted API server allows (``trtllm-1.1``). A row's engine is the latest
preset its version reaches; a nightly build counts as the latest release, a row without a version as the base
preset (the calibration's vLLM 0.12)."""
SWEEP_RELEASE = {"trtllm": "trtllm-1.1"}
"""Engine presets of the dated sweeps' rows that record no version: their TensorRT-LLM server streamed faster than
1.0's fitted API server allows (gpt-oss-120b on 8 B200, 64 clients at 4.3 ms TPOT: 14.9k tokens/s against its
10k cap), and they were measured 2025-10-29 to 2025-12-02, beside the file's 1.1 release-candidate rows."""
SOURCE = "aiconfigurator-core 0.12.0 wheel (PyPI, Apache-2.0) systems/silicon_sample.csv, id {id}"
NOTES = (
    "{engine} {version}{preset}; closed loop of {c} clients, 10x{c} prompts, {lengths}, mean over all requests incl. "
    "ramp-up; KV cache {kv}{fraction}{budget}"
)


def release_preset(engine: str, version: str) -> str:
    """The engine preset of a release (:data:`RELEASE_PRESETS`): ``vllm`` 0.19.0 -> ``vllm-0.14``."""
    version = version.strip().lower()
    releases = RELEASE_PRESETS.get(engine, ())
    if not releases or not version:
        return engine
    if version.startswith("nightly"):
        return releases[-1][2]
    try:
        major_minor = Version(version).release[:2]  # a release candidate of 0.14 counts as 0.14
    except InvalidVersion:
        return engine
    reached = [preset for major, minor, preset in releases if major_minor >= (major, minor)]
    return reached[-1] if reached else engine


def catalog_model_id(repo: str) -> str:
    """The catalog id of a row's HuggingFace repo id (:func:`infercast.specs.catalog.model_id_for_repo`); a model
    outside the catalog is refused naming it and the catalog's ids."""
    found = model_id_for_repo(repo)
    if found is None:
        raise unknown_choice("model", repo, list(model_catalog()))
    return found


def catalog_gpu_id(name: str) -> str:
    """The hardware catalog id of a benchmark system name: ``h100_sxm``/``h100-sxm`` -> ``h100-sxm``, ``h200_sxm``
    -> ``h200``, ``b200-sxm`` -> ``b200`` (the catalog names the SXM part without the form factor where no
    other form exists), ``a100_sxm`` -> ``a100-80gb``."""
    catalog, alias = hardware_catalog(), aliases("gpu")
    key = name.strip().lower().replace("_", "-")
    for candidate in (key, key.removesuffix("-sxm"), key.removesuffix("-sxm").removesuffix("-nvl")):
        candidate = alias.get(candidate, candidate)
        if candidate in catalog:
            return candidate
    raise unknown_choice("gpu", name, list(catalog))


def row_precision(precision: str, model: str) -> str:
    """The weight scheme of a row: its own name, or the model's release format where that names the row's format
    for the routed experts only (``mxfp4`` on gpt-oss is ``mxfp4-moe``), or where a bare ``fp4`` row runs a model
    released in a 4-bit float format: the checkpoint named is that release (gpt-oss's MXFP4 experts, run as such
    on Hopper too, where there is no NVFP4 to quantise to), not an NVFP4 re-quantisation."""
    key = precision.strip().lower().replace("_", "-")
    default = get_model(model).default_precision
    if default.startswith(key + "-") or (key == "fp4" and "fp4" in default):
        return default
    return get_scheme(key).name


def layout_of(row: dict[str, str]) -> tuple[int, int, int]:
    """(tp, ep, attention_dp) of a row. ``ep``: the column, else the id's ``_epN_`` (``_epnone_``: 1).
    ``attention_dp``: an ``attention_dp`` or ``dp`` column, else the id's ``_dpN_``, else ep / tp where the experts
    span more GPUs than one attention copy: aiconfigurator's layouts put tp x attention_dp GPUs under ep-way
    experts (moe_tp x moe_ep = tp x dp), so tp 1 with ep 8 is eight attention copies."""
    tp = require_positive_int("tp", int(row["tp"]))
    ep = _given(row, ("ep",), r"_ep(\d+)_")
    ep = 1 if ep is None else require_positive_int("ep", ep)
    dp = _given(row, ("attention_dp", "dp"), r"_dp(\d+)_")
    if dp is None:
        dp = ep // tp if ep > tp and ep % tp == 0 else 1
    return tp, ep, require_positive_int("attention_dp", dp)


def _given(row: dict[str, str], columns: tuple[str, ...], id_pattern: str) -> int | None:
    """The first non-empty of ``columns``, else the number the id's pattern captures, else None."""
    for column in columns:
        if (row.get(column) or "").strip():
            return int(row[column])
    found = re.search(id_pattern, row.get("id") or "")
    return int(found.group(1)) if found else None


def step_budget(row: dict[str, str]) -> int:
    """The run's step budget in tokens (0: the preset's; see the module docstring)."""
    engine = row["engine"]
    if engine in BUDGET_MARGIN:
        return int(row["concurrency"]) + int(row["input_len"]) + BUDGET_MARGIN[engine]
    return PREFILL_BATCH.get(engine, 0)


def concurrency_recorded(row: dict[str, str]) -> bool:
    """Whether the source id names the benchmark's concurrency (``..._c16_...``; see the module docstring)."""
    return "_c_" not in (row.get("id") or "")


def convert(row: dict[str, str], origin: str = "") -> list[Record]:
    """The mean ``serving_ttft`` and ``serving_tpot`` records (closed loop of C clients, 10 x C prompts) of one
    row."""
    engine = row["engine"].strip().lower()
    row = {**row, "engine": engine}
    model = catalog_model_id(row["model"])
    held = SLOTS_BELOW_CLIENTS.get((engine, row["model"]), 0)
    ratio = float(row.get("min_len_ratio") or 1.0)
    sweep = row.get(SWEEP_MARK) == "1"  # a dated sweep's row (from_wheel_row), not a length range alone
    preset = release_preset(engine, row.get("engine_version") or "")
    if sweep and not (row.get("engine_version") or "").strip():
        preset = SWEEP_RELEASE.get(engine, preset)
    precision = row_precision(row["precision"], model)
    modelopt = precision == "fp8" and row["model"].strip().lower().startswith(MODELOPT_ORGS)
    fp8_kv = precision in FP8_KV_SCHEMES or modelopt or (precision == "fp8" and (engine in FP8_KV_ENGINES or sweep))
    c = int(row["concurrency"])
    tp, ep, attention_dp = layout_of(row)
    launch = sweep_launch(row, (tp, ep, attention_dp)) if sweep else None
    if launch is not None and launch.expert_parallel and "parallel" in LAUNCH_APPLIED and row.get("sweep_tp"):
        row, (tp, ep, attention_dp) = _as_launched_layout(row, launch.expert_parallel, launch.dp_attention)
        c = int(row["concurrency"])
        launch = sweep_launch(row, (tp, ep, attention_dp))
    settings = _engine_settings(row, held, launch, model)
    if launch is not None and "kv_cache" in LAUNCH_APPLIED and launch.kv_cache == "fp8":
        fp8_kv = True
    elif launch is not None and launch.kv_cache in ("", "auto") and (engine == "vllm" or "kv_auto" in LAUNCH_APPLIED):
        fp8_kv = precision in FP8_KV_SCHEMES or modelopt  # the checkpoint's: 8-bit for ModelOpt's
    if launch is not None and "async_scheduling" in LAUNCH_APPLIED and launch.async_scheduling and engine == "vllm":
        preset = RELEASE_PRESETS["vllm"][-1][2]
    kv = "fp8" if fp8_kv else "bf16"
    common: dict[str, Any] = dict(
        model=model,
        gpu=catalog_gpu_id(row["gpu"]),
        engine=preset,
        precision=precision,
        kv_precision=kv,
        tp=tp,
        ep=ep,
        attention_dp=attention_dp,
        concurrency=c,
        num_prompts=CLOSED_LOOP_PROMPTS_PER_CLIENT * c,
        statistic="mean",
        input_len=int(row["input_len"]),
        output_len=int(row["output_len"]),
        unit="ms",
        source=SOURCE.format(id=row.get("id") or "(none)"),
        min_len_ratio=ratio,
        **settings,
        origin=origin,
        notes=_notes(row, preset, kv, precision, settings, held, launch),
    )
    records = [
        Record(kind="serving_ttft", value=float(row["ttft_ms_mean"]), **common),
        Record(kind="serving_tpot", value=float(row["tpot_ms_mean"]), **common),
    ]
    for rec in records:
        check_record(rec)
    return records


MOE_KERNEL_NOTES = {
    "marlin": "MXFP4 experts through Marlin (VLLM_MXFP4_USE_MARLIN=1)",
    "triton": "FP8 experts through vLLM's Triton kernel (VLLM_USE_FLASHINFER_MOE_FP8=0, VLLM_MOE_USE_DEEP_GEMM=0)",
    "trtllm triton": "MXFP4 experts through OpenAI's Triton kernels (moe_config backend TRITON)",
    "trtllm trtllm": "MoE layers through the trtllm-gen kernels (moe_config backend TRTLLM)",
    "trtllm deepgemm": "MoE layers through DeepGEMM (moe_config backend DEEPGEMM)",
}
"""How a row's notes name the fused-MoE kernel its launch script picked (``Launch.moe_backend``; an engine's own
wording under '<engine> <backend>')."""

LAUNCH_APPLIED = frozenset(
    {
        "budget",
        "max_seqs",
        "memory_fraction",
        "recv_interval",
        "batch_wait",
        "adp_balance",
        "kv_cache",
        "async_scheduling",
        "spec_tokens",
        "parallel",
        "moe_backend",
        "cuda_graphs",
    }
)
"""The launch script settings (:mod:`infercast.records.sweep_launches`) a matched dated sweep row is read with.
``kv_auto`` (off): a script of another engine than vLLM that leaves the KV cache dtype at 'auto' read as the
checkpoint's (16-bit for FP8 checkpoints) rather than the dated sweeps' 8-bit reading above; vLLM's are always."""


def _as_launched_layout(
    row: dict[str, str], expert_parallel: str, dp_attention: bool
) -> tuple[dict[str, str], tuple[int, int, int]]:
    """The row (all its clients on one server) and its (tp, ep, attention_dp) as a vLLM script that decides the
    layout lays it out (``expert_parallel``, :data:`~infercast.records.sweep_launches.EXPERT_PARALLEL`): TP over the
    config's GPUs, experts over all of them where the script passes ``--enable-expert-parallel``; with
    ``dp_attention``, TP 1 x data-parallel over those GPUs with expert parallelism."""
    gpus = int(row["sweep_tp"])
    whole = {**row, "concurrency": row["sweep_clients"]}
    if dp_attention:
        return whole, (1, gpus, gpus)
    flagged = expert_parallel == "always" or (expert_parallel == "if-ep" and int(row["sweep_ep"]) > 1)
    return whole, (gpus, gpus if flagged else 1, 1)


def sweep_launch(row: dict[str, str], layout: tuple[int, int, int]) -> Launch | None:
    """The launch settings of a dated sweep row's script version on its measured date (None: no such version, or
    the row names no model or date)."""
    if not row.get("measured") or not row.get("sweep_model"):
        return None
    tp, ep, attention_dp = layout
    system = row["gpu"].strip().lower().replace("-", "_").removesuffix("_sxm")
    return launch_for(
        SweepRow(
            engine=row["engine"],
            model=row["sweep_model"],
            precision=row["precision"].strip().lower(),
            gpu=system,
            measured=row["measured"],
            clients=int(row["concurrency"]),
            input_len=int(row["input_len"]),
            output_len=int(row["output_len"]),
            tp=tp,
            ep=ep,
            attention_dp=attention_dp,
        )
    )


def _engine_settings(row: dict[str, str], held: int, launch: Launch | None, model: str) -> dict[str, Any]:
    """The record's engine limits: the reader's own (module docstring), each replaced by the launch script's where
    a dated sweep row has one (a setting the script leaves at the engine's default reads 0: the preset's); MTP drafts
    with ``model``'s fitted acceptance."""
    engine, c = row["engine"], int(row["concurrency"])
    out: dict[str, Any] = {
        "max_num_batched_tokens": step_budget(row),
        "max_num_seqs": c - held if held else 0,
        "gpu_memory_utilization": KV_FRACTION.get(engine, 0.0),
        "scheduler_recv_interval": 0,
        "batch_wait_iters": 0,
        "batch_wait_ratio": 0.0,
        "adp_balance_iters": 0,
        "spec_tokens": 0,
        "spec_acceptance": 0.0,
        "moe_backend": "",
        "cuda_graphs": "",
        "graph_max_tokens": 0,
    }
    if launch is None:
        return out
    applied = {
        "budget": ("max_num_batched_tokens", launch.budget),
        "max_seqs": ("max_num_seqs", launch.max_seqs),
        "memory_fraction": ("gpu_memory_utilization", launch.memory_fraction),
        "recv_interval": ("scheduler_recv_interval", launch.recv_interval),
    }
    for name, (field, value) in applied.items():
        if name in LAUNCH_APPLIED:
            out[field] = value
    if "batch_wait" in LAUNCH_APPLIED:
        out["batch_wait_iters"], out["batch_wait_ratio"] = launch.batch_wait_iters, launch.batch_wait_ratio
    if "adp_balance" in LAUNCH_APPLIED:
        out["adp_balance_iters"] = launch.adp_balance_iters
    if "spec_tokens" in LAUNCH_APPLIED and launch.spec_tokens:
        out["spec_tokens"], out["spec_acceptance"] = launch.spec_tokens, mtp_acceptance(model)
    if "moe_backend" in LAUNCH_APPLIED:
        out["moe_backend"] = launch.moe_backend
    if "cuda_graphs" in LAUNCH_APPLIED and (launch.piecewise_tokens or launch.graph_batch):
        piecewise = launch.piecewise_tokens > 0
        out["cuda_graphs"] = "tokens" if piecewise else "decode"
        out["graph_max_tokens"] = launch.piecewise_tokens if piecewise else launch.graph_batch
    return out


def _notes(
    row: dict[str, str],
    preset: str,
    kv: str,
    precision: str,
    settings: dict[str, Any],
    held: int,
    launch: Launch | None,
) -> str:
    """The row's notes: every reading it was converted with (module docstring)."""
    engine, c = row["engine"], int(row["concurrency"])
    budget, fraction = settings["max_num_batched_tokens"], settings["gpu_memory_utilization"]
    ratio = float(row.get("min_len_ratio") or 1.0)
    if launch is not None:
        applied = ", ".join(
            f"{name} {settings[field]}"
            for name, field in (
                ("step budget", "max_num_batched_tokens"),
                ("max sequences", "max_num_seqs"),
                ("memory fraction", "gpu_memory_utilization"),
                ("recv interval", "scheduler_recv_interval"),
                ("batch wait steps", "batch_wait_iters"),
                ("batch wait ratio", "batch_wait_ratio"),
                ("attention-DP balance steps", "adp_balance_iters"),
                ("MTP draft tokens", "spec_tokens"),
                ("MTP acceptance", "spec_acceptance"),
            )
            if settings[field]
        )
        graphs = {"decode": "decode CUDA graphs up to {} sequences", "tokens": "piecewise CUDA graphs up to {} tokens"}
        if settings["cuda_graphs"]:
            scope = graphs[settings["cuda_graphs"]].format(settings["graph_max_tokens"])
            applied += f"{', ' if applied else ''}{scope}"
        layout = {"none": "experts split tensor-parallel", "always": "expert parallel", "if-ep": "expert parallel"}
        if launch.expert_parallel and row.get("sweep_tp"):
            flagged = launch.expert_parallel != "if-ep" or int(row["sweep_ep"]) > 1
            applied += f"{', ' if applied else ''}" + (
                f"TP 1 x attention DP {row['sweep_tp']}, expert parallel"
                if launch.dp_attention
                else f"TP {row['sweep_tp']}, {layout[launch.expert_parallel] if flagged else layout['none']}"
            )
        picked = settings["moe_backend"]
        kernel = MOE_KERNEL_NOTES.get(f"{engine} {picked}", MOE_KERNEL_NOTES.get(picked))
        if kernel:
            applied += f"{', ' if applied else ''}{kernel}"
        extra = "".join(f"; {text}" for text in (launch.speculative, launch.note) if text)
        tail = f"; launch: {launch.source} ({applied or 'engine defaults'}{extra})"
    else:
        tail = (
            f"; {budget} tokens per step (aiconfigurator's generator rule C + L + {BUDGET_MARGIN[engine]})"
            if engine in BUDGET_MARGIN
            else f"; prefill batches of up to {budget} tokens (SGLang's max_prefill_tokens default, read from the data)"
            if budget
            else ""
        ) + (f"; {c - held} sequence slots (read from the data)" if held else "")
    return NOTES.format(
        engine=engine,
        version=row.get("engine_version") or "(version not given)",
        c=c,
        preset=f" (engine preset {preset})" if preset != engine else "",
        kv=(
            "16-bit (the checkpoint's: the launch script sets no 8-bit cache)"
            if kv != "fp8" and launch is not None
            else "16-bit"
            if kv != "fp8"
            else "8-bit (TensorRT Model Optimizer's checkpoint default)"
            if precision in FP8_KV_SCHEMES
            else "8-bit (the launch script's)"
            if launch is not None and launch.kv_cache == "fp8" and "kv_cache" in LAUNCH_APPLIED
            else "8-bit (read from the data)"
        ),
        fraction=(
            f" in {fraction:.2f} of free memory (aiconfigurator's engine template)"
            if fraction and launch is None
            else ""
        ),
        lengths=_lengths_note(row, ratio),
        budget=tail,
    )


def _lengths_note(row: dict[str, str], ratio: float) -> str:
    """How a row's notes state its prompt and output lengths."""
    if row.get(DRIFT_MARK) == "1":
        return (
            f"fixed lengths, clients drifting apart (read as lengths uniform in [{ratio:g} L, L]: some mean TTFT "
            "of this run set is below what a lockstep wave of C prompts takes at the datasheet peak)"
        )
    if ratio < 1:
        return f"lengths uniform in [{ratio:g} L, L] (the sweep's benchmark client)"
    return "fixed lengths (the benchmark client's)"


def is_closed_loop_table(columns: Iterable[str]) -> bool:
    """Whether a CSV header is this format's (it has the mean-TTFT column), or the wheel's own
    ``silicon_sample.csv`` layout (:func:`from_wheel_row`)."""
    names = set(columns)
    return "ttft_ms_mean" in names or WHEEL_TTFT in names


WHEEL_TTFT = "silicon_ttft_ms"
"""The mean-TTFT column of ``systems/silicon_sample.csv`` as the aiconfigurator-core wheel ships it."""


def wheel_concurrency(source: str) -> str | None:
    """The benchmark's concurrency from a wheel row's ``silicon_data_source`` (``...; silicon_concurrency=64; ...``;
    None where it is not recorded)."""
    for part in source.split(";"):
        key, _, value = part.strip().partition("=")
        if key == "silicon_concurrency" and value.strip().isdigit():
            return value.strip()
    return None


def repeats(rows: Iterable[dict[str, str]]) -> list[bool]:
    """For each of the wheel's rows, whether another row holds the same measurement and is kept instead: the same
    GPU, model architecture, precision and lengths with the same mean TTFT and TPOT to 0.01 ms. The wheel publishes
    some runs in two or three source files (a dated table, the gap analysis rounded to 0.01 ms, the database dump,
    which names DeepSeek-R1's runs DeepSeek-V3: the same architecture); each is one point, counted once. The copy
    kept is the first that names its measured date (its launch script is then known), a dated table's before the
    database dump's (the tables name the model the sweep ran), else the first."""
    rows = list(rows)
    kept: dict[tuple[object, ...], int] = {}
    for i, row in enumerate(rows):
        key = (
            *((row.get(c) or "").strip() for c in ("system", "precision", "isl", "osl")),
            _architecture(row.get("model_path") or ""),
            *(_centi(row.get(c)) for c in (WHEEL_TTFT, "silicon_tpot_ms")),
        )
        if key not in kept or _rank(row) > _rank(rows[kept[key]]):
            kept[key] = i
    chosen = set(kept.values())
    return [i not in chosen for i in range(len(rows))]


def _architecture(model_path: str) -> str:
    """What a row's model is as far as time goes: the catalog entry's shape without its names and sources (so a
    fine-tune of the same architecture is the same model), else the path as written."""
    model = model_id_for_repo(model_path) if model_path.strip() else None
    if model is None:
        return model_path.strip()
    return _shape_of(model)


@cache
def _shape_of(model: str) -> str:
    """A catalog model's shape fields, written out, without its id, name and sources."""
    shape = get_model(model).model_dump(exclude={"id", "name", "source", "published_source"})
    return repr(sorted(shape.items()))


def gpu_total_sweeps(rows: Iterable[dict[str, str]]) -> list[bool]:
    """For each of the wheel's rows, whether its sweep writes GPU totals in ``tp_size``: some row of the same
    source file, GPU, model, precision and measured day names a TP that does not divide the model's attention
    heads (GB200 DeepSeek-R1 of 2025-11: 12, 20, 28, 36, 52 GPUs, at 538-4,300 clients), which no aggregated
    layout of the model can be. Such a sweep's deployments span several workers (disaggregated); its rows whose
    number happens to divide the heads (32, 64) are those deployments too, so all are left out."""
    rows = list(rows)
    keys = [_sweep_family(row) for row in rows]
    totals = {key for key, row in zip(keys, rows, strict=True) if key and not _divides_heads(row)}
    return [key in totals for key in keys]


CAPPED_SHARE = 0.25
"""A run whose own means put fewer than this share of its clients in flight (Little's law) was capped outside the
engine where the engine had room for them all (:func:`client_capped_sweeps`)."""
ROOM_SHARE = 0.5
"""Room for all clients: their whole KV cache (prompt + output, 16-bit) and the weights fill under this share of
the server's GPU memory, so neither the KV pool nor any engine's memory fraction can hold clients back."""


def client_capped_sweeps(rows: Iterable[dict[str, str]]) -> list[bool]:
    """For each of the wheel's rows, whether its dated sweep ran at some client count with fewer requests in flight
    than the engine had room for: a row of the same sweep (:func:`_sweep_family`) and clients measured under
    :data:`CAPPED_SHARE` of them in flight (clients x decode time / (TTFT + decode time), from its mean TTFT and
    TPOT) where all of them fit (:data:`ROOM_SHARE`). Such a run measured the cap of its client or front end, not
    the engine: vLLM gpt-oss-120b on H100 at 512 clients (2025-12-05/08) held ~100 in flight at every TP and
    length, with ``--max-num-seqs 512``. All rows of that sweep and client count are left out."""
    rows = list(rows)
    keys = [_capped_key(row) for row in rows]
    capped = {key for key, row in zip(keys, rows, strict=True) if key and _capped(row)}
    return [key in capped for key in keys]


def drifting_runs(rows: Iterable[dict[str, str]]) -> list[bool]:
    """For each row (this module's format), whether its clients are read as drifting apart although its lengths
    were fixed: a row of aiconfigurator's own runs (not a dated sweep, whose lengths already vary) of an engine that
    prefills prompts apart from the decodes (SGLang: equal lengths keep such clients in lockstep waves), in a run
    set (engine, release, model, GPU, precision) where some row's mean TTFT is below :func:`lockstep_ttft_bound`.
    No lockstep wave can be that fast, so that set's client did not hold its clients together, whatever it did."""
    rows = list(rows)
    keys = [prefill_first_run_set(row) for row in rows]
    ruled_out = {key for key, row in zip(keys, rows, strict=True) if key and _below_lockstep(row)}
    return [key in ruled_out for key in keys]


def prefill_first_run_set(row: dict[str, str]) -> tuple[str, ...] | None:
    """The run set of a fixed-length row of a prefill-first engine, else None (a malformed row too: converting it
    names the field)."""
    try:
        ranged = float(row.get("min_len_ratio") or 1.0) < 1.0
    except ValueError:
        return None
    if row.get(SWEEP_MARK) == "1" or ranged:
        return None
    engine = (row.get("engine") or "").strip().lower()
    try:
        preset = get_engine(release_preset(engine, row.get("engine_version") or ""))
    except InfercastError:
        return None
    if preset.scheduler != "prefill-first":
        return None
    return tuple((row.get(c) or "").strip() for c in ("engine", "engine_version", "model", "gpu", "precision"))


def _below_lockstep(row: dict[str, str]) -> bool:
    try:
        ttft = float(row["ttft_ms_mean"]) / 1e3
        bound = lockstep_ttft_bound(row)
    except (KeyError, ValueError, InfercastError):
        return False
    return ttft < bound


def lockstep_ttft_bound(row: dict[str, str]) -> float:
    """Seconds: the least mean TTFT of C clients sending equal prompts of L tokens together. However batched, the
    k-th prompt served finishes after k prompts' prefill work, so the mean is at least (C + 1) / 2 prefills; each
    takes at least 2 x active parameters x L FLOPs (linear layers only: neither the embedding gather nor the LM
    head, which a prefill runs for its last token alone) over the replica's GPUs at the datasheet peak of the
    precision's tensor cores."""
    model = get_model(catalog_model_id(row["model"]))
    hw = get_hardware(catalog_gpu_id(row["gpu"]))
    scheme = get_scheme(row_precision((row.get("precision") or "").strip() or "bf16", model.id))
    tp, _, attention_dp = layout_of(row)
    clients, prompt = int(row["concurrency"]), int(row["input_len"])
    peak = hw.peak(scheme.compute_key(hw)) * tp * attention_dp
    # tied or not, the table counts once among the active parameters; a separate LM head once more
    per_token = model.active_params - model.embedding_params - model.lm_head_stored_params
    per_prompt = 2.0 * per_token * prompt / peak
    return (clients + 1) / 2 * per_prompt


def _capped_key(row: dict[str, str]) -> tuple[str, ...] | None:
    family = _sweep_family(row)
    return None if family is None else (*family, wheel_concurrency(row.get("silicon_data_source") or "") or "")


def _capped(row: dict[str, str]) -> bool:
    """Whether one wheel row measured under :data:`CAPPED_SHARE` of its clients in flight with room for all."""
    clients = wheel_concurrency(row.get("silicon_data_source") or "")
    model = model_id_for_repo(row.get("model_path") or "")
    if clients is None or model is None:
        return False
    try:
        ttft, tpot = float(row[WHEEL_TTFT]), float(row["silicon_tpot_ms"])
        isl, osl = int(float(row["isl"])), int(float(row["osl"]))
        gpus = _named_tp(row)
        hw = get_hardware(catalog_gpu_id(row.get("system") or ""))
        scheme = get_scheme(row_precision((row.get("precision") or "").strip() or "bf16", model))
    except (KeyError, ValueError, InfercastError):
        return False
    decode = (osl - 1) * tpot
    if gpus < 1 or decode >= CAPPED_SHARE * (ttft + decode):
        return False
    spec = get_model(model)
    routed = spec.routed_expert_params
    weights = routed * scheme.expert_weight_format.bytes_per_element
    weights += (spec.total_params - routed) * scheme.weight_format.bytes_per_element
    kv = int(clients) * spec.kv_bytes_for_context(isl + osl, 2.0, gpus)
    return weights / gpus + kv < ROOM_SHARE * hw.memory.usable


def _sweep_family(row: dict[str, str]) -> tuple[str, ...] | None:
    """(source file, GPU, model, precision, measured day) of a dated table's row; None for other rows."""
    source = row.get("silicon_data_source") or ""
    found = re.search(r"source_file=([^;]+);.*measured=(\d{4}-\d{2}-\d{2})", source)
    if not found:
        return None
    return (found[1].strip(), *((row.get(c) or "").strip() for c in ("system", "model_path", "precision")), found[2])


def _divides_heads(row: dict[str, str]) -> bool:
    """Whether the row's TP (its id's ``_tpN``, which wins over a ``tp_size`` holding tp x ep, else ``tp_size``)
    divides its catalog model's attention heads (True where either is unknown)."""
    model = model_id_for_repo(row.get("model_path") or "")
    try:
        tp = _named_tp(row)
    except ValueError:
        return True
    return model is None or tp < 1 or get_model(model).num_attention_heads % tp == 0


def _named_tp(row: dict[str, str]) -> int:
    """A wheel row's TP: its id's ``_tpN`` (which wins over a ``tp_size`` holding tp x ep), else ``tp_size``."""
    named = re.search(r"_tp(\d+)", row.get("id") or "")
    return int(named[1]) if named else int(float(row.get("tp_size") or 1))


def _rank(row: dict[str, str]) -> int:
    """Which copy of a repeated run to keep: 2 a dated table's, 1 the database dump's (dated, but it names some
    DeepSeek-R1 runs DeepSeek-V3), 0 an undated one."""
    if not _dated(row):
        return 0
    return 1 if (row.get("silicon_data_source") or "").strip().startswith(DB_DUMP) else 2


def _dated(row: dict[str, str]) -> bool:
    """Whether a wheel row's source names when it was measured (``measured=...``)."""
    return "measured=" in (row.get("silicon_data_source") or "")


def _centi(text: str | None) -> object:
    """A measured time in ms rounded to 0.01 ms (its text where it is not a number: compared as written)."""
    try:
        return round(float(text or ""), 2)
    except ValueError:
        return (text or "").strip()


def from_wheel_row(row: dict[str, str]) -> dict[str, str] | None:
    """A row of the wheel's ``silicon_sample.csv`` (``backend, system, model_path, isl, osl, tp_size, moe_ep_size,
    attention_dp_size, silicon_ttft_ms, ...``) in this module's format; None for a disaggregated row (the
    simulator's disaggregated pools take TP only) or one whose concurrency is not recorded. A blank precision is
    the 16-bit checkpoint, as in the calibration file cut from it."""
    source = row.get("silicon_data_source") or ""
    recorded = wheel_concurrency(source)
    if (row.get("mode") or "").strip() != "agg" or recorded is None:
        return None
    sweep = _is_serving_sweep(source)
    named = _named_layout(row) if sweep else None
    concurrency, tp, dp = (int(recorded), *named) if named else _clients_per_engine(row, int(recorded))
    return {
        "id": row.get("id") or "",
        "engine": row["backend"],
        "engine_version": row.get("backend_version") or "",
        "model": row["model_path"],
        "gpu": row["system"],
        "precision": (row.get("precision") or "").strip() or "bf16",
        "tp": str(tp),
        "ep": str(named_ep(row) if named else max(1, int(float(row.get("moe_ep_size") or 1)))),
        "attention_dp": str(dp),
        "input_len": row["isl"],
        "output_len": row["osl"],
        "concurrency": str(concurrency),
        "ttft_ms_mean": row[WHEEL_TTFT],
        "tpot_ms_mean": row["silicon_tpot_ms"],
        **({"min_len_ratio": str(SWEEP_LENGTH_RATIO), SWEEP_MARK: "1", **_sweep_run(source, row)} if sweep else {}),
        **(_sweep_config(row, recorded) if sweep else {}),
    }


def _sweep_config(row: dict[str, str], clients: str) -> dict[str, str]:
    """A dated sweep row's config as the sweeps launched it: its TP (the GPU count of one node's server), EP and
    clients, for a launch script that decides the layout itself (``expert_parallel``). The TP and EP are the id's
    (``_tp4_ep4_``), else a folded layout's, else the columns': ``tp_size``, and ``moe_ep_size`` over
    ``attention_dp_size`` (the wheel writes an EP-4 config as attention DP 4 with 16-way experts)."""
    found = re.search(r"_tp(\d+)(?:_\d+)?_ep(\d+)", row.get("id") or "")
    if found:
        tp, ep = int(found.group(1)), int(found.group(2))
    else:
        folded = _folded_layout(row)
        tp = folded[0] if folded else int(float(row["tp_size"]))
        moe_ep = max(1, int(float(row.get("moe_ep_size") or 1)))
        dp = max(1, int(float(row.get("attention_dp_size") or 1)))
        ep = moe_ep // dp if folded is None and dp > 1 and moe_ep % dp == 0 else moe_ep
    return {"sweep_tp": str(max(1, tp)), "sweep_ep": str(max(1, ep)), "sweep_clients": clients}


def _sweep_run(source: str, row: dict[str, str]) -> dict[str, str]:
    """A dated sweep row's measured date and model name (``measured=2026-03-25T16:34:14Z; model=DeepSeek-R1``; a
    database-dump row names its model by its id's config prefix, ``dsr1_b200_...``), as ``measured`` and
    ``sweep_model``, for its launch settings (:func:`sweep_launch`); none where not given."""
    parts = dict(part.strip().partition("=")[::2] for part in source.split(";"))
    model = parts.get("model", "").strip()
    if not model:
        model = next(
            (name for prefix, name in CONFIG_MODELS.items() if (row.get("id") or "").startswith(prefix + "_")), ""
        )
    found = {"measured": parts.get("measured", "").strip()[:10], "sweep_model": model}
    return {key: value for key, value in found.items() if value}


SWEEP_LENGTH_RATIO = 0.8
DB_DUMP = "db-dump/"
"""Source prefix of the wheel's rows dumped from the public sweeps' results database: the same grid (1k/1k, 1k/8k,
8k/1k), config-named ids (``minimaxm2_5_b300_vllm_fp8_agg_8192x1024_c128_cfg733``), CI workflow runs and public
release images, so read as dated sweeps (docs/accuracy-notes.md)."""
DRIFT_MARK = "drifting_clients"
"""The key :func:`convert_rows` sets on a fixed-length row read with drifting clients (:func:`drifting_runs`)."""
SWEEP_MARK = "dated_sweep"
"""The key :func:`from_wheel_row` sets on a dated sweep's row: its readings (8-bit KV for fp8, the TensorRT-LLM
release) follow the row's source, not any row with a length range."""
"""Shortest prompt and output as a share of the nominal length in the public serving sweeps' benchmark client
(``benchmark_serving.py --random-range-ratio 0.8``, lengths uniform in [0.8 L, L], ``num_prompts`` 10 x C)."""


def _is_serving_sweep(source: str) -> bool:
    """Whether a wheel row comes from the dated sweep tables (``source_file=2026-04-06.csv``,
    ``...-gap-analysis.csv``: 1k/1k, 1k/8k and 8k/1k at 4-256 clients, run with a vLLM-style benchmark client) or
    the database dump of the same sweeps (``db-dump/2026-04-27; config_id=...; workflow_run_id=...``), not from
    aiconfigurator's generated launches and its aiperf client (``.../data/<gpu>/<engine>/...``)."""
    if source.strip().startswith(DB_DUMP):
        return True
    for part in source.split(";"):
        key, _, value = part.strip().partition("=")
        if key == "source_file":
            return "/" not in value.strip()
    return False


def _named_layout(row: dict[str, str]) -> tuple[int, int] | None:
    """(tp, attention_dp) from a dated sweep row's id (``..._c64_tp8_ep8_937``) where its layout columns disagree
    with it: some rows hold tp x ep in ``tp_size`` (TP 8 x EP 8 read as 64 GPUs; the id and the experts'
    moe_tp x moe_ep = 8 x 8 say one 8-GPU node), or spread the clients over tp x ep attention ranks. The id's
    GPU count wins; an attention-DP row keeps DP over those GPUs (tp 1 x dp N). None: the columns agree."""
    found = re.search(r"_tp(\d+)(?:_\d+)?_ep(\d+)", row.get("id") or "")
    if not found:
        return _folded_layout(row)
    gpus = int(found.group(1))
    dp = max(1, int(float(row.get("attention_dp_size") or 1)))
    if int(float(row["tp_size"])) * dp == gpus:
        return None
    return (1, gpus) if dp > 1 else (gpus, 1)


def _folded_layout(row: dict[str, str]) -> tuple[int, int] | None:
    """(tp, 1) of a sweep row without a layout in its id (``..._c16_cfg615``) whose ``tp_size`` holds tp x ep past
    one node of its GPU: 64 = moe_tp 8 x moe_ep 8 on 8-GPU B200 / H200 nodes is one node's TP 8 x EP 8 (the sweeps
    serve from one node; DeepSeek-V3 at 4 clients measured 8-10 ms TPOT, where TP 64 over eight nodes is
    predicted 26 ms); None otherwise."""
    tp = int(float(row["tp_size"]))
    moe_tp = int(float(row.get("moe_tp_size") or 0))
    moe_ep = int(float(row.get("moe_ep_size") or 0))
    node = get_hardware(catalog_gpu_id(row["system"])).max_gpus_per_node
    if tp > node and moe_ep > 1 and moe_tp * moe_ep == tp and moe_tp <= node:
        return moe_tp, 1
    return None


def named_ep(row: dict[str, str]) -> int:
    """The expert parallelism a dated sweep row's id names (``_ep8_``), else its folded layout's (``moe_ep_size``)."""
    found = re.search(r"_tp\d+(?:_\d+)?_ep(\d+)", row.get("id") or "")
    if found:
        return max(1, int(found.group(1)))
    return max(1, int(float(row.get("moe_ep_size") or 1))) if _folded_layout(row) else 1


def _clients_per_engine(row: dict[str, str], clients: int) -> tuple[int, int, int]:
    """(clients of one engine instance, its tp, its attention-DP width) of a wheel row. The wheel's
    ``batch_size`` is the batch of one attention rank: where the benchmark's clients are k > 1 times
    ``batch_size`` x the recorded attention DP, the run served them with more attention ranks than recorded. For an
    MoE model with k = tp that
    is attention DP across the TP ranks (TensorRT-LLM ``enable_attention_dp``: k attention copies of TP 1 over the
    same GPUs, infercast's tp 1 x attention_dp k); otherwise k identical engine
    instances behind one endpoint, each serving clients / k (the layout the id's worker count implies)."""
    tp = int(float(row["tp_size"]))
    dp = max(1, int(float(row.get("attention_dp_size") or 1)))
    batch = int(float(row.get("batch_size") or 0))
    k = clients // (batch * dp) if batch > 0 and clients % (batch * dp) == 0 else 1
    if k <= 1:
        return clients, tp, dp
    model = model_id_for_repo(row["model_path"])
    if dp == 1 and k == tp and model is not None and get_model(model).is_moe:
        return clients, 1, k
    return clients // k, tp, dp


UNPLACED_FIELDS = ("model", "gpu", "precision")
"""A row naming a model, GPU or weight format the catalogs lack is left out (with a warning), not an error: a
published table spans more than any catalog."""


def convert_rows(rows: list[tuple[str, dict[str, str]]]) -> tuple[list[Record], int, list[str]]:
    """Records of ``(origin, row)`` pairs, how many rows were left out for not recording their concurrency, and
    the reasons (``origin: field: why``) of the rows left out because the catalogs cannot place them. Any other
    problem is an error naming the row's origin."""
    records: list[Record] = []
    skipped = 0
    unplaced: list[str] = []
    drifting = drifting_runs(row for _, row in rows)
    rows = [
        (origin, {**row, "min_len_ratio": str(SWEEP_LENGTH_RATIO), DRIFT_MARK: "1"} if drift else row)
        for (origin, row), drift in zip(rows, drifting, strict=True)
    ]
    for origin, row in rows:
        if not concurrency_recorded(row):
            skipped += 1
            continue
        try:
            missing = [c for c in REQUIRED if not (row.get(c) or "").strip()]
            if missing:
                raise InfercastError(
                    f"missing {', '.join(missing)} (a closed-loop row needs {', '.join(REQUIRED)})", field="data"
                )
            records += convert(row, origin)
        except InfercastError as exc:
            if exc.field in UNPLACED_FIELDS:
                unplaced.append(f"{origin}: {exc}")
                continue
            raise InfercastError(f"{origin}: {exc.message}", field=exc.field, allowed=exc.allowed) from None
        except ValueError as exc:
            raise InfercastError(f"{origin}: not a number where one is needed ({exc})", field="data") from None
    return records, skipped, unplaced


def _wheel_row(origin: str, row: dict[str, str]) -> dict[str, str] | None:
    """:func:`from_wheel_row`, a missing column or a non-number refused naming the row."""
    try:
        return from_wheel_row(row)
    except KeyError as exc:
        raise InfercastError(
            f"{origin}: missing column {exc.args[0]!r} of aiconfigurator's silicon_sample.csv", field="data"
        ) from None
    except (TypeError, ValueError) as exc:
        raise InfercastError(f"{origin}: not a number where one is needed ({exc})", field="data") from None


def read_closed_loop_rows(path: str | Path, numbered: list[tuple[int, str]]) -> list[Record]:
    """Records of a closed-loop file already split into ``(line number, text)`` lines (comments removed);
    rows without a recorded concurrency are left out with a warning that counts them."""
    reader = csv.DictReader(line for _, line in numbered)
    rows = [(f"{path}:{numbered[reader.line_num - 1][0]}", row) for row in reader]
    wheel_skipped = 0
    repeated = 0
    if WHEEL_TTFT in (reader.fieldnames or []):
        again = repeats(row for _, row in rows)
        totals = [
            total or capped
            for total, capped in zip(
                gpu_total_sweeps(row for _, row in rows), client_capped_sweeps(row for _, row in rows), strict=True
            )
        ]
        repeated = sum(again)
        kept = [
            (origin, None if total else _wheel_row(origin, row))
            for (origin, row), twice, total in zip(rows, again, totals, strict=True)
            if not twice
        ]
        wheel_skipped = sum(row is None for _, row in kept)
        rows = [(origin, row) for origin, row in kept if row is not None]
    records, skipped, unplaced = convert_rows(rows)
    if repeated:
        warnings.warn(
            f"{path}: left out {repeated} rows that repeat another row's measurement (one run in several source "
            "files, counted once)",
            stacklevel=2,
        )
    if wheel_skipped:
        warnings.warn(
            f"{path}: left out {wheel_skipped} disaggregated rows (or sweeps that name GPU totals as TP, or whose "
            "clients were capped outside the engine) or rows without a recorded concurrency",
            stacklevel=2,
        )
    if skipped:
        warnings.warn(
            f"{path}: left out {skipped} rows whose id records no concurrency ('_c_'; see "
            "infercast.records.silicon_rows)",
            stacklevel=2,
        )
    if unplaced:
        shown = "; ".join(unplaced[:3]) + (f"; and {len(unplaced) - 3} more" if len(unplaced) > 3 else "")
        warnings.warn(f"{path}: left out {len(unplaced)} rows the catalogs cannot place: {shown}", stacklevel=2)
    if not records:
        why = f" (first: {unplaced[0]})" if unplaced else ""
        raise InfercastError(
            f"{path} holds no closed-loop rows infercast can place, with a recorded concurrency{why}", field="data"
        )
    return records
