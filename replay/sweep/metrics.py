"""One sweep point's figures, read from its what-if trace: the `sweep_points` metric columns.

Statistics are taken in Python over values fetched in request order (exactly rounded sums,
quantiles by `quantile_cont`'s definition), so a point's row is the same bytes whichever
process, machine or thread count computed it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from stepscope.schema import Trace

from ..cost_model import CostModel
from ..from_step import WHOLE, StepWindow, window_bounds
from ..sql import query

METRIC_TYPES: dict[str, pa.DataType] = {
    "num_steps": pa.int32(),
    "num_preemptions": pa.int32(),
    "recomputed_tokens": pa.int64(),
    "ttft_mean_steps": pa.float64(),
    "ttft_p90_steps": pa.float64(),
    "ttft_p99_steps": pa.float64(),
    "tpot_mean_steps": pa.float64(),
    "tpot_p90_steps": pa.float64(),
    "tpot_p99_steps": pa.float64(),
    "ttft_p99_s": pa.float64(),
    "tpot_p99_s": pa.float64(),
    "ttft_mean_s": pa.float64(),
    "tpot_mean_s": pa.float64(),
    "kv_usage_mean": pa.float64(),
    "kv_usage_max": pa.float64(),
    "tokens_per_step": pa.float64(),
    "num_finished": pa.int32(),
    "num_rejected": pa.int32(),
}
"""The metric columns of `sweep_points`, in their order, with their types."""

SECONDS_METRICS = ("ttft_p99_s", "tpot_p99_s", "ttft_mean_s", "tpot_mean_s")
"""NULL unless the step-time fit is good enough to turn steps into seconds."""

_NO_MODEL = {"base": 0.0, "per_token": 0.0, "per_request": 0.0}


def point_metrics(
    trace: Trace, model: CostModel | None, window: StepWindow = WHOLE
) -> dict[str, Any]:
    """The metric columns of one point; seconds only with a usable `model`.

    The point's trace holds its `window`'s steps; its latencies are of the requests that
    arrived in the window (one carried in from before has its first token out of sight)."""
    relation = trace.sql(query("sweep_run_metrics"))
    metrics = dict(zip(relation.columns, relation.fetchall()[0], strict=True))
    costs = _NO_MODEL if model is None else {
        "base": model.base, "per_token": model.per_token, "per_request": model.per_request
    }  # fmt: skip
    first, last = window_bounds(window)
    params = {**costs, "from_step": first, "to_step": last}
    latency = trace.sql(query("sweep_request_latency"), params).to_arrow_table()
    columns = {name: _present(latency[name].to_pylist()) for name in latency.column_names}
    for unit in ("steps", "s"):
        for kind in ("ttft", "tpot"):
            values = sorted(columns[f"{kind}_{unit}"])
            metrics[f"{kind}_mean_{unit}"] = mean(values)
            metrics[f"{kind}_p90_{unit}"] = quantile(values, 0.9)
            metrics[f"{kind}_p99_{unit}"] = quantile(values, 0.99)
    if model is None:
        metrics.update(dict.fromkeys(SECONDS_METRICS))
    return {name: metrics[name] for name in METRIC_TYPES}


def mean(values: Sequence[float]) -> float | None:
    """The mean from an exactly rounded sum: the same whatever the values' order."""
    return math.fsum(values) / len(values) if values else None


def quantile(ordered: Sequence[float], q: float) -> float | None:
    """Linear interpolation between the closest ranks, as DuckDB's `quantile_cont` defines it."""
    if not ordered:
        return None
    position = (len(ordered) - 1) * q
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    low, high = ordered[lower], ordered[upper]
    return low + (position - lower) * (high - low)


def _present(values: list[float | None]) -> list[float]:
    return [value for value in values if value is not None]
