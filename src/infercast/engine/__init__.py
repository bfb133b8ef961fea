"""A real serving engine in PyTorch that shares the simulator's schedulers (one policy, two executors).

:class:`~infercast.engine.core.Engine` runs any catalog model or config.json with random weights over paged
KV blocks (prefix caching, recompute preemption), with continuous batching and chunked prefill decided by
:mod:`infercast.sim.scheduler`; :func:`~infercast.engine.loadgen.replay` drives it with a simulator
workload in real time; :mod:`infercast.engine.cpu` calibrates the simulator to it; and
:mod:`infercast.engine.validate` compares the two.
"""
