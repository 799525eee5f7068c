"""The views' DuckDB SQL rewritten for Spark SQL, where a rewrite of the text suffices.

Each rewrite maps one DuckDB construct onto Spark's own: `list(x ORDER BY k)` to a
sorted `collect_list` of structs (NULL over no rows, as `list`), `FILTER (cond)` to
`FILTER (WHERE cond)`, list literals to `array()`, `len` to `size`, `format('{}')` to
`format_string('%s')`, `VARCHAR` to `STRING`, `t.* EXCLUDE (c)` to the table's other
columns. A view that
uses a construct with no rewrite (`ASOF JOIN`, `unnest`) is not offered to Spark, unless it
has Spark text of its own (`spark_views`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .ddl import table_specs

UNSUPPORTED = re.compile(r"\bASOF\b|\bunnest\(|\bgenerate_subscripts\(", re.IGNORECASE)
"""DuckDB constructs with no rewrite here."""

_LITERAL = re.compile(r"'(?:[^']|'')*'")
_CODE_REWRITES = (
    (re.compile(r"\bAS NOT MATERIALIZED \("), "AS ("),
    (re.compile(r"\bFILTER \((?!\s*WHERE\b)"), "FILTER (WHERE "),
    (re.compile(r"\bVARCHAR\b"), "STRING"),
    (re.compile(r"\blen\("), "size("),
    (re.compile(r"\[\]"), "array()"),
    (re.compile(r"\[([^\[\]]+)\]"), r"array(\1)"),
)
_FILTER_AFTER = re.compile(r"\s+FILTER \(WHERE ")
_EXCLUDE = re.compile(r"\b(\w+)\.\* EXCLUDE \(([^)]*)\)")
_FROM_ALIAS = re.compile(r"\b(?:FROM|JOIN)\s+(_\w+)\s+(\w+)", re.IGNORECASE)

Rewrite = Callable[[str, str, int], tuple[str, int]]
"""A call's rewrite: (its arguments' text, the whole statement, its `)`) → (text, last index)."""


def spark_sql(duckdb_sql: str) -> str | None:
    """The statement (comments stripped) in Spark's dialect; None when it has no rewrite."""
    if UNSUPPORTED.search(duckdb_sql):
        return None
    sql = _outside_literals(duckdb_sql, _rewrite_code)
    sql = _rewrite_calls(sql, "format", _format_string)
    sql = _rewrite_calls(sql, "list", _collect)
    return _expand_excludes(sql)


def _outside_literals(sql: str, rewrite: Callable[[str], str]) -> str:
    """`sql` with `rewrite` applied to each stretch between string literals."""
    pieces, end = [], 0
    for literal in _LITERAL.finditer(sql):
        pieces += [rewrite(sql[end : literal.start()]), literal.group()]
        end = literal.end()
    return "".join([*pieces, rewrite(sql[end:])])


def _rewrite_code(code: str) -> str:
    for pattern, replacement in _CODE_REWRITES:
        code = pattern.sub(replacement, code)
    return code


def _rewrite_calls(sql: str, name: str, rewrite: Rewrite) -> str:
    """Every call of the function `name` outside string literals, inner calls first."""
    pieces, position = [], 0
    for start in _calls(sql, name):
        if start < position:
            continue
        close = _closing(sql, start + len(name))
        body = _rewrite_calls(sql[start + len(name) + 1 : close], name, rewrite)
        replacement, last = rewrite(body, sql, close)
        pieces += [sql[position:start], replacement]
        position = last + 1
    return "".join([*pieces, sql[position:]])


def _calls(sql: str, name: str) -> list[int]:
    """Where `name(` starts a call outside string literals (not a longer name's end)."""
    literals = [match.span() for match in _LITERAL.finditer(sql)]
    return [
        match.start()
        for match in re.finditer(rf"(?<![\w.]){name}\(", sql)
        if not any(a <= match.start() < b for a, b in literals)
    ]


def _format_string(body: str, sql: str, close: int) -> tuple[str, int]:
    """`format('{} of {}', a, b)` as `format_string('%s of %s', CAST(a AS STRING), ...)`.

    DuckDB formats each value as its cast to text does (a list as `[1, 2]`), and so
    does Spark's cast; `format_string` alone would print a Spark array's object name.
    """
    template, *values = _split_top(body)
    template = template.replace("%", "%%").replace("{}", "%s")
    casts = [f"CAST({value.strip()} AS STRING)" for value in values]
    return f"format_string({', '.join([template.strip(), *casts])})", close


def _collect(body: str, sql: str, close: int) -> tuple[str, int]:
    """`list(v ORDER BY k [DESC], ...) [FILTER (...)]` as a sorted `collect_list` of structs."""
    where, last = "", close
    if _FILTER_AFTER.match(sql, close + 1):
        open_at = sql.index("(", close + 1)
        last = _closing(sql, open_at)
        where = " " + sql[close + 1 : last + 1].strip()
    value, _, order = body.partition(" ORDER BY ")
    value = _as_struct(value.strip())
    if not order:
        return _null_when_empty(f"collect_list({value}){where}", where), last
    keys = []
    for index, key in enumerate(_split_top(order)):
        expression, descending = key.strip(), False
        if expression.upper().endswith(" DESC"):
            expression, descending = expression[: -len(" DESC")], True
        keys.append(f"{'-' if descending else ''}({expression}) AS k{index}")
    fields = ", ".join([*keys, f"{value} AS v"])
    collected = f"transform(array_sort(collect_list(struct({fields})){where}), e -> e.v)"
    return _null_when_empty(collected, where), last


def _null_when_empty(collected: str, where: str) -> str:
    """DuckDB's `list` of no rows is NULL; Spark's `collect_list` of none is `[]`."""
    return f"CASE WHEN count(*){where} > 0 THEN {collected} END"


def _as_struct(value: str) -> str:
    """A row constructor `(a, b)` as Spark's `struct(a, b)`."""
    if value.startswith("(") and _closing(value, 0) == len(value) - 1:
        inner = value[1:-1]
        if len(_split_top(inner)) > 1:
            return f"struct({inner})"
    return value


def _closing(text: str, open_at: int) -> int:
    """The index of the `)` that closes the `(` at `open_at`, string literals skipped."""
    depth, index = 0, open_at
    while index < len(text):
        literal = _LITERAL.match(text, index)
        if literal:
            index = literal.end()
            continue
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index
        index += 1
    raise ValueError(f"unbalanced parentheses in {text[open_at:]!r}")


def _split_top(text: str) -> list[str]:
    """`text` split at the commas outside parentheses and string literals."""
    parts, depth, start, index = [], 0, 0, 0
    while index < len(text):
        literal = _LITERAL.match(text, index)
        if literal:
            index = literal.end()
            continue
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if text[index] == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
        index += 1
    return [*parts, text[start:]]


def _expand_excludes(sql: str) -> str:
    """`alias.* EXCLUDE (c, ...)` as the aliased table's other columns, in table order."""
    tables = {alias: table for table, alias in _FROM_ALIAS.findall(sql)}
    columns = {spec.name: [c[0] for c in spec.columns] for spec in table_specs()}

    def expand(match: re.Match[str]) -> str:
        alias, excluded = match.group(1), {c.strip() for c in match.group(2).split(",")}
        kept = [c for c in columns[tables[alias]] if c not in excluded]
        return ", ".join(f"{alias}.{column}" for column in kept)

    return _EXCLUDE.sub(expand, sql)
