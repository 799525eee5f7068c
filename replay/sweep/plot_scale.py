"""One plot axis: round tick values around the data and the mapping of a value onto it.

The terminal plot and the SVG share it, so both draw the same ticks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_TICKS = 6


@dataclass(frozen=True)
class Axis:
    low: float
    high: float
    ticks: tuple[float, ...]

    def fraction(self, value: float) -> float:
        """Where `value` lies between the axis's ends, 0 at `low` and 1 at `high`."""
        return (value - self.low) / (self.high - self.low)

    def labels(self) -> tuple[str, ...]:
        return tuple(tick_label(tick, self.step) for tick in self.ticks)

    @property
    def step(self) -> float:
        return self.ticks[1] - self.ticks[0] if len(self.ticks) > 1 else 1.0


def axis(values: list[float], max_ticks: int = MAX_TICKS) -> Axis:
    """An axis from a round tick at or below the least value to one at or above the greatest."""
    low, high = min(values), max(values)
    if low == high:
        pad = abs(low) * 0.1 or 1.0
        low, high = low - pad, high + pad
    step = _round_step((high - low) / max(1, max_ticks - 1))
    first, last = math.floor(low / step), math.ceil(high / step)
    ticks = tuple(_clean(i * step) for i in range(first, last + 1))
    return Axis(ticks[0], ticks[-1], ticks)


def _round_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5 and 5 times a power of ten that is at least `raw`."""
    power = 10.0 ** math.floor(math.log10(raw))
    for factor in (1.0, 2.0, 2.5, 5.0, 10.0):
        if factor * power >= raw * (1 - 1e-9):
            return factor * power
    return 10.0 * power


def _clean(value: float) -> float:
    """The value without the float noise of a multiplication (0.30000000000000004 → 0.3)."""
    return float(f"{value:.12g}")


def tick_label(value: float, step: float) -> str:
    """A tick as short as its step allows: `64`, `0.25`, `2250`, `150k`, `2M`."""
    for divisor, suffix, from_value in ((1e6, "M", 1e7), (1e3, "k", 1e5)):
        if abs(value) >= from_value and step >= divisor / 10:
            return _decimals(value / divisor, step / divisor) + suffix
    return _decimals(value, step)


def _decimals(value: float, step: float) -> str:
    """The value with as many decimals as the step needs (0.25 → two)."""
    places = next(
        (p for p in range(7) if abs(step * 10**p - round(step * 10**p)) < 1e-6 * 10**p), 6
    )
    return f"{value:.{places}f}"
