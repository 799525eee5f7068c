"""Typed reads of a workload's JSON values: each bad value raises `FieldError` at its path.

Integers default to the range a trace's INTEGER columns hold, numbers must be finite,
and request ids must be short and free of characters that hide or rewrite text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .memory_limit import INT32_MAX

MAX_TOKEN_ID = 2**63 - 1
MAX_SEED = 2**63 - 1
MAX_REQUEST_ID_CHARS = 1024
"""Longer ids are not ids (vLLM's are ~40 characters) and make every view of them slow."""
ID_REFUSED_CHARS = {
    "\x00": "a NUL",
    **{chr(c): "a bidi control" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))},
}
"""Characters an id may not hold: NUL ends C strings, bidi controls make text lie."""


class FieldError(ValueError):
    """A validation failure at a JSON path such as ("requests", 3, "max_tokens")."""

    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def reject_unknown(obj: Mapping[str, Any], known: set[str], path: tuple[str | int, ...]) -> None:
    unknown = sorted(set(obj) - known)
    if unknown:
        raise FieldError((*path, unknown[0]), f"unknown field (known: {', '.join(sorted(known))})")


_MISSING = object()


def int_field(
    obj: Mapping[str, Any],
    key: str,
    path: tuple[str | int, ...],
    minimum: int | None = None,
    default: Any = _MISSING,
    maximum: int = INT32_MAX,
) -> int:
    """An integer in range; by default no bigger than a trace's INTEGER columns hold."""
    value = obj.get(key, default)
    if value is _MISSING:
        raise FieldError((*path, key), "required, an integer")
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError((*path, key), f"expected an integer, got {short(value)}")
    low = -INT32_MAX - 1 if minimum is None else minimum
    if value < low:
        raise FieldError((*path, key), f"must be at least {low}, got {short(value)}")
    if value > maximum:
        raise FieldError((*path, key), f"must be at most {maximum}, got {short(value)}")
    return value


def short(value: Any) -> str:
    """`repr(value)`, cut to a length an error line can carry."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:60]}…"


def number_field(
    obj: Mapping[str, Any],
    key: str,
    path: tuple[str | int, ...],
    default: float,
    minimum: float | None = None,
) -> float:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not finite(value):
        raise FieldError((*path, key), f"expected a finite number, got {short(value)}")
    if minimum is not None and value < minimum:
        raise FieldError((*path, key), f"must be at least {minimum:g}, got {value}")
    return float(value)


def finite(value: int | float) -> bool:
    """A float that is not NaN or infinite, or an int a float can hold."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def optional_int(
    obj: Mapping[str, Any],
    key: str,
    path: tuple[str | int, ...],
    minimum: int,
    maximum: int = INT32_MAX,
) -> int | None:
    if obj.get(key) is None:
        return None
    return int_field(obj, key, path, minimum=minimum, maximum=maximum)


def token_ids(
    obj: Mapping[str, Any],
    key: str,
    path: tuple[str | int, ...],
    *,
    required: bool,
    shared: dict[int, int] | None = None,
) -> tuple[int, ...]:
    """The list at `key` as a tuple of token ids. With `shared`, equal ids become the one
    int kept there: a workload holds far more tokens than its vocabulary has ids, and
    each int parsed on its own takes 28 bytes."""
    value = obj.get(key, _MISSING if required else [])
    if value is _MISSING:
        raise FieldError((*path, key), "required, a list of token ids")
    if not isinstance(value, list):
        raise FieldError((*path, key), "expected a list of token ids")
    for position, token in enumerate(value):
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token <= MAX_TOKEN_ID:
            raise FieldError((*path, key), f"item {position} is not a token id: {short(token)}")
    if shared is None:
        return tuple(value)
    return tuple(map(shared.setdefault, value, value))


def request_id_problem(request_id: str) -> str | None:
    """Why `request_id` cannot be an id (empty, too long, a NUL or bidi control), else None."""
    if not request_id:
        return "empty; an id names its request"
    if len(request_id) > MAX_REQUEST_ID_CHARS:
        return f"{len(request_id):,} characters long; at most {MAX_REQUEST_ID_CHARS} are allowed"
    for position, char in enumerate(request_id):
        if char in ID_REFUSED_CHARS:
            return (
                f"character {position} is {ID_REFUSED_CHARS[char]} (U+{ord(char):04X}), "
                "not allowed in an id"
            )
    return None
