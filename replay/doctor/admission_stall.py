"""`admission_stall`: requests waiting, token budget left and blocks free, and nothing
admitted for many steps in a row (vllm#53130: admission that stops while `/health` stays
green). Why the waiting pass stopped says which limit held it."""

from __future__ import annotations

from typing import Any

from .candidates import chunked_prefill, more_loras, more_seqs, shorter_prefill_interval
from .examined import Examined
from .finding import Finding, Severity, span

KIND = "admission_stall"

STALL_STEPS = 20
"""Consecutive steps without an admission that make a stall: a burst waiting out one
decode wave at max_num_seqs clears within a few steps; twenty is a limit that holds."""

CRITICAL_STEPS = 200
"""A stall this long is an outage for the requests waiting: minutes on a slow model."""


def admission_stall(examined: Examined) -> list[Finding]:
    """One finding for all the runs of stalled steps long enough; the longest is named."""
    runs = [row for row in examined.rows("doctor_admission_stall")
            if row["num_steps"] >= STALL_STEPS]  # fmt: skip
    if not runs:
        return []
    longest = runs[0]
    stops = sorted({stop for row in runs for stop in row["admission_stops"]})
    num_steps = sum(row["num_steps"] for row in runs)
    summary = (
        f"nothing admitted for {num_steps} steps in {len(runs)} run(s) of {STALL_STEPS}+ "
        f"(the longest {longest['num_steps']}, steps {longest['first_step']}.."
        f"{longest['last_step']}, up to {longest['max_waiting']} request(s) waiting) while "
        f"budget and blocks were free; the waiting pass stopped on {', '.join(stops)}"
    )
    return [
        Finding(
            kind=KIND,
            severity=Severity.by(longest["num_steps"], CRITICAL_STEPS),
            summary=summary,
            steps=span(runs),
            requests=(),
            cost={"steps_stalled": num_steps, "num_runs": len(runs),
                  "longest_run_steps": longest["num_steps"],
                  "max_waiting": max(r["max_waiting"] for r in runs)},
            evidence=examined.evidence(
                KIND, from_step=longest["first_step"], to_step=longest["last_step"]
            ),
            candidates=_candidates(examined, stops),
            target="ttft_mean_steps",
        )
    ]  # fmt: skip


def _candidates(examined: Examined, stops: list[str]) -> tuple[dict[str, Any], ...]:
    """The limits the stall's stops name: running requests, chunking, then the adapters
    (a pass that skipped every waiting request for its adapter stops as `no_waiting`)."""
    config = examined.config
    found: list[dict[str, Any]] = []
    if "max_num_seqs" in stops:
        found += more_seqs(config)
    if "chunking_off" in stops:
        found += chunked_prefill(config)
    if "no_waiting" in stops:
        found += more_loras(config)
    if "prefill_held" in stops:
        found += shorter_prefill_interval(config)
    return tuple(found)
