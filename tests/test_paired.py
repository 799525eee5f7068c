"""The benchmarks' paired verdict (`benchmarks/paired.py`): a goal is shown met or missed only
when the whole interval says so, and otherwise the verdict says the loads cannot tell."""

from __future__ import annotations

import random
import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from paired import paired_ratio, verdict_at_least, verdict_at_most


def noisy_pairs(cost: float, noise: float, n: int, seed: int) -> tuple[list[float], list[float]]:
    """`n` loads of a baseline swinging by ±50 % from repeat to repeat, and the treated ones
    `cost` lower, each with its own `noise`."""
    rng = random.Random(seed)
    baseline, treated = [], []
    for _ in range(n):
        machine = rng.uniform(0.5, 1.5)  # what both loads of a repeat share
        baseline.append(4000 * machine * (1 + rng.gauss(0, noise)))
        treated.append(4000 * machine * (1 - cost) * (1 + rng.gauss(0, noise)))
    return baseline, treated


def test_pairing_takes_out_what_a_repeat_shares() -> None:
    """The repeats swing by ±50 %; the pairs' ratio does not."""
    ratio = paired_ratio(*noisy_pairs(cost=0.08, noise=0.002, n=16, seed=1))
    assert 0.91 < ratio.low <= ratio.median <= ratio.high < 0.93
    assert verdict_at_least(ratio, 0.99) == "missed"
    assert verdict_at_most(ratio, 1.05) == "ok"


def test_a_goal_the_interval_spans_is_not_shown() -> None:
    ratio = paired_ratio(*noisy_pairs(cost=0.01, noise=0.05, n=8, seed=2))
    assert ratio.low < 0.99 < ratio.high
    said = verdict_at_least(ratio, 0.99)
    assert said.startswith("not shown: about ") and said.endswith(" pairs of loads would tell")


def test_more_pairs_narrow_the_interval() -> None:
    few = paired_ratio(*noisy_pairs(cost=0.03, noise=0.03, n=8, seed=3))
    many = paired_ratio(*noisy_pairs(cost=0.03, noise=0.03, n=128, seed=3))
    assert many.high - many.low < (few.high - few.low) / 2
    assert verdict_at_least(many, 0.99) == "missed"


def test_the_same_loads_give_the_same_interval() -> None:
    loads = noisy_pairs(cost=0.02, noise=0.04, n=10, seed=4)
    assert paired_ratio(*loads) == paired_ratio(*loads)


def test_loads_that_do_not_pair_are_refused() -> None:
    with pytest.raises(ValueError, match="need pairs: 3 baseline and 2 treated"):
        paired_ratio([1.0, 2.0, 3.0], [1.0, 2.0])
