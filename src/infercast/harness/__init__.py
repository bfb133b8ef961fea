"""The measurement harness: a random-weight PyTorch decoder timed step by step (``python -m infercast.harness``),
and beside it a real paged-KV serving engine driven by the simulator's schedulers (:mod:`infercast.harness.engine`)."""
