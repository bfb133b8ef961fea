"""Where the planner's simulations run: in this process, on local cores (processes), or on Ray (optional).

:class:`Executor` maps a module-level function over work items and returns results in item order, so every
executor gives the same answers (each search is deterministic: fixed seeds, warm starts only within a
task). Families (candidates sharing a deployment, differing in knobs or prefill:decode ratio) are one task:
a member warm-starts from the one searched before it in the same worker.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from infercast.errors import InfercastError, require_positive_int, unknown_choice
from infercast.plan.candidates import Candidate
from infercast.plan.costing import Cutoff
from infercast.plan.search import RateSearch, offline_capacity, search_rate
from infercast.plan.slo import SLOSet
from infercast.plan.traffic import Traffic
from infercast.specs.model import ModelSpec

Progress = Callable[[str, int, int], None]
"""Called with (phase, items done, items in the phase) as tasks finish."""
EXECUTORS = ("local", "serial", "ray")


def search_family(
    model: ModelSpec, traffic: Traffic, slo: SLOSet, task: tuple[Sequence[Candidate], Cutoff | None, float | None]
) -> list[RateSearch]:
    """Search each member in order (one task); the first warm-starts from ``hint`` (max rate / offline
    throughput seen in earlier rounds), each later one from the member before it. With a cutoff, a member
    whose offline throughput x slack cannot beat it is not searched (``bounded`` says why)."""
    family, cutoff, hint = task
    out: list[RateSearch] = []
    for c in family:
        try:
            cap = offline_capacity(model, c, traffic)
            if cutoff is not None and cutoff.beaten(c.gpu, c.gpus, cap * cutoff.slack):
                out.append(
                    RateSearch(
                        c,
                        cap,
                        None,
                        None,
                        "",
                        bounded=(
                            f"cost bound: cannot beat the best unit even at {cutoff.slack:g} x its offline throughput "
                            f"({cap * cutoff.slack:.3g} req/s)"
                        ),
                    )
                )
                continue
            hopeless = None if cutoff is None else (lambda r, c=c: cutoff.beaten(c.gpu, c.gpus, r))
            res = search_rate(model, c, traffic, slo, hint=hint, capacity=cap, hopeless=hopeless)
        except InfercastError as exc:  # a configuration the simulator refuses fails, saying why
            res = RateSearch(c, 0.0, None, None, "error", error=exc.message)
        out.append(res)
        hint = res.hint or hint
    return out


def default_workers() -> int:
    """Cores this process may use."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - not Linux
        return max(os.cpu_count() or 1, 1)


class Executor:
    """``with Executor("local") as ex: ex.map(fn, items, *shared)`` -> [fn(*shared, item) for item in items]."""

    def __init__(self, kind: str = "local", workers: int | None = None, ray_address: str | None = None):
        if kind not in EXECUTORS:
            raise unknown_choice("executor", str(kind), EXECUTORS)
        self.kind = kind
        self.workers = default_workers() if workers is None else require_positive_int("workers", workers)
        self.ray_address = ray_address
        self._pool: ProcessPoolExecutor | None = None
        self._ray: Any = None
        self._ray_started = False

    def __enter__(self) -> Executor:
        if self.kind == "ray":
            try:
                import ray
            except ImportError:
                raise InfercastError("Ray is not installed: pip install 'infercast[ray]'", field="executor") from None
            self._ray = ray
            if not ray.is_initialized():
                kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
                if self.ray_address:
                    kwargs["address"] = self.ray_address
                else:
                    kwargs["num_cpus"] = self.workers
                ray.init(**kwargs)
                self._ray_started = True
        elif self.kind == "local" and self.workers > 1:
            self._pool = ProcessPoolExecutor(max_workers=self.workers)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        if self._ray_started:
            self._ray.shutdown()
            self._ray_started = False

    def map(
        self,
        fn: Callable[..., Any],
        items: Sequence[Any],
        *shared: Any,
        weights: Sequence[int] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[Any]:
        """``fn(*shared, item)`` for each item, in item order; ``weights`` count toward progress (default 1)."""
        weights = list(weights) if weights is not None else [1] * len(items)
        total, done = sum(weights), 0
        results: list[Any] = [None] * len(items)
        if self._ray is not None:
            ray = self._ray
            remote = ray.remote(fn)
            refs = [ray.put(x) for x in shared]
            pending = {remote.remote(*refs, item): i for i, item in enumerate(items)}
            waiting = list(pending)
            while waiting:
                ready, waiting = ray.wait(waiting, num_returns=1)
                for ref in ready:
                    i = pending[ref]
                    results[i] = ray.get(ref)
                    done += weights[i]
                    if progress:
                        progress(done, total)
            return results
        if self._pool is None or len(items) <= 1:
            for i, item in enumerate(items):
                results[i] = fn(*shared, item)
                done += weights[i]
                if progress:
                    progress(done, total)
            return results
        # heaviest first keeps every worker busy to the end
        order = sorted(range(len(items)), key=lambda i: -weights[i])
        futures = {self._pool.submit(fn, *shared, items[i]): i for i in order}
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            done += weights[i]
            if progress:
                progress(done, total)
        return results
