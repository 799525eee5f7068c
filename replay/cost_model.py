"""A step-time model fitted to a trace's timings, to turn step counts into seconds.

seconds per step = base + per_token * scheduled tokens + per_request * scheduled requests,
fitted by least squares to the recorded schedule + model + update times.
A fit is usable only when it explains most of the variance (R² at least MIN_R_SQUARED)
and every cost is non-negative; otherwise its seconds would contradict the step counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from stepscope.schema import Trace

from .sql import query

MIN_STEPS = 8
MIN_R_SQUARED = 0.5
"""Below this the timings are mostly noise the model does not explain."""
NEGLIGIBLE_S = 1e-12
"""A cost this close below zero is rounding in the solve, not a negative cost."""


@dataclass(frozen=True)
class CostModel:
    base: float
    per_token: float
    per_request: float
    r_squared: float
    num_steps: int

    @property
    def problem(self) -> str | None:
        """Why the fit is too poor to turn steps into seconds, or None when it is usable."""
        costs = (("base", self.base), ("per-token", self.per_token),
                 ("per-request", self.per_request))  # fmt: skip
        negative = [name for name, cost in costs if cost < -NEGLIGIBLE_S]
        problems = [f"negative {' and '.join(negative)} cost"] if negative else []
        if self.r_squared < MIN_R_SQUARED:
            problems.append(f"R² {self.r_squared:.2f} < {MIN_R_SQUARED}")
        return "; ".join(problems) or None

    def describe(self) -> str:
        return (
            f"step ≈ {self.base * 1e3:.3f} ms + {self.per_token * 1e6:.2f} µs/token "
            f"+ {self.per_request * 1e6:.2f} µs/request (R² {self.r_squared:.2f}, "
            f"{self.num_steps} steps)"
        )


def fit_cost_model(trace: Trace) -> CostModel | None:
    """The fit, or None when the trace has too few timed steps to fit three numbers."""
    relation = trace.sql(query("step_time_sums"))
    sums = dict(zip(relation.columns, relation.fetchall()[0], strict=True))
    n = sums["n"] or 0
    if n < MIN_STEPS:
        return None
    matrix = [
        [n, sums["s1"], sums["s2"]],
        [sums["s1"], sums["s11"], sums["s12"]],
        [sums["s2"], sums["s12"], sums["s22"]],
    ]
    vector = [sums["sy"], sums["s1y"], sums["s2y"]]
    solution = _solve(matrix, vector)
    if solution is None:
        return None
    base, per_token, per_request = solution
    return CostModel(base, per_token, per_request, _r_squared(sums, solution), int(n))


def latency_seconds(trace: Trace, model: CostModel) -> dict[str, float | None]:
    """Total run time, time to first token and time per output token, in modelled seconds."""
    relation = trace.sql(
        query("latency_seconds"),
        {"base": model.base, "per_token": model.per_token, "per_request": model.per_request},
    )
    return dict(zip(relation.columns, relation.fetchall()[0], strict=True))


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None for a singular system."""
    rows = [[*row, value] for row, value in zip(matrix, vector, strict=True)]
    size = len(rows)
    for column in range(size):
        pivot = max(range(column, size), key=lambda r: abs(rows[r][column]))
        if abs(rows[pivot][column]) < 1e-12:
            return _solve_without_requests(matrix, vector) if column == 2 else None
        rows[column], rows[pivot] = rows[pivot], rows[column]
        for row in range(size):
            if row != column:
                factor = rows[row][column] / rows[column][column]
                rows[row] = [a - factor * b for a, b in zip(rows[row], rows[column], strict=True)]
    return [rows[i][size] / rows[i][i] for i in range(size)]


def _solve_without_requests(matrix: list[list[float]], vector: list[float]) -> list[float] | None:
    """Tokens and requests move together (e.g. pure decode): fit on tokens alone."""
    determinant = matrix[0][0] * matrix[1][1] - matrix[0][1] * matrix[1][0]
    if abs(determinant) < 1e-12:
        return None
    base = (vector[0] * matrix[1][1] - matrix[0][1] * vector[1]) / determinant
    per_token = (matrix[0][0] * vector[1] - matrix[1][0] * vector[0]) / determinant
    return [base, per_token, 0.0]


def _r_squared(sums: dict[str, float], solution: list[float]) -> float:
    base, per_token, per_request = solution
    n, sy, syy = sums["n"], sums["sy"], sums["syy"]
    total = syy - sy * sy / n
    if total <= 0:
        return 1.0
    explained = base * sy + per_token * sums["s1y"] + per_request * sums["s2y"] - sy * sy / n
    return max(0.0, min(1.0, explained / total))
