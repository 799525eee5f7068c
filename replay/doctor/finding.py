"""A finding of `stepscope doctor`: what is wrong, where, what it cost, how to check it, and
the knob change a what-if replay showed would cure it."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

SHOWN_REQUESTS = 5
"""Requests a finding names, the worst first: enough to start from, few enough to read."""


class Severity(enum.IntEnum):
    """How much a finding matters; `--fail-on` takes a name."""

    INFO = 0
    WARNING = 1
    CRITICAL = 2

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def by(cls, value: float, critical_at: float) -> Severity:
        """A warning, critical once `value` reaches `critical_at`."""
        return cls.CRITICAL if value >= critical_at else cls.WARNING


@dataclass(frozen=True)
class WhatIf:
    """A knob change replayed over the finding's window, and what it changed."""

    knobs: dict[str, Any]
    effect: dict[str, tuple[Any, Any]]
    """Each figure the change moved: (as recorded, with the change)."""
    target: str
    """The figure this kind of finding is judged by (lower is better)."""
    removes: bool
    """Whether the kind is found no more with the change (else it only shrinks)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "knobs": self.knobs,
            "effect": {name: list(pair) for name, pair in self.effect.items()},
            "target": self.target,
            "removes": self.removes,
        }


@dataclass(frozen=True)
class Finding:
    kind: str
    severity: Severity
    summary: str
    """One line a person reads first: what happened, in the trace's own names."""
    steps: tuple[int, int]
    """The first and last step involved."""
    requests: tuple[str, ...]
    """The requests involved, the worst first (a few, not all)."""
    cost: dict[str, Any]
    """What it cost, in steps, tokens or requests."""
    evidence: str
    """A `stepscope sql` command line whose rows show it."""
    candidates: tuple[dict[str, Any], ...] = ()
    """Knob changes that might cure it, smallest first (what-if replays try them)."""
    target: str = "ttft_mean_steps"
    """The sweep metric a cure must lower."""
    what_if: WhatIf | None = None
    tried: tuple[dict[str, Any], ...] = field(default=())
    """The candidates replayed (empty without what-ifs)."""

    def with_cure(self, what_if: WhatIf | None, tried: tuple[dict[str, Any], ...]) -> Finding:
        return replace(self, what_if=what_if, tried=tried)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity.label,
            "summary": self.summary,
            "steps": list(self.steps),
            "requests": list(self.requests),
            "cost": self.cost,
            "evidence": self.evidence,
            "what_if": None if self.what_if is None else self.what_if.to_json(),
            "tried": list(self.tried),
        }


def span(rows: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """The steps `rows` cover: the least `first_step` to the greatest `last_step`."""
    return min(row["first_step"] for row in rows), max(row["last_step"] for row in rows)


def worst_first(findings: list[Finding], kinds: Sequence[str]) -> list[Finding]:
    """Findings by severity, then in the order of `kinds` (causes before symptoms), then by
    the step they start at."""
    return sorted(findings, key=lambda f: (-f.severity, kinds.index(f.kind), f.steps[0]))
