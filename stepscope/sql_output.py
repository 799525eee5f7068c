"""`stepscope sql`'s machine-readable outputs: JSON lines that any JSON parser reads, and CSV
as DuckDB's `COPY ... (FORMAT csv)` writes it.

JSON: a non-finite float is `null`; an interval is an ISO 8601 duration (`P1DT2H`; a month
counts as 30 days, as DuckDB's Python conversion has it); a BLOB is base64; a timestamp,
date or time is ISO 8601; a DECIMAL is a number; a struct, map or list is an object or
array of the same; every control character is escaped (`\\u001b`). CSV: every value is
DuckDB's own text for it (`true`, `{'a': 1}`, `\\x00`), NULL is an empty field and an empty
string is `""`; on a terminal, `escaped` writes each control character as its escape.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import uuid
from collections.abc import Iterable, Sequence
from json.encoder import encode_basestring_ascii
from typing import Any, cast

import duckdb

from stepscope.safe_text import safe_text

CSV_SPECIALS = frozenset(',"\n\r')


def as_text(relation: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """Each column cast to VARCHAR by DuckDB: its values as `COPY ... (FORMAT csv)` writes them."""
    casts = ", ".join(f"CAST(#{i} AS VARCHAR)" for i in range(1, len(relation.columns) + 1))
    return relation.project(casts)


def csv_header(columns: Sequence[str]) -> str:
    """The header row: the column names, quoted where DuckDB's CSV writer quotes them."""
    return ",".join(map(_csv_field, columns)) + "\n"


def csv_lines(rows: Sequence[Sequence[str | None]]) -> str:
    """Rows of DuckDB's text (`as_text`), one line each; NULL is an empty field."""
    if not rows:
        return ""
    fields = zip(*(_csv_fields(column) for column in zip(*rows, strict=True)), strict=True)
    return "\n".join(map(",".join, fields)) + "\n"


def _csv_fields(texts: Sequence[str | None]) -> Sequence[str]:
    """A column's fields; a column with nothing to quote (no NULL, no "", no special) as it is."""
    if None not in texts and "" not in texts:
        joined = "".join(cast(Sequence[str], texts))
        if not any(special in joined for special in CSV_SPECIALS):
            return cast(Sequence[str], texts)
    return [_csv_value(text) for text in texts]


def _csv_value(text: str | None) -> str:
    return "" if text is None else _csv_field(text)


def _csv_field(text: str) -> str:
    if text and CSV_SPECIALS.isdisjoint(text):
        return text
    return '"' + text.replace('"', '""') + '"'


def escaped(rows: Iterable[Sequence[str | None]]) -> list[tuple[str | None, ...]]:
    """Rows of text with every unprintable character written as its escape (`safe_text`)."""
    return [tuple(None if text is None else safe_text(text) for text in row) for row in rows]


_ENCODER = json.JSONEncoder(allow_nan=False)


def json_lines(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """One JSON object per row, as `json.dumps` writes it (strict JSON: no NaN, no Infinity;
    every control character escaped); a name given twice keeps its last value, as a dict does."""
    if not rows:
        return ""
    last = {column: index for index, column in enumerate(columns)}
    if not last:
        return "{}\n" * len(rows)
    values = list(zip(*rows, strict=True))
    keys = (
        encode_basestring_ascii(column).replace("{", "{{").replace("}", "}}") for column in last
    )
    template = "{{" + ", ".join(f"{key}: {{}}" for key in keys) + "}}\n"
    texts = [_json_texts(values[index]) for index in last.values()]
    return "".join(map(template.format, *texts))


def _json_texts(values: Sequence[Any]) -> Sequence[str]:
    """A column's values as JSON text; a column all of strings, or all of integers, at C speed."""
    kinds = set(map(type, values))
    if kinds == {str}:
        return list(map(encode_basestring_ascii, values))
    if kinds == {int}:
        return list(map(int.__repr__, values))
    return [_ENCODER.encode(json_value(value)) for value in values]


def json_value(value: Any) -> Any:
    """A DuckDB value as plain JSON data."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        return float(value) if value.is_finite() else None
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime.timedelta):
        return iso_duration(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, dict):
        return {_json_key(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


def _json_key(key: Any) -> str:
    converted = json_value(key)
    return converted if isinstance(converted, str) else json.dumps(converted)


def iso_duration(delta: datetime.timedelta) -> str:
    """ISO 8601 duration, e.g. `P1DT2H3M4.5S`; `PT0S` for zero, a leading `-` when negative."""
    sign = "-" if delta < datetime.timedelta(0) else ""
    delta = abs(delta)
    hours, rest = divmod(delta.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    date = f"{delta.days}D" if delta.days else ""
    time = "".join(
        f"{amount}{unit}" for amount, unit in ((hours, "H"), (minutes, "M")) if amount
    ) + _seconds(seconds, delta.microseconds)
    if not date and not time:
        return "PT0S"
    return f"{sign}P{date}" + (f"T{time}" if time else "")


def _seconds(seconds: int, microseconds: int) -> str:
    if microseconds:
        return f"{seconds}.{microseconds:06d}".rstrip("0") + "S"
    return f"{seconds}S" if seconds else ""
