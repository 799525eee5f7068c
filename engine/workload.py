"""Workloads: the conformance suite's JSON format, loaded and validated.

    {"config": {...engine knobs...}, "max_steps": N, "description": "...",
     "requests": [{"id", "arrival_step", "prompt_token_ids", "output_token_ids",
                   "max_tokens", "priority", "eos_token_id"?, "arrival_time"?,
                   "min_tokens"?, "stop_token_ids"?, "abort_step"?,
                   "abort_before_update"?, "temperature"?, "top_k"?, "top_p"?,
                   "seed"?, "lora_id"?, "draft_mismatch_every"?, "draft_accept"?,
                   "grammar_ready_step"?}]}

An abort lands before the step's `schedule()`, or, with `abort_before_update`, after
it and before `update_from_output()`: where an abort that reaches vLLM while the
model runs lands (`EngineCore._process_aborts_queue`).

`output_token_ids` is the tape the scripted runner plays; a real model ignores it
and samples with `temperature` / `top_k` / `top_p` / `seed` instead.

A bad file raises `WorkloadError` naming the file, the line, the request and the
field; nothing is half-loaded.
"""

from __future__ import annotations

import dataclasses
import json
import json.scanner
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import EngineConfig
from .errors import ConfigError, WorkloadError
from .json_fields import MAX_SEED, MAX_TOKEN_ID, finite, request_id_problem
from .json_fields import FieldError as _FieldError
from .json_fields import int_field as _int_field
from .json_fields import number_field as _number_field
from .json_fields import optional_int as _optional_int
from .json_fields import reject_unknown as _reject_unknown
from .json_fields import short as _short
from .json_fields import token_ids as _token_ids
from .lora import LoRARequest
from .request import BlockHasher, Request
from .request_features import REQUEST_FEATURE_KEYS, FeatureError, with_features
from .sampling_params import SamplingParams
from .structured_output import StructuredOutputRequest

DEFAULT_MAX_STEPS = 1000

_TOP_KEYS = {"config", "requests", "max_steps", "description"}
_REQUEST_KEYS = {
    "id",
    "arrival_step",
    "prompt_token_ids",
    "output_token_ids",
    "max_tokens",
    "priority",
    "eos_token_id",
    "arrival_time",
    "min_tokens",
    "stop_token_ids",
    "abort_step",
    "abort_before_update",
    "temperature",
    "top_k",
    "top_p",
    "seed",
} | REQUEST_FEATURE_KEYS


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request of a workload: when it arrives, what it asks, what the tape says."""

    request_id: str
    arrival_step: int
    arrival_time: float
    prompt_token_ids: tuple[int, ...]
    output_token_ids: tuple[int, ...]
    sampling_params: SamplingParams
    priority: int = 0
    abort_step: int | None = None
    abort_before_update: bool = False
    """The abort lands after the step's `schedule()`, before its update."""
    lora_id: int | None = None
    draft_mismatch_every: int | None = None
    draft_accept: tuple[int, ...] | None = None
    grammar_ready_step: int | None = None

    def make_request(self, block_hasher: BlockHasher | None) -> Request:
        return Request(
            request_id=self.request_id,
            prompt_token_ids=list(self.prompt_token_ids),
            sampling_params=self.sampling_params,
            arrival_time=self.arrival_time,
            priority=self.priority,
            block_hasher=block_hasher,
            lora_request=None if self.lora_id is None else LoRARequest.for_adapter(self.lora_id),
            structured_output_request=(
                None if self.grammar_ready_step is None else StructuredOutputRequest()
            ),
        )


@dataclass(frozen=True, slots=True)
class Workload:
    config: EngineConfig
    requests: tuple[RequestSpec, ...]
    max_steps: int = DEFAULT_MAX_STEPS
    description: str = ""
    source: str = "<workload>"
    abort_order: tuple[str, ...] = ()
    """Request ids in the order their aborts took effect (a trace's); the rest follow in list
    order. vLLM frees the blocks of requests aborted in one call in that call's order."""

    def with_config(self, config: EngineConfig) -> Workload:
        return dataclasses.replace(self, config=config)

    def aborts_by_step(self, *, before_update: bool) -> dict[int, list[str]]:
        """Each step's aborts that land before its `schedule()` (or, with `before_update`,
        after it and before the update), in the order they take effect."""
        rank = {request_id: i for i, request_id in enumerate(self.abort_order)}
        aborted = [
            spec
            for spec in self.requests
            if spec.abort_step is not None and spec.abort_before_update == before_update
        ]
        aborted.sort(key=lambda spec: rank.get(spec.request_id, len(rank)))  # stable
        by_step: dict[int, list[str]] = {}
        for spec in aborted:
            assert spec.abort_step is not None
            by_step.setdefault(spec.abort_step, []).append(spec.request_id)
        return by_step


def parse_workload(text: str, source: str = "<workload>") -> Workload:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise WorkloadError(
            f"{source}:{error.lineno}:{error.colno}: invalid JSON: {error.msg}"
        ) from None
    except (ValueError, RecursionError) as error:  # an integer of 4,300+ digits; deep nesting
        reason = "nested too deeply" if isinstance(error, RecursionError) else error
        raise WorkloadError(f"{source}: invalid JSON: {reason}") from None
    try:
        return _workload_from_json(raw, source)
    except _FieldError as error:
        line = _line_of(text, error.path)
        where = f"{source}:{line}" if line else source
        raise WorkloadError(f"{where}: {_describe(raw, error.path)}: {error.message}") from None


def _describe(raw: Any, path: tuple[str | int, ...]) -> str:
    """`requests[3] (id 'r3'): max_tokens`, `config.block_size` or `top level`."""
    if not path:
        return "top level"
    if path[0] == "requests" and len(path) > 1 and isinstance(path[1], int):
        label = f"requests[{path[1]}]"
        item = raw["requests"][path[1]]
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            label += f" (id {_quoted_id(item['id'])})"
        return ": ".join([label, *map(str, path[2:])])
    return ".".join(map(str, path))


def _quoted_id(request_id: str, max_chars: int = 40) -> str:
    """The id as Python writes it (escapes shown), cut if long."""
    if len(request_id) <= max_chars:
        return repr(request_id)
    return f"{request_id[:max_chars]!r}… ({len(request_id):,} characters)"


def _workload_from_json(raw: Any, source: str) -> Workload:
    if not isinstance(raw, dict):
        raise _FieldError((), "a workload is a JSON object")
    _reject_unknown(raw, _TOP_KEYS, ())
    if not isinstance(raw.get("config"), dict):
        raise _FieldError(("config",), "required, a JSON object")
    try:
        config = EngineConfig.from_dict(raw["config"])
    except ConfigError as error:
        raise _FieldError(("config", error.key), error.message) from None
    requests = raw.get("requests")
    if not isinstance(requests, list):
        raise _FieldError(("requests",), "required, a JSON list")
    shared: dict[int, int] = {}  # each token id one int (`token_ids`)
    specs = tuple(
        _with_features(_request_from_json(item, index, shared), item, index, config)
        for index, item in enumerate(requests)
    )
    _reject_duplicate_ids(specs)
    max_steps = _int_field(raw, "max_steps", (), minimum=1, default=DEFAULT_MAX_STEPS)
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise _FieldError(("description",), "expected a string")
    return Workload(config, specs, max_steps, description, source)


def _request_from_json(item: Any, index: int, shared: dict[int, int]) -> RequestSpec:
    path: tuple[str | int, ...] = ("requests", index)
    if not isinstance(item, dict):
        raise _FieldError(path, "a request is a JSON object")
    if "id" not in item:
        raise _FieldError((*path, "id"), "required, a string")
    request_id = item["id"]
    if not isinstance(request_id, str):
        raise _FieldError((*path, "id"), f"expected a string, got {_short(request_id)}")
    problem = request_id_problem(request_id)
    if problem is not None:
        raise _FieldError((*path, "id"), problem)
    return _request_fields(item, index, request_id, shared)


def _request_fields(
    item: dict[str, Any], index: int, request_id: str, shared: dict[int, int]
) -> RequestSpec:
    path: tuple[str | int, ...] = ("requests", index)
    _reject_unknown(item, _REQUEST_KEYS, path)
    arrival_step = _int_field(item, "arrival_step", path, minimum=0, default=0)
    arrival_time = item.get("arrival_time")
    if arrival_time is None:
        arrival_time = arrival_step + 1e-6 * index
    elif isinstance(arrival_time, bool) or not isinstance(arrival_time, int | float):
        raise _FieldError((*path, "arrival_time"), "expected a number")
    elif not finite(arrival_time):
        raise _FieldError((*path, "arrival_time"), f"expected a finite number, got {arrival_time}")
    abort_step = _optional_int(item, "abort_step", path, minimum=arrival_step)
    abort_before_update = item.get("abort_before_update", False)
    if not isinstance(abort_before_update, bool):
        raise _FieldError((*path, "abort_before_update"), "expected true or false")
    if abort_before_update and abort_step is None:
        raise _FieldError((*path, "abort_before_update"), "needs abort_step")
    return RequestSpec(
        request_id=request_id,
        arrival_step=arrival_step,
        arrival_time=float(arrival_time),
        prompt_token_ids=_token_ids(item, "prompt_token_ids", path, required=True, shared=shared),
        output_token_ids=_token_ids(item, "output_token_ids", path, required=False, shared=shared),
        sampling_params=_sampling_params(item, path),
        priority=_int_field(item, "priority", path, default=0),
        abort_step=abort_step,
        abort_before_update=abort_before_update,
    )


def _with_features(
    spec: RequestSpec, item: dict[str, Any], index: int, config: EngineConfig
) -> RequestSpec:
    try:
        return with_features(spec, item, config)
    except FeatureError as error:
        raise _FieldError(("requests", index, error.key), error.message) from None


def _sampling_params(item: dict[str, Any], path: tuple[str | int, ...]) -> SamplingParams:
    max_tokens = _int_field(item, "max_tokens", path, minimum=1)
    min_tokens = _int_field(item, "min_tokens", path, minimum=0, default=0)
    if min_tokens > max_tokens:
        raise _FieldError((*path, "min_tokens"), f"must be at most max_tokens ({max_tokens})")
    eos_token_id = _optional_int(item, "eos_token_id", path, minimum=0, maximum=MAX_TOKEN_ID)
    stop_token_ids = _token_ids(item, "stop_token_ids", path, required=False)
    top_p = _number_field(item, "top_p", path, default=1.0)
    if not 0 < top_p <= 1:
        raise _FieldError((*path, "top_p"), f"must be in (0, 1], got {top_p}")
    return SamplingParams(
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        eos_token_id=eos_token_id,
        stop_token_ids=stop_token_ids,
        temperature=_number_field(item, "temperature", path, default=0.0, minimum=0.0),
        top_k=_int_field(item, "top_k", path, minimum=0, default=0),
        top_p=top_p,
        seed=_optional_int(item, "seed", path, minimum=0, maximum=MAX_SEED),
    )


def _reject_duplicate_ids(specs: tuple[RequestSpec, ...]) -> None:
    seen: set[str] = set()
    for index, spec in enumerate(specs):
        if spec.request_id in seen:
            raise _FieldError(
                ("requests", index, "id"), f"duplicate request id {spec.request_id!r}"
            )
        seen.add(spec.request_id)


def _line_of(text: str, path: tuple[str | int, ...]) -> int | None:
    """The line where the JSON value at `path` (or its nearest ancestor) starts."""
    try:
        lines: dict[tuple[str | int, ...], int] = {}
        _LineDecoder(lines).decode(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    for depth in range(len(path), -1, -1):
        if path[:depth] in lines:
            return lines[path[:depth]]
    return None


class _LineDecoder(json.JSONDecoder):
    """A pure-Python JSON decoder that records the line where each object or list starts.

    Only used to point at the line of a validation error.
    """

    def __init__(self, lines: dict[tuple[str | int, ...], int]) -> None:
        super().__init__()
        self._lines = lines
        # The stdlib's pure-Python parsers, which the C scanner does not expose.
        self.parse_object = self._located(json.decoder.JSONObject)  # type: ignore[attr-defined]
        self.parse_array = self._located(json.decoder.JSONArray)  # type: ignore[attr-defined]
        self.scan_once = json.scanner.py_make_scanner(self)  # type: ignore[attr-defined]

    def decode(self, s: str, *args: Any, **kwargs: Any) -> Any:
        value = super().decode(s)
        self._record(value, ())
        return value

    @staticmethod
    def _located(parse: Callable[..., Any]) -> Callable[..., Any]:
        def parse_located(s_and_end: tuple[str, int], *args: Any) -> tuple[Any, int]:
            text, start = s_and_end
            value, end = parse(s_and_end, *args)
            return _Located(value, text.count("\n", 0, start) + 1), end

        return parse_located

    def _record(self, value: Any, path: tuple[str | int, ...]) -> None:
        if not isinstance(value, _Located):
            return
        self._lines[path] = value.line
        inner = value.value
        children = inner.items() if isinstance(inner, dict) else enumerate(inner)
        for key, child in children:
            self._record(child, (*path, key))


class _Located:
    __slots__ = ("line", "value")

    def __init__(self, value: Any, line: int) -> None:
        self.value = value
        self.line = line
