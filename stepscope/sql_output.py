"""`stepscope sql`'s machine-readable outputs: JSON lines that any JSON parser reads, and CSV
as DuckDB's `COPY ... (FORMAT csv)` writes it.

JSON: a non-finite float is `null`; an interval is an ISO 8601 duration (`P1DT2H`; a month
counts as 30 days, as DuckDB's Python conversion has it); a BLOB is base64; a timestamp,
date or time is ISO 8601; a DECIMAL is a number; a struct, map or list is an object or
array of the same. CSV: every value is DuckDB's own text for it (`true`, `{'a': 1}`,
`\\x00`), NULL is an empty field and an empty string is `""`.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import uuid
from collections.abc import Sequence
from typing import Any, TextIO

import duckdb

CSV_SPECIALS = frozenset(',"\n\r')


def as_text(relation: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """Each column cast to VARCHAR by DuckDB: its values as `COPY ... (FORMAT csv)` writes them."""
    casts = ", ".join(f"CAST(#{i} AS VARCHAR)" for i in range(1, len(relation.columns) + 1))
    return relation.project(casts)


def write_csv(out: TextIO, columns: Sequence[str], rows: Sequence[Sequence[str | None]]) -> None:
    """A header row, then the rows; fields quoted only where DuckDB's CSV writer quotes them."""
    out.write(",".join(_csv_field(c) for c in columns) + "\n")
    for row in rows:
        out.write(",".join("" if v is None else _csv_field(v) for v in row) + "\n")


def _csv_field(text: str) -> str:
    if text and CSV_SPECIALS.isdisjoint(text):
        return text
    return '"' + text.replace('"', '""') + '"'


def write_json_lines(out: TextIO, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """One JSON object per row (strict JSON: no NaN, no Infinity)."""
    for row in rows:
        record = {column: json_value(value) for column, value in zip(columns, row, strict=True)}
        out.write(json.dumps(record, allow_nan=False) + "\n")


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
