"""Whether alternating loads show a goal met: a paired ratio, its bootstrap interval, a verdict.

A benchmark that alternates two variants (a server recording and one not, a repeat at a
time) pairs each load of one with the load of the other in the same repeat. The ratio of
each pair takes out what the two shared (the machine's state over that repeat); the
median of the ratios is the estimate, and resampling the pairs gives an interval for it.
A goal is shown met only when the whole interval meets it, and shown missed only when
none of it does; otherwise the loads cannot tell, and the verdict says about how many
repeats could.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

RESAMPLES = 10_000
LEVEL = 0.95


@dataclass(frozen=True)
class PairedRatio:
    """The median of `treated / baseline` over paired loads, and its bootstrap interval."""

    median: float
    low: float
    high: float
    num_pairs: int


def paired_ratio(
    baseline: Sequence[float],
    treated: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = 0,
) -> PairedRatio:
    """`treated[i] / baseline[i]` for each pair: their median and its percentile interval
    (the pairs resampled with replacement `resamples` times, seeded: the same loads give the
    same interval)."""
    if len(baseline) != len(treated) or not baseline:
        raise ValueError(f"need pairs: {len(baseline)} baseline and {len(treated)} treated")
    ratios = [t / b for b, t in zip(baseline, treated, strict=True)]
    rng = random.Random(seed)
    medians = sorted(
        statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(resamples)
    )
    tail = (1 - level) / 2
    low = medians[int(tail * (resamples - 1))]
    high = medians[int((1 - tail) * (resamples - 1))]
    return PairedRatio(statistics.median(ratios), low, high, len(ratios))


def verdict_at_most(ratio: PairedRatio, goal: float) -> str:
    """Whether the loads show `ratio ≤ goal`: "ok", "missed", or "not shown" with about
    how many pairs would tell (`_not_shown`)."""
    if ratio.high <= goal:
        return "ok"
    if ratio.low > goal:
        return "missed"
    return _not_shown(ratio, goal)


def verdict_at_least(ratio: PairedRatio, goal: float) -> str:
    """Whether the loads show `ratio ≥ goal`: "ok", "missed", or "not shown"."""
    if ratio.low >= goal:
        return "ok"
    if ratio.high < goal:
        return "missed"
    return _not_shown(ratio, goal)


def _not_shown(ratio: PairedRatio, goal: float) -> str:
    """The interval spans the goal: about how many pairs would put it on one side (an
    interval narrows as one over the root of the pairs, if their spread stays as it is)."""
    distance = abs(ratio.median - goal)
    if distance == 0:
        return "not shown: the estimate is the goal itself"
    half_width = (ratio.high - ratio.low) / 2
    needed = ratio.num_pairs * (half_width / distance) ** 2
    return f"not shown: about {needed:,.0f} pairs of loads would tell"
