"""The outcome of a plan: every candidate ranked (passing ones first, cheapest first), the chosen one, its
fleet check, launch command and, for a daily load, the autoscaling what-if."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.errors import InfercastError

STATUS_ORDER = {"pass": 0, "fail": 1, "bounded": 2, "pruned": 3}
"""Passing candidates rank above failing ones whatever they cost; then those not searched because their cost
bound could not beat the choice, then those pruned analytically."""
TABLE_FORMATS = (".csv", ".parquet")


def rank(df: pd.DataFrame, by_fleet: bool) -> pd.DataFrame:
    """Passing first; among them the cheapest fleet for the target rate (else the cheapest $/Mtok), then the
    cheaper $/Mtok, then the higher max rate; failing and pruned rows after, in candidate order."""
    key = pd.DataFrame(
        {
            "status": df["status"].map(STATUS_ORDER),
            "fleet": df["fleet_usd_per_hour"].where(df["status"] == "pass", np.inf) if by_fleet else 0.0,
            "mtok": df["usd_per_mtok_output"].where(df["status"] == "pass", np.inf),
            "rate": -df["max_rate_req_s"].fillna(0.0).where(df["status"] == "pass", 0.0),
            "order": np.arange(len(df)),
        }
    )
    order = key.sort_values(["status", "fleet", "mtok", "rate", "order"], kind="stable").index
    out = df.loc[order].reset_index(drop=True)
    out.insert(0, "rank", np.arange(1, len(out) + 1))
    return out


@dataclass
class PlanResult:
    """``table``: one row per candidate, ranked; ``chosen``: the first passing row (None when none passes)."""

    table: pd.DataFrame
    chosen: dict[str, Any] | None
    settings: dict[str, Any]
    stats: dict[str, Any]
    fleet_check: dict[str, Any] | None = None
    launch: list[str] = field(default_factory=list)
    daily: Any = None

    @property
    def passing(self) -> pd.DataFrame:
        return self.table[self.table["status"] == "pass"]

    def to_dict(self) -> dict[str, Any]:
        rows = self.table.replace({np.nan: None}).to_dict(orient="records")
        return {
            **self.settings,
            "stats": self.stats,
            "chosen": self.chosen,
            "fleet_check": self.fleet_check,
            "launch": self.launch,
            "daily": self.daily.to_dict() if self.daily is not None else None,
            "candidates": rows,
        }

    def save_table(self, path: str | Path) -> Path:
        """Write the ranked table as CSV or Parquet (by suffix)."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in TABLE_FORMATS:
            raise InfercastError(f"table file must end in {' or '.join(TABLE_FORMATS)}, got {path.name!r}", field="out")
        flat = self.table.copy()
        for col in ("slo_measured_ms", "error_band"):  # nested dicts as text in flat files
            flat[col] = flat[col].map(lambda d: None if d is None else str(d))
        if suffix == ".csv":
            flat.to_csv(path, index=False)
        else:
            try:
                flat.to_parquet(path, index=False)
            except ImportError:
                raise InfercastError("Parquet needs pyarrow: pip install 'infercast[parquet]'", field="out") from None
        return path
