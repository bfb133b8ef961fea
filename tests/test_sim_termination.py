"""Every simulation of a valid workload finishes (issue 37, item 10): no engine, scheduler or arrival pattern
leaves a replica's loop turning without progress."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infercast.sim import replica as replica_module
from infercast.sim.api import config_from_keywords, simulate
from infercast.sim.recorder import Recorder
from infercast.sim.replica import Replica
from infercast.sim.state import RequestTable
from infercast.sim.watchdog import STALL_LIMIT

GPU = "h100-sxm"
MODEL = "llama-3.1-8b"


def test_trtllm_short_outputs_at_an_open_loop_rate_finish():
    """The reported case: a step ending past the next arrival left the idle replica 'idling forward' to a
    request that had already reached the engine, without advancing its clock (SimulationStalled)."""
    res = simulate(MODEL, GPU, engine="trtllm", input_len=467, output_len=16, rate=8.0, num_requests=200, seed=1)
    assert res["completed"] == 200


def test_an_idle_replica_past_its_limit_returns():
    """run_until(t) on an idle replica whose last step ended after t, with a request visible before t, returns
    at once (no step starts before t); the request joins in the next call."""
    cfg = config_from_keywords(MODEL, GPU, engine="trtllm", input_len=100, output_len=4, rate=1.0, num_requests=2)
    table = RequestTable(cfg.workload.build(), 0)
    rep = Replica(0, cfg.deployment, cfg.engine, table, Recorder())
    rep.enqueue(0)
    visible = float(table.visible[0])
    rep.t = visible + 1.0  # as after a step that ended past the next arrival
    rep.run_until(visible + 0.5)
    assert list(rep.pending) == [0] and rep.t == visible + 1.0
    rep.run_until(np.inf)
    assert not rep.pending and table.finish[0] > visible


ENGINES = ["vllm", "vllm-0.14", "sglang", "trtllm", "ideal"]
SCHEDULERS = [None, "static", "prefill-first", "chunked", "inflight", "disagg"]


ARRIVALS = st.one_of(
    st.builds(lambda r, b: {"rate": r, "burstiness": b}, st.floats(0.5, 400.0), st.sampled_from([0.2, 1.0, 4.0])),
    st.builds(lambda c: {"concurrency": c}, st.integers(1, 16)),
    st.just({"offline": True}),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    engine=st.sampled_from(ENGINES),
    scheduler=st.sampled_from(SCHEDULERS),
    input_len=st.integers(1, 3000),
    output_len=st.integers(1, 64),
    num_requests=st.integers(1, 40),
    arrivals=ARRIVALS,
    overlap=st.sampled_from([None, True]),
    replicas=st.sampled_from([1, 1, 2]),
    seed=st.integers(0, 2**16),
)
def test_small_random_workloads_always_finish(
    engine, scheduler, input_len, output_len, num_requests, arrivals, overlap, replicas, seed
):
    """Small random workloads x engines x schedulers x arrival patterns: every request completes."""
    replicas = 1 if scheduler == "disagg" else replicas  # disaggregated pools are sized by DisaggConfig
    replica_module.STALL_LIMIT = 5000  # a stall shows after a few thousand idle turns, not 200,000
    try:
        res = simulate(
            MODEL,
            GPU,
            engine=engine,
            scheduler=scheduler,
            input_len=input_len,
            output_len=output_len,
            num_requests=num_requests,
            overlap_scheduler=overlap,
            replicas=replicas,
            router="least_outstanding" if replicas > 1 else "round_robin",
            seed=seed,
            **arrivals,
        )
    finally:
        replica_module.STALL_LIMIT = STALL_LIMIT
    assert res["completed"] == num_requests
    assert np.isfinite(res["duration_s"]) and res["duration_s"] >= 0
