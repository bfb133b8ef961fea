"""The names the pages offer in their menus, read from the package's catalogs."""

from __future__ import annotations

from functools import cache

import infercast


@cache
def models() -> list[str]:
    return [m.id for m in infercast.list_models()]


@cache
def gpus() -> list[str]:
    return [h.id for h in infercast.list_hardware()]


@cache
def precisions() -> list[str]:
    from infercast.specs.precision import SCHEMES

    return list(SCHEMES)


@cache
def kv_formats() -> list[str]:
    from infercast.specs.precision import KV_FORMATS

    return list(KV_FORMATS)


@cache
def engines() -> list[str]:
    from infercast.specs.engine import engine_catalog

    return list(engine_catalog())


SCHEDULERS = ("static", "prefill-first", "chunked", "inflight", "disagg")
"""The simulator's schedulers (``infercast simulate --scheduler``)."""
ROUTERS = ("round_robin", "least_outstanding", "prefix_affinity")
"""Replica routers (``--router``; infercast.sim.config.ROUTERS)."""
TRACES = ("azure_conv", "azure_code")
"""Built-in traces (``--trace``)."""
