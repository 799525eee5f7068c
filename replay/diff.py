"""The diff of two traces: where their decisions part, why, and what it changed.

Steps are aligned by number. Each step's decision (tokens per request and their
order, admissions, preemptions, block ids, free blocks) is compared by a fingerprint
computed in SQL (`step_differences`), and only the first differing step is drilled into.
A step one trace lacks is divergent (`missing_step`). The first divergence is
classified: *input* when arrivals, aborts or the tokens the model sampled differed
first (GPU numerics, a changed workload), *decision* when the same inputs met a
different choice. `stepscope diff`, exact replay and the TUI all read this comparison.
"""

from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from stepscope.engine.config import HASHING_KNOBS
from stepscope.schema import StepDetail, Trace, open_trace, read_step
from stepscope.schema.knob_text import knob_text

from .from_step import WHOLE, StepWindow, window_bounds
from .on_both import on_both
from .sql import query
from .step_differences import (
    DECISION_FIELDS,
    MISSING_STEP,
    StepDifferences,
    fingerprints,
    step_differences,
)


class Classification(enum.StrEnum):
    IDENTICAL = "identical"
    INPUT = "input"
    DECISION = "decision"
    INPUTS_ONLY = "inputs_only"
    """Inputs differ but every decision is the same."""


@dataclass(frozen=True)
class RequestDelta:
    request_id: str
    a: dict[str, Any]
    b: dict[str, Any]
    changed: tuple[str, ...]


@dataclass(frozen=True)
class StepComparison:
    """Two traces compared step by step: where decisions differ, and why the first does."""

    config_differences: dict[str, tuple[Any, Any]]
    num_steps: tuple[int, int]
    classification: Classification
    first_decision_step: int | None
    decision_fields: tuple[str, ...]
    """The fields (`DECISION_FIELDS`, or `missing_step`) that differ at the first divergence."""
    first_input_step: int | None
    input_cause: str | None
    divergent_steps: list[int]
    """Every step whose decision differs or that one trace lacks, ascending."""
    divergent_fields: list[tuple[str, ...]]
    """The fields that differ at each of `divergent_steps` (`missing_step`: one lacks it)."""
    workload_differences: list[str]
    ignore_block_ids: bool

    @property
    def decisions_differ(self) -> bool:
        return self.first_decision_step is not None

    @property
    def identical(self) -> bool:
        return self.classification is Classification.IDENTICAL

    def next_divergence(self, step: int, *, forward: bool) -> int | None:
        """The divergent step after `step` (before it, going back), if any."""
        steps = self.divergent_steps
        if forward:
            index = bisect.bisect_right(steps, step)
            return steps[index] if index < len(steps) else None
        index = bisect.bisect_left(steps, step) - 1
        return steps[index] if index >= 0 else None

    def is_divergent(self, step: int) -> bool:
        return bool(self.fields_at(step))

    def fields_at(self, step: int) -> tuple[str, ...]:
        """The decision fields that differ at `step` (`missing_step`: one trace lacks it)."""
        return StepDifferences(self.divergent_steps, self.divergent_fields).at(step)

    @property
    def config_changes(self) -> str:
        """The knobs whose values differ, as `knob A -> B, ...` (empty when none)."""
        return ", ".join(f"{k} {a} -> {b}" for k, a, b in self.config_change_texts())

    def config_change_texts(self) -> list[tuple[str, str, str]]:
        """Each knob that differs, with its two values in words (`knob_text`)."""
        return [
            (k, knob_text(k, a), knob_text(k, b)) for k, (a, b) in self.config_differences.items()
        ]

    @property
    def headline(self) -> tuple[str, str]:
        """What the comparison found, in words: where the first divergence is, then its class."""
        if self.classification is Classification.IDENTICAL:
            return "identical: every step decided the same", ""
        if self.classification is Classification.INPUTS_ONLY:
            return (
                f"same decisions, different inputs from step {self.first_input_step} "
                f"({self.input_cause})",
                "",
            )
        where = f"first divergence at step {self.first_decision_step} "
        where += f"({', '.join(self.decision_fields)}): "
        if self.classification is Classification.INPUT:
            return (
                where,
                f"input — {self.input_cause} differed first, at step {self.first_input_step}",
            )
        if self.decision_fields == (MISSING_STEP,):
            return where, "decision — one trace ends there, with the same inputs until then"
        return where, "decision — same inputs, a different choice"


@dataclass(frozen=True)
class TraceDiff(StepComparison):
    """The step comparison, plus the first divergent step in full and what the runs changed."""

    a: Path
    b: Path
    first_step_detail: tuple[StepDetail, StepDetail] | None
    """The first divergent step as each trace holds it (`read_step`)."""
    request_deltas: list[RequestDelta]
    metrics: dict[str, tuple[Any, Any]]


def compare_steps(
    a: Trace, b: Trace, *, ignore_block_ids: bool = False, window: StepWindow = WHOLE
) -> StepComparison:
    """The per-step part of a diff over `window`, for views that show their own step
    details (the TUI). Over a window, the requests compared are those arriving in it."""
    fingerprints_a, fingerprints_b = fingerprints(a, b, window_bounds(window))
    names = [name for name in DECISION_FIELDS if not (ignore_block_ids and name == "block_ids")]
    divergent = step_differences(fingerprints_a, fingerprints_b, names)
    decision_step, fields = divergent.first()
    inputs = (_arriving_in(table, window) for table in on_both(_request_inputs, a, b))
    workload_differences, workload_step = _workload_differences(*inputs)
    input_step, cause = _first_input(fingerprints_a, fingerprints_b, workload_step)
    return StepComparison(
        config_differences=_config_differences(a.config, b.config),
        num_steps=(fingerprints_a.num_rows, fingerprints_b.num_rows),
        classification=_classify(decision_step, input_step),
        first_decision_step=decision_step,
        decision_fields=fields,
        first_input_step=input_step,
        input_cause=cause,
        divergent_steps=divergent.steps,
        divergent_fields=divergent.fields,
        workload_differences=workload_differences,
        ignore_block_ids=ignore_block_ids,
    )


def diff_traces(
    a_path: Path, b_path: Path, *, ignore_block_ids: bool = False, window: StepWindow = WHOLE
) -> TraceDiff:
    """The diff of two traces over `window` (its figures too: of its steps, and of the
    requests arriving in it)."""
    with open_trace(a_path) as a, open_trace(b_path) as b:
        steps = compare_steps(a, b, ignore_block_ids=ignore_block_ids, window=window)
        detail = None
        if steps.first_decision_step is not None:
            step = steps.first_decision_step
            detail = (read_step(a, step), read_step(b, step))
        outcomes, metrics = zip(
            *on_both(lambda trace: _run_facts(trace, window), a, b), strict=True
        )
        return TraceDiff(
            **vars(steps),
            a=a_path,
            b=b_path,
            first_step_detail=detail,
            request_deltas=_request_deltas(*outcomes),
            metrics=_metrics(*metrics),
        )


def _request_inputs(trace: Trace) -> pa.Table:
    """Each request's arrival step and a hash of its inputs."""
    return trace.sql(query("request_input_hashes")).to_arrow_table()


def _arriving_in(requests: pa.Table, window: StepWindow) -> pa.Table:
    """The rows of the requests arriving in `window`."""
    if window.whole:
        return requests
    low, high = window_bounds(window)
    arrival = requests["arrival_step"]
    return requests.filter(pc.and_(pc.greater_equal(arrival, low), pc.less_equal(arrival, high)))


def _run_facts(trace: Trace, window: StepWindow) -> tuple[pa.Table, dict[str, Any]]:
    """What a diff reads of one trace's run: each request's outcome, and the run's figures."""
    outcomes = trace.sql(query("request_outcomes"), list(window_bounds(window)))
    return outcomes.to_arrow_table(), run_metrics(trace, window)


def _first_input(
    a: pa.Table, b: pa.Table, workload_step: int | None
) -> tuple[int | None, str | None]:
    """The first step whose inputs differ: arrivals or aborts at it, or tokens sampled before it.

    A token sampled at step s first matters at step s + 1, and only counts when both
    traces scheduled the same rows at s (otherwise the decision differed first).
    """
    common = min(a.num_rows, b.num_rows)
    candidates: list[tuple[int, str]] = []
    if workload_step is not None:
        candidates.append((workload_step, "requests"))
    arrivals = pc.not_equal(a["inputs"].slice(0, common), b["inputs"].slice(0, common))
    steps = a["step"].slice(0, common)
    first_arrival = pc.filter(steps, arrivals).to_pylist()
    if first_arrival:
        candidates.append((first_arrival[0], "arrivals or aborts"))
    same_rows = pc.equal(a["decision"].slice(0, common), b["decision"].slice(0, common))
    tokens = pc.and_(
        same_rows, pc.not_equal(a["sampled"].slice(0, common), b["sampled"].slice(0, common))
    )
    first_tokens = pc.filter(steps, tokens).to_pylist()
    if first_tokens:
        candidates.append((first_tokens[0] + 1, f"sampled tokens (step {first_tokens[0]})"))
    if not candidates:
        return None, None
    step, cause = min(candidates)
    return step, cause


def _classify(decision_step: int | None, input_step: int | None) -> Classification:
    if decision_step is None:
        return Classification.IDENTICAL if input_step is None else Classification.INPUTS_ONLY
    if input_step is not None and input_step <= decision_step:
        return Classification.INPUT
    return Classification.DECISION


def _workload_differences(a: pa.Table, b: pa.Table) -> tuple[list[str], int | None]:
    """Requests whose inputs differ between the traces, and the earliest step one arrives."""
    if a.equals(b):
        return [], None
    a_rows, b_rows = _request_input_hashes(a), _request_input_hashes(b)
    differences = []
    arrival_steps: list[int] = []
    for request_id in sorted(a_rows.keys() | b_rows.keys()):
        mine, theirs = a_rows.get(request_id), b_rows.get(request_id)
        if mine == theirs:
            continue
        where = "only in A" if theirs is None else "only in B" if mine is None else "inputs differ"
        differences.append(f"{request_id}: {where}")
        arrival_steps.extend(row[0] for row in (mine, theirs) if row is not None)
    return differences, min(arrival_steps, default=None)


def _request_input_hashes(table: pa.Table) -> dict[str, tuple[int, int]]:
    """Each request's (arrival step, hash of its inputs), by id."""
    columns = [table[name].to_pylist() for name in ("request_id", "arrival_step", "inputs")]
    rows = zip(*columns, strict=True)
    return {request_id: (arrival, inputs) for request_id, arrival, inputs in rows}


def _config_differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The knobs whose values differ, but for how blocks are hashed (it decides nothing)."""
    knobs = sorted((a.keys() | b.keys()) - set(HASHING_KNOBS))
    return {k: (a.get(k), b.get(k)) for k in knobs if a.get(k) != b.get(k)}


_OUTCOME_FIELDS = ("finish_step", "finish_reason", "num_output_tokens", "ttft_steps",
                   "num_preemptions", "tpot_steps")  # fmt: skip


def _request_deltas(a: pa.Table, b: pa.Table) -> list[RequestDelta]:
    if a.equals(b):
        return []  # every request ended the same way in both

    def outcomes(table: pa.Table) -> dict[str, dict[str, Any]]:
        return {row["request_id"]: row for row in table.to_pylist()}

    mine, theirs = outcomes(a), outcomes(b)
    deltas = []
    for request_id in mine.keys() & theirs.keys():
        changed = tuple(f for f in _OUTCOME_FIELDS if mine[request_id][f] != theirs[request_id][f])
        if changed:
            deltas.append(RequestDelta(request_id, mine[request_id], theirs[request_id], changed))
    return sorted(deltas, key=lambda d: (d.a["arrival_step"], d.request_id))


def run_metrics(trace: Trace, window: StepWindow = WHOLE) -> dict[str, Any]:
    """The run's figures (`run_metrics.sql`) over `window`."""
    relation = trace.sql(query("run_metrics"), list(window_bounds(window)))
    return dict(zip(relation.columns, relation.fetchall()[0], strict=True))


def _metrics(mine: dict[str, Any], theirs: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {name: (mine[name], theirs[name]) for name in mine}
