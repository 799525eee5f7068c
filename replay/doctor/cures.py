"""Cures checked by replay: every finding's candidate knob changes, and the recording as it
was, replayed over the window as `stepscope sweep` replays its points (in parallel, each
from the recorded state at the window's first step), then examined as the trace was.

A finding's cure is its smallest candidate after which the kind is found no more; failing
that, its smallest candidate that lowers the kind's figure by `CURE_GAIN` or more."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.schema import open_trace

from ..from_step import WHOLE, StepWindow
from ..sql import query
from ..stored_alike import ALL_STEPS
from ..sweep.grid import SweepPoint
from ..sweep.point import PointResult, PointTask
from ..sweep.pool import default_jobs, run_local
from .detectors import DETECTORS
from .examined import Examined
from .finding import Finding, WhatIf

CURE_GAIN = 0.25
"""How much lower a change must make the kind's figure to count as shrinking it: less is
within what another order of the same arrivals moves it."""

EFFECT_FIGURES = (
    "num_preemptions",
    "recomputed_tokens",
    "ttft_mean_steps",
    "ttft_p99_steps",
    "tpot_mean_steps",
    "num_steps",
    "rejected_draft_tokens",
    "prefix_tokens_recomputed",
)
"""The figures a cure's effect shows, when it moved them (the target's always)."""


@dataclass(frozen=True)
class _Outcome:
    """One replayed point: its figures and the kinds still found in it."""

    figures: dict[str, Any]
    kinds: frozenset[str]


def check_cures(
    trace: Path, window: StepWindow, findings: Sequence[Finding], jobs: int | None = None
) -> list[Finding]:
    """`findings`, each with the cure that worked, if any, and what was tried."""
    knob_sets = [{}, *(knobs for finding in findings for knobs in finding.candidates)]
    unique: list[dict[str, Any]] = list({_key(knobs): knobs for knobs in knob_sets}.values())
    if len(unique) == 1:
        return list(findings)
    points = [SweepPoint(index, knobs) for index, knobs in enumerate(unique)]
    with tempfile.TemporaryDirectory(prefix="stepscope-doctor-") as work_dir:
        task = PointTask(trace, None, Path(work_dir), frozenset(range(len(points))), window)
        outcomes = {
            _key(points[result.index].knobs): _outcome(result)
            for result in run_local(task, points, jobs or default_jobs())
        }
    recorded = outcomes[_key({})]
    return [_cured(finding, recorded, outcomes) for finding in findings]


def _outcome(result: PointResult) -> _Outcome:
    """The point's figures, its sweep metrics and the doctor's own, and its findings."""
    assert result.trace is not None  # every point is kept
    with open_trace(result.trace) as replayed:
        window = {"from_step": 0, "to_step": ALL_STEPS}
        drafts, accepted = replayed.sql(query("doctor_spec_decode"), window).fetchall()[0][:2]
        prefixes = replayed.sql(query("doctor_prefix_cache"), window).fetchall()
        examined = Examined.of(replayed, result.trace, WHOLE)
        kinds = frozenset(f.kind for detector in DETECTORS for f in detector(examined))
    figures = {
        **result.metrics,
        "rejected_draft_tokens": drafts - accepted,
        "prefix_tokens_recomputed": sum(row[-1] for row in prefixes),
    }
    return _Outcome(figures, kinds)


def _cured(finding: Finding, recorded: _Outcome, outcomes: dict[str, _Outcome]) -> Finding:
    tried = [(knobs, outcomes[_key(knobs)]) for knobs in finding.candidates]
    gone = [(knobs, o) for knobs, o in tried if finding.kind not in o.kinds]
    before = recorded.figures[finding.target]
    shrunk = [(knobs, o) for knobs, o in tried if _lowers(before, o.figures[finding.target])]
    chosen = gone[:1] or shrunk[:1]
    if not chosen:
        return finding.with_cure(None, finding.candidates)
    ((knobs, outcome),) = chosen
    effect = _effect(recorded.figures, outcome.figures, finding.target)
    return finding.with_cure(WhatIf(knobs, effect, finding.target, removes=bool(gone)),
                             finding.candidates)  # fmt: skip


def _lowers(before: float | None, after: float | None) -> bool:
    if before is None or after is None or before <= 0:
        return False
    return after <= before * (1 - CURE_GAIN)


def _effect(
    recorded: dict[str, Any], changed: dict[str, Any], target: str
) -> dict[str, tuple[Any, Any]]:
    return {
        name: (_rounded(recorded[name]), _rounded(changed[name]))
        for name in EFFECT_FIGURES
        if name == target or recorded[name] != changed[name]
    }


def _rounded(value: Any) -> Any:
    return round(value, 2) if isinstance(value, float) else value


def _key(knobs: dict[str, Any]) -> str:
    return json.dumps(knobs, sort_keys=True)
