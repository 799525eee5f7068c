"""A TOML synthetic-workload description turned into the same `Workload` the JSON loader makes.

Each aspect (arrivals, prefixes, lengths, tokens, priorities) draws from its own
stream seeded from `seed`, so changing one distribution leaves the others' draws
as they were. Scripted outputs (the tape) avoid EOS and stop ids, so a tape run
ends each request at `max_tokens`.
"""

from __future__ import annotations

import random
import re
import tomllib
from collections.abc import Container

from ..errors import WorkloadError
from ..sampling_params import SamplingParams
from ..workload import DEFAULT_MAX_STEPS, RequestSpec, Workload
from .spec import SyntheticSpec, parse_spec
from .toml_reader import SpecError, key_name, line_of

_STREAMS = (
    "arrivals",
    "prefixes",
    "groups",
    "prompt_len",
    "prompt_tokens",
    "output_len",
    "output_tokens",
    "priorities",
    "lora",
    "grammar",
)


def parse_toml_workload(text: str, source: str = "<workload>") -> Workload:
    """Validate a TOML description and generate its workload; errors name file, line and key."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise WorkloadError(_toml_syntax_error(source, str(error))) from None
    try:
        spec = parse_spec(raw, DEFAULT_MAX_STEPS)
    except SpecError as error:
        line = line_of(text, error.path)
        where = f"{source}:{line}" if line else source
        raise WorkloadError(f"{where}: {key_name(error.path)}: {error.message}") from None
    return generate_workload(spec, source)


def _toml_syntax_error(source: str, message: str) -> str:
    located = re.fullmatch(r"(.*) \(at line (\d+), column (\d+)\)", message)
    if located is None:
        return f"{source}: invalid TOML: {message}"
    text, line, column = located.groups()
    return f"{source}:{line}:{column}: invalid TOML: {text}"


def generate_workload(spec: SyntheticSpec, source: str = "<synthetic>") -> Workload:
    streams = {name: random.Random(f"{spec.seed}:{name}") for name in _STREAMS}
    # One int object per token id drawn, shared by every request: a long workload's
    # tokens then cost a pointer each, not an object each.
    vocabulary: dict[int, int] = {}
    arrival_steps = spec.arrivals.arrival_steps(streams["arrivals"], spec.num_requests)
    prefixes = [
        _token_ids(streams["prefixes"], group.prefix_len, vocabulary, spec)
        for group in spec.prefix_groups
    ]
    requests = tuple(
        _request(spec, index, arrival_step, streams, prefixes, vocabulary)
        for index, arrival_step in enumerate(arrival_steps)
    )
    return Workload(spec.config, requests, spec.max_steps, spec.description, source)


def _request(
    spec: SyntheticSpec,
    index: int,
    arrival_step: int,
    streams: dict[str, random.Random],
    prefixes: list[tuple[int, ...]],
    vocabulary: dict[int, int],
) -> RequestSpec:
    prefix = _pick_prefix(streams["groups"], spec, prefixes)
    own_len = spec.prompt_len.sample(streams["prompt_len"])
    own_len = max(1, min(own_len, spec.config.max_model_len - 1 - len(prefix)))
    max_tokens = spec.output_len.sample(streams["output_len"])
    sampling = spec.sampling
    stopping = {sampling.eos_token_id, *sampling.stop_token_ids}
    features = spec.features.draw(arrival_step, streams["lora"], streams["grammar"])
    return RequestSpec(
        request_id=f"{spec.id_prefix}{index}",
        arrival_step=arrival_step,
        arrival_time=arrival_step + 1e-6 * index,
        prompt_token_ids=prefix + _token_ids(streams["prompt_tokens"], own_len, vocabulary, spec),
        output_token_ids=_token_ids(
            streams["output_tokens"], max_tokens, vocabulary, spec, stopping
        ),
        sampling_params=SamplingParams(
            max_tokens=max_tokens,
            eos_token_id=sampling.eos_token_id,
            stop_token_ids=sampling.stop_token_ids,
            temperature=sampling.temperature,
            top_k=sampling.top_k,
            top_p=sampling.top_p,
            seed=None if sampling.seed is None else sampling.seed + index,
        ),
        priority=streams["priorities"].choices(spec.priority_values, spec.priority_weights)[0],
        lora_id=features.lora_id,
        draft_mismatch_every=features.draft_mismatch_every,
        draft_accept=features.draft_accept,
        grammar_ready_step=features.grammar_ready_step,
    )


def _pick_prefix(
    rng: random.Random, spec: SyntheticSpec, prefixes: list[tuple[int, ...]]
) -> tuple[int, ...]:
    draw, cumulative = rng.random(), 0.0
    for group, prefix in zip(spec.prefix_groups, prefixes, strict=True):
        cumulative += group.share
        if draw < cumulative:
            return prefix
    return ()


def _token_ids(
    rng: random.Random,
    count: int,
    vocabulary: dict[int, int],
    spec: SyntheticSpec,
    excluded: Container[int | None] = (),
) -> tuple[int, ...]:
    token_ids: list[int] = []
    while len(token_ids) < count:
        token_id = rng.randrange(spec.first_token_id, spec.vocab_size)
        if token_id not in excluded:
            token_ids.append(vocabulary.setdefault(token_id, token_id))
    return tuple(token_ids)
