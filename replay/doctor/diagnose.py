"""`stepscope doctor`'s findings on a trace: every detector over the window, worst first,
each then with the cure a what-if replay checked (unless what-ifs are off)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stepscope.engine import InputError
from stepscope.schema import Trace, open_trace

from ..checkpoints import checkpoint_steps
from ..from_step import StepWindow, check_window, one_stretch
from .cures import check_cures
from .detectors import DETECTORS, KINDS
from .examined import Examined
from .finding import Finding, worst_first


@dataclass(frozen=True)
class Diagnosis:
    trace: Path
    """The trace as the user named it."""
    window: tuple[int, int]
    """The first and last step examined."""
    findings: list[Finding]
    what_ifs: bool
    """Whether cures were checked by replay."""

    def to_json(self) -> dict[str, object]:
        return {
            "trace": str(self.trace),
            "window": list(self.window),
            "findings": [finding.to_json() for finding in self.findings],
        }


def diagnose(
    trace_path: Path,
    shown_as: Path,
    window: StepWindow,
    *,
    what_ifs: bool = True,
    jobs: int | None = None,
) -> Diagnosis:
    """The findings on `trace_path` over `window`; `shown_as` names it in the evidence."""
    with open_trace(trace_path) as trace:
        check_window(window, trace)
        if what_ifs:
            window = one_stretch(window, trace)
        if what_ifs and window.from_step:
            _require_checkpoints(trace)
        examined = Examined.of(trace, shown_as, window)
        findings = worst_first([f for detector in DETECTORS for f in detector(examined)], KINDS)
    if what_ifs and findings:
        findings = check_cures(trace_path, window, findings, jobs)
    return Diagnosis(shown_as, (examined.first_step, examined.last_step), findings, what_ifs)


def _require_checkpoints(trace: Trace) -> None:
    """What-ifs from a step past 0 start from a checkpoint; a trace without any cannot."""
    if not checkpoint_steps(trace):
        raise InputError(
            f"{trace.path}: no checkpoints, so the what-ifs cannot start at --from-step: "
            "diagnose it with --no-what-if, or without --from-step"
        )
