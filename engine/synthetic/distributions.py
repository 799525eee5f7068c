"""Seeded draws of prompt and output lengths, and of arrival steps."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ..memory_limit import INT32_MAX


@dataclass(frozen=True, slots=True)
class FixedLength:
    value: int

    def sample(self, rng: random.Random) -> int:
        return self.value

    def mean_length(self) -> float:
        return self.value


@dataclass(frozen=True, slots=True)
class UniformLength:
    """Every length in `[minimum, maximum]` equally likely."""

    minimum: int
    maximum: int

    def sample(self, rng: random.Random) -> int:
        return rng.randint(self.minimum, self.maximum)

    def mean_length(self) -> float:
        return (self.minimum + self.maximum) / 2


@dataclass(frozen=True, slots=True)
class LognormalLength:
    """Lognormal with the given mean and log-space `sigma`, rounded and clamped."""

    mean: float
    sigma: float
    minimum: int = 1
    maximum: int | None = None

    def sample(self, rng: random.Random) -> int:
        mu = math.log(self.mean) - self.sigma**2 / 2
        length = max(self.minimum, round(rng.lognormvariate(mu, self.sigma)))
        return min(length, INT32_MAX if self.maximum is None else self.maximum)

    def mean_length(self) -> float:
        length = max(self.mean, self.minimum)
        return length if self.maximum is None else min(length, self.maximum)


LengthDistribution = FixedLength | UniformLength | LognormalLength


@dataclass(frozen=True, slots=True)
class PoissonArrivals:
    """Exponential gaps with `rate` requests per step on average; the first at step 0."""

    rate: float

    def arrival_steps(self, rng: random.Random, num_requests: int) -> list[int]:
        steps, time = [], 0.0
        for _ in range(num_requests):
            steps.append(math.floor(time))
            time += rng.expovariate(self.rate)
        return steps


@dataclass(frozen=True, slots=True)
class BurstArrivals:
    """`size` requests together every `every` steps."""

    size: int
    every: int

    def arrival_steps(self, rng: random.Random, num_requests: int) -> list[int]:
        return [(index // self.size) * self.every for index in range(num_requests)]


@dataclass(frozen=True, slots=True)
class ConstantArrivals:
    """One request every `interval` steps (0: all at step 0)."""

    interval: float

    def arrival_steps(self, rng: random.Random, num_requests: int) -> list[int]:
        return [math.floor(index * self.interval) for index in range(num_requests)]


ArrivalProcess = PoissonArrivals | BurstArrivals | ConstantArrivals
