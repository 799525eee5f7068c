"""A sweep's grid: every combination of the knob values given, each checked on the trace's config.

Points are numbered in grid order, the last knob varying fastest (`itertools.product`). Every
value, and then every combination, is validated as `--set` validates it before a replay
starts, so a bad grid fails in a moment with a line naming the knob and value.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from stepscope.engine import EngineConfig, InputError
from stepscope.engine.errors import ConfigError

from .metrics import METRIC_TYPES

RESERVED_COLUMNS = frozenset({"point", "kept_trace", *METRIC_TYPES})


@dataclass(frozen=True)
class SweepPoint:
    """One grid point: the knobs its what-if sets, as `--set` would pass them."""

    index: int
    knobs: dict[str, Any]

    @property
    def label(self) -> str:
        return " ".join(f"{name}={value_text(value)}" for name, value in self.knobs.items())


@dataclass(frozen=True)
class SweepGrid:
    values: dict[str, tuple[Any, ...]]
    """Each knob's values in the order given, as the config holds them (an enum by its value)."""
    points: tuple[SweepPoint, ...]
    columns: tuple[dict[str, Any], ...]
    """Each point's knob values as the config holds them: its `sweep_points` knob columns."""

    def column_types(self) -> dict[str, pa.DataType]:
        """Each knob column's natural type, from the values the config took."""
        return {name: _arrow_type(values) for name, values in self.values.items()}

    def to_json(self) -> str:
        return json.dumps({name: list(values) for name, values in self.values.items()})


def build_grid(base: EngineConfig, values: Mapping[str, Sequence[Any]]) -> SweepGrid:
    """The grid over `base` (the trace's config); InputError names the first bad value."""
    for name, options in values.items():
        for value in options:
            _configure(base, {name: value}, f"--grid {name}={value_text(value)}")
    names = list(values)
    points, columns = [], []
    for index, combination in enumerate(itertools.product(*values.values())):
        point = SweepPoint(index, dict(zip(names, combination, strict=True)))
        where = f"--grid point {index} ({point.label})"
        config = _configure(base, point.knobs, where).to_dict()
        points.append(point)
        columns.append({name: config[name] for name in names})
    typed = {name: tuple(dict.fromkeys(row[name] for row in columns)) for name in names}
    return SweepGrid(typed, tuple(points), tuple(columns))


def value_text(value: Any) -> str:
    """A knob value as it was typed: strings bare, the rest as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _configure(base: EngineConfig, knobs: Mapping[str, Any], where: str) -> EngineConfig:
    clash = sorted(RESERVED_COLUMNS & knobs.keys())
    if clash:
        raise InputError(f"--grid {clash[0]}: a result column has that name, not a knob")
    try:
        return base.with_knobs(knobs)
    except ConfigError as error:
        if error.message.startswith("unknown knob"):
            raise InputError(f"--grid {error.key}: {error.message}") from None
        raise InputError(f"{where}: config.{error.key}: {error.message}") from None


def _arrow_type(values: Sequence[Any]) -> pa.DataType:
    present = [value for value in values if value is not None]
    if present and all(isinstance(value, bool) for value in present):
        return pa.bool_()
    if present and all(isinstance(value, int) for value in present):
        return pa.int64()
    if present and all(isinstance(value, int | float) for value in present):
        return pa.float64()
    return pa.string()
