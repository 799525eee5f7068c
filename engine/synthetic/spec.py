"""The TOML description of a synthetic workload, validated into a `SyntheticSpec`.

description = "..."        # optional
seed = 0                   # every draw below is seeded from it
num_requests = 40
max_steps = 1000           # optional
vocab_size = 32000         # prompt and tape token ids lie in [first_token_id, vocab_size)
first_token_id = 3         # optional
id_prefix = "r"            # request ids r0, r1, ...
[config]                   # engine knobs, as in the JSON workload format
[arrivals]                 # process = "poisson" (rate) | "burst" (size, every)
                               #   | "constant" (interval)
[prompt_len]               # each request's own prompt tokens, after any shared prefix
[output_len]               # max_tokens, and the length of the scripted tape
    # distribution = "fixed" (value) | "uniform" (min, max) | "lognormal" (mean, sigma, min?, max?)
[[prefix_groups]]          # share = fraction of requests, prefix_len = shared prefix tokens
[priorities]               # values = [...], weights = [...] (optional)
[sampling]                 # eos_token_id, stop_token_ids, temperature, top_k, top_p, seed
[drafts] [lora] [grammar]  # optional features (`features.py`)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import EngineConfig
from ..errors import ConfigError
from .distributions import (
    ArrivalProcess,
    BurstArrivals,
    ConstantArrivals,
    FixedLength,
    LengthDistribution,
    LognormalLength,
    PoissonArrivals,
    UniformLength,
)
from .features import FEATURE_TABLES, NO_FEATURES, FeatureSpec, parse_features
from .toml_reader import TableReader

_TOP_KEYS = {
    "description",
    "seed",
    "num_requests",
    "max_steps",
    "vocab_size",
    "first_token_id",
    "id_prefix",
    "config",
    "arrivals",
    "prompt_len",
    "output_len",
    "prefix_groups",
    "priorities",
    "sampling",
    *FEATURE_TABLES,
}
_SAMPLING_KEYS = {"eos_token_id", "stop_token_ids", "temperature", "top_k", "top_p", "seed"}


@dataclass(frozen=True, slots=True)
class PrefixGroup:
    """A `share` of the requests whose prompts start with the same `prefix_len` tokens."""

    share: float
    prefix_len: int


@dataclass(frozen=True, slots=True)
class SamplingSpec:
    """Sampling params every request gets; request i's seed is `seed + i`."""

    eos_token_id: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    config: EngineConfig
    num_requests: int
    seed: int
    arrivals: ArrivalProcess
    prompt_len: LengthDistribution
    output_len: LengthDistribution
    prefix_groups: tuple[PrefixGroup, ...]
    priority_values: tuple[int, ...]
    priority_weights: tuple[float, ...]
    sampling: SamplingSpec
    vocab_size: int
    first_token_id: int
    id_prefix: str
    max_steps: int
    description: str
    features: FeatureSpec = NO_FEATURES


def parse_spec(raw: dict[str, Any], default_max_steps: int) -> SyntheticSpec:
    top = TableReader(raw)
    top.reject_unknown(_TOP_KEYS)
    config = _engine_config(top.required_table("config"))
    vocab_size = top.integer("vocab_size", 32000, minimum=2)
    first_token_id = top.integer("first_token_id", 3, minimum=0)
    if first_token_id >= vocab_size:
        raise top.error("first_token_id", f"must be below vocab_size {vocab_size}")
    values, weights = _priorities(top.table("priorities"))
    return SyntheticSpec(
        config=config,
        num_requests=top.integer("num_requests", minimum=1),
        seed=top.integer("seed", 0),
        arrivals=_arrivals(top.required_table("arrivals")),
        prompt_len=_length(top.required_table("prompt_len"), minimum=1),
        output_len=_length(top.required_table("output_len"), minimum=1),
        prefix_groups=_prefix_groups(top, config.max_model_len),
        priority_values=values,
        priority_weights=weights,
        sampling=_sampling(top.table("sampling"), first_token_id, vocab_size),
        vocab_size=vocab_size,
        first_token_id=first_token_id,
        id_prefix=top.string("id_prefix", "r"),
        max_steps=top.integer("max_steps", default_max_steps, minimum=1),
        description=top.string("description", ""),
        features=parse_features(top, config),
    )


def _engine_config(table: TableReader) -> EngineConfig:
    try:
        return EngineConfig.from_dict(table.raw)
    except ConfigError as error:
        raise table.error(error.key, error.message) from None


def _arrivals(table: TableReader) -> ArrivalProcess:
    process = table.choice("process", ("poisson", "burst", "constant"))
    if process == "poisson":
        table.reject_unknown({"process", "rate"})
        return PoissonArrivals(rate=table.number("rate", positive=True))
    if process == "burst":
        table.reject_unknown({"process", "size", "every"})
        return BurstArrivals(
            size=table.integer("size", minimum=1), every=table.integer("every", minimum=1)
        )
    table.reject_unknown({"process", "interval"})
    return ConstantArrivals(interval=table.number("interval", minimum=0.0))


def _length(table: TableReader, minimum: int) -> LengthDistribution:
    distribution = table.choice("distribution", ("fixed", "uniform", "lognormal"))
    if distribution == "fixed":
        table.reject_unknown({"distribution", "value"})
        return FixedLength(table.integer("value", minimum=minimum))
    if distribution == "uniform":
        table.reject_unknown({"distribution", "min", "max"})
        low = table.integer("min", minimum=minimum)
        return UniformLength(low, table.integer("max", minimum=low))
    table.reject_unknown({"distribution", "mean", "sigma", "min", "max"})
    low = table.integer("min", minimum, minimum=minimum)
    return LognormalLength(
        mean=table.number("mean", positive=True),
        sigma=table.number("sigma", minimum=0.0),
        minimum=low,
        maximum=table.optional_integer("max", minimum=low),
    )


def _prefix_groups(top: TableReader, max_model_len: int) -> tuple[PrefixGroup, ...]:
    groups = []
    total_share = 0.0
    for table in top.array_of_tables("prefix_groups"):
        table.reject_unknown({"share", "prefix_len"})
        share = table.number("share", positive=True)
        total_share += share
        if total_share > 1 + 1e-9:
            raise table.error("share", f"shares add up to {total_share:g}, more than 1")
        prefix_len = table.integer("prefix_len", minimum=1)
        if prefix_len > max_model_len - 2:
            raise table.error(
                "prefix_len",
                f"must be at most max_model_len - 2 = {max_model_len - 2} "
                "(a prompt is shorter than max_model_len and has a token of its own)",
            )
        groups.append(PrefixGroup(share, prefix_len))
    return tuple(groups)


def _priorities(table: TableReader | None) -> tuple[tuple[int, ...], tuple[float, ...]]:
    if table is None:
        return (0,), (1.0,)
    table.reject_unknown({"values", "weights"})
    values = table.integers("values")
    if not values:
        raise table.error("values", "required, a non-empty list of integers")
    weights = (
        table.numbers("weights", minimum=0.0) if table.has("weights") else (1.0,) * len(values)
    )
    if len(weights) != len(values):
        raise table.error("weights", f"needs one weight per value ({len(values)})")
    if sum(weights) <= 0:
        raise table.error("weights", "must not all be 0")
    return values, weights


def _sampling(table: TableReader | None, first_token_id: int, vocab_size: int) -> SamplingSpec:
    if table is None:
        return SamplingSpec()
    table.reject_unknown(_SAMPLING_KEYS)
    top_p = table.number("top_p", 1.0, positive=True)
    if top_p > 1:
        raise table.error("top_p", f"must be in (0, 1], got {top_p}")
    eos_token_id = table.optional_integer("eos_token_id", minimum=0)
    if eos_token_id is not None and eos_token_id >= vocab_size:
        raise table.error("eos_token_id", f"must be below vocab_size {vocab_size}")
    stop_token_ids = table.integers("stop_token_ids", minimum=0)
    stopping = {eos_token_id, *stop_token_ids}
    if all(token_id in stopping for token_id in range(first_token_id, vocab_size)):
        raise table.error("stop_token_ids", "leave no token id for the scripted outputs")
    return SamplingSpec(
        eos_token_id=eos_token_id,
        stop_token_ids=stop_token_ids,
        temperature=table.number("temperature", 0.0, minimum=0.0),
        top_k=table.integer("top_k", 0, minimum=0),
        top_p=top_p,
        seed=table.optional_integer("seed", minimum=0),
    )
