"""Whether a diff fails a CI check: on any decision change, or on a metric getting worse."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from stepscope.engine import InputError

from .diff import TraceDiff


class FailOn(enum.StrEnum):
    DECISIONS = "decisions"
    METRICS = "metrics"


LOWER_IS_BETTER = {
    "steps_to_drain": True,
    "preemptions": True,
    "mean_ttft_steps": True,
    "p90_ttft_steps": True,
    "mean_tpot_steps": True,
}
"""The metrics a check can fail on, and which way is better. Tokens per step and KV usage
are shown only: recompute after preemption raises both, so neither is better either way."""


@dataclass(frozen=True)
class Tolerance:
    """How much worse a metric may get: a percentage of the baseline, or an absolute amount."""

    amount: float
    relative: bool

    def allows(self, baseline: float, value: float, *, lower_is_better: bool) -> bool:
        worse_by = (value - baseline) if lower_is_better else (baseline - value)
        limit = abs(baseline) * self.amount / 100 if self.relative else self.amount
        return worse_by <= limit + 1e-9

    def __str__(self) -> str:
        return f"{self.amount:g}%" if self.relative else f"{self.amount:g}"


@dataclass(frozen=True)
class MetricCheck:
    name: str
    baseline: float | None
    value: float | None
    tolerance: Tolerance
    passed: bool


@dataclass(frozen=True)
class Verdict:
    failed: bool
    reasons: tuple[str, ...]
    metric_checks: tuple[MetricCheck, ...]


def parse_tolerances(assignments: list[str]) -> dict[str, Tolerance]:
    """`metric=5%` (relative to the baseline) or `metric=2` (absolute), one per assignment."""
    tolerances = {}
    for text in assignments:
        name, sep, raw = text.partition("=")
        if not sep or name not in LOWER_IS_BETTER:
            known = ", ".join(LOWER_IS_BETTER)
            raise InputError(
                f"--tolerance {text!r}: expected METRIC=AMOUNT[%] with METRIC in {known}"
            )
        relative = raw.endswith("%")
        try:
            amount = float(raw.removesuffix("%"))
        except ValueError:
            raise InputError(f"--tolerance {text!r}: {raw!r} is not a number") from None
        if amount < 0:
            raise InputError(f"--tolerance {text!r}: must not be negative")
        tolerances[name] = Tolerance(amount, relative)
    return tolerances


def judge(diff: TraceDiff, fail_on: FailOn, tolerances: Mapping[str, Tolerance]) -> Verdict:
    checks = tuple(_check(name, diff, tolerances) for name in LOWER_IS_BETTER)
    reasons = []
    if diff.config_differences and fail_on is FailOn.DECISIONS:
        reasons.append("configs differ")
    if fail_on is FailOn.DECISIONS and not diff.identical:
        step = diff.first_decision_step if diff.decisions_differ else diff.first_input_step
        reasons.append(f"{diff.classification} divergence at step {step}")
    if fail_on is FailOn.METRICS:
        reasons.extend(
            f"{c.name} got worse: {c.baseline} -> {c.value} (tolerance {c.tolerance})"
            for c in checks
            if not c.passed
        )
    return Verdict(bool(reasons), tuple(reasons), checks)


def _check(name: str, diff: TraceDiff, tolerances: Mapping[str, Tolerance]) -> MetricCheck:
    baseline, value = diff.metrics.get(name, (None, None))
    tolerance = tolerances.get(name, Tolerance(0.0, relative=False))
    if baseline is None or value is None:
        return MetricCheck(name, baseline, value, tolerance, passed=baseline == value)
    passed = tolerance.allows(float(baseline), float(value), lower_is_better=LOWER_IS_BETTER[name])
    return MetricCheck(name, baseline, value, tolerance, passed)
