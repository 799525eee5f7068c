"""The Pareto front of a sweep's points, the objectives that define it, and ranking by one."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from stepscope.engine import InputError
from stepscope.replay.sweep.pareto import (
    Objective,
    costs,
    dominates,
    pareto_front,
    parse_objective,
    parse_objectives,
    ranked,
)

COLUMNS = ("num_blocks", "ttft_p99_steps", "tokens_per_step", "num_preemptions", "num_finished")

values = st.one_of(st.none(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False))
objectives = st.lists(
    st.builds(Objective, st.sampled_from(["a", "b", "c"]), st.booleans()),
    min_size=1,
    max_size=3,
    unique_by=lambda o: o.column,
)
rows = st.lists(st.fixed_dictionaries({"a": values, "b": values, "c": values}), max_size=30)


@given(rows, objectives)
def test_no_point_on_the_front_is_dominated_and_every_point_off_it_is_by_one_on_it(
    points: list[dict[str, Any]], chosen: list[Objective]
) -> None:
    front = pareto_front(points, chosen)
    all_costs = costs(points, chosen)
    on_front = [all_costs[f] for f in front]
    for index, mine in enumerate(all_costs):
        if index in front:
            assert mine is not None
            assert not any(other is not None and dominates(other, mine) for other in all_costs)
        elif mine is not None:  # a NULL objective: not comparable, never on the front
            assert any(theirs is not None and dominates(theirs, mine) for theirs in on_front)


def test_maximizing_flips_which_end_is_better() -> None:
    points = [{"x": 1.0, "y": 1.0}, {"x": 2.0, "y": 2.0}, {"x": 1.0, "y": 2.0}]
    assert pareto_front(
        points, [Objective("x", maximize=False), Objective("y", maximize=True)]
    ) == {2}
    assert pareto_front(points, [Objective("x", maximize=True), Objective("y", maximize=True)]) == {
        1
    }
    assert pareto_front(
        points, [Objective("x", maximize=False), Objective("y", maximize=False)]
    ) == {0}


def test_equal_points_are_both_on_the_front() -> None:
    points = [{"x": 1, "y": 3}, {"x": 1, "y": 3}, {"x": 2, "y": 4}]
    assert pareto_front(
        points, [Objective("x", maximize=False), Objective("y", maximize=False)]
    ) == {0, 1}


def test_a_bare_column_takes_its_natural_direction() -> None:
    assert parse_objective("ttft_p99_steps", COLUMNS) == Objective("ttft_p99_steps", maximize=False)
    assert parse_objective("tokens_per_step", COLUMNS) == Objective(
        "tokens_per_step", maximize=True
    )
    assert parse_objective("num_finished", COLUMNS).maximize
    assert parse_objective("num_blocks", COLUMNS) == Objective("num_blocks", maximize=False)


def test_min_and_max_say_the_direction() -> None:
    assert parse_objective("max:num_blocks", COLUMNS) == Objective("num_blocks", maximize=True)
    assert parse_objective("min:tokens_per_step", COLUMNS) == Objective(
        "tokens_per_step", maximize=False
    )
    assert parse_objectives("ttft_p99_steps:tokens_per_step", COLUMNS) == (
        Objective("ttft_p99_steps", maximize=False),
        Objective("tokens_per_step", maximize=True),
    )
    assert parse_objectives("max:num_blocks:min:num_preemptions", COLUMNS) == (
        Objective("num_blocks", maximize=True),
        Objective("num_preemptions", maximize=False),
    )
    assert parse_objectives("num_blocks:max:num_preemptions", COLUMNS)[1].maximize


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ttft_p99", "no numeric column 'ttft_p99'; one of: num_blocks, ttft_p99_steps"),
        ("up:num_blocks", "objective 'up': no numeric column 'up'"),
        ("num_blocks:max", "a direction with no column after it"),
        ("", "no numeric column ''"),
    ],
)
def test_a_bad_objective_is_one_line_naming_it(text: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        parse_objectives(text, COLUMNS)


def test_a_direction_is_min_or_max() -> None:
    with pytest.raises(InputError, match=re.escape("'up:num_blocks': expected [min:|max:]COLUMN")):
        parse_objective("up:num_blocks", COLUMNS)


def test_ranking_is_best_first_with_nulls_last_and_ties_in_point_order() -> None:
    points = [
        {"point": 0, "t": 5.0},
        {"point": 1, "t": None},
        {"point": 2, "t": 1.0},
        {"point": 3, "t": 5.0},
    ]
    assert ranked(points, Objective("t", maximize=False)) == [2, 0, 3, 1]
    assert ranked(points, Objective("t", maximize=True)) == [0, 3, 2, 1]
