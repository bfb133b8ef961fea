"""A real serving engine in PyTorch that shares the simulator's schedulers (one policy, two executors).

:class:`~infercast.harness.engine.runtime.Engine` runs any catalog model or config.json with random weights over paged
KV blocks (prefix caching, recompute preemption), with continuous batching and chunked prefill decided by
:mod:`infercast.sim.scheduler`; :func:`~infercast.harness.engine.loadgen.replay` drives it with a simulator
workload in real time; :mod:`infercast.harness.engine.cpu` calibrates the simulator to it; and
:mod:`infercast.harness.engine.sim_agreement` compares the two.
"""
