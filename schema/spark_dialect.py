"""The views' DuckDB SQL rewritten for Spark SQL, where a rewrite of the text suffices.

Each rewrite maps one DuckDB construct onto Spark's own: `list(x ORDER BY k)` to a
sorted `collect_list` of structs (NULL over no rows, as `list`), `FILTER (cond)` to
`FILTER (WHERE cond)`, list literals to `array()`, `len` to `size`, `format('{}')` to
`format_string('%s')`, `VARCHAR` to `STRING`, `t.* EXCLUDE (c)` to the table's other
columns. A view that
uses a construct with no rewrite (`ASOF JOIN`, `unnest`) is not offered to Spark.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .ddl import table_specs

UNSUPPORTED = re.compile(r"\bASOF\b|\bunnest\(|\bgenerate_subscripts\(", re.IGNORECASE)
"""DuckDB constructs with no rewrite here."""

_LITERAL = re.compile(r"'(?:[^']|'')*'")
_FORMAT = re.compile(r"\bformat\((\s*)'((?:[^']|'')*)'")
_CODE_REWRITES = (
    (re.compile(r"\bAS NOT MATERIALIZED \("), "AS ("),
    (re.compile(r"\bFILTER \((?!\s*WHERE\b)"), "FILTER (WHERE "),
    (re.compile(r"\bVARCHAR\b"), "STRING"),
    (re.compile(r"\blen\("), "size("),
    (re.compile(r"\[\]"), "array()"),
    (re.compile(r"\[([^\[\]]+)\]"), r"array(\1)"),
)
_FILTER_AFTER = re.compile(r"(\s+FILTER \(WHERE [^()]*(?:\([^()]*\)[^()]*)*\))")
_EXCLUDE = re.compile(r"\b(\w+)\.\* EXCLUDE \(([^)]*)\)")
_FROM_ALIAS = re.compile(r"\b(?:FROM|JOIN)\s+(_\w+)\s+(\w+)", re.IGNORECASE)


def spark_sql(duckdb_sql: str) -> str | None:
    """The statement (comments stripped) in Spark's dialect; None when it has no rewrite."""
    if UNSUPPORTED.search(duckdb_sql):
        return None
    sql = _FORMAT.sub(_format_string, duckdb_sql)
    sql = _outside_literals(sql, _rewrite_code)
    return _expand_excludes(sql)


def _format_string(match: re.Match[str]) -> str:
    template = match.group(2).replace("%", "%%").replace("{}", "%s")
    return f"format_string({match.group(1)}'{template}'"


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
    return _ordered_lists(code)


def _ordered_lists(code: str) -> str:
    """`list(v ORDER BY k [DESC], ...)` as a `collect_list` of structs sorted by key, then v."""
    start = code.find("list(")
    while start >= 0:
        if start > 0 and (code[start - 1].isalnum() or code[start - 1] == "_"):
            start = code.find("list(", start + 1)
            continue
        end = _closing(code, start + len("list"))
        body = code[start + len("list(") : end]
        condition = _FILTER_AFTER.match(code, end + 1)
        where = condition.group(1) if condition else ""
        code = (
            code[:start] + _collect(body, where) + code[condition.end() if condition else end + 1 :]
        )
        start = code.find("list(", start + 1)
    return code


def _collect(body: str, where: str) -> str:
    """The `collect_list` for `list(body)`; `where`, its FILTER clause, goes inside."""
    value, _, order = body.partition(" ORDER BY ")
    value = _as_struct(value.strip())
    if not order:
        return _null_when_empty(f"collect_list({value}){where}", where)
    keys = []
    for index, key in enumerate(_split_top(order)):
        expression, descending = key.strip(), False
        if expression.upper().endswith(" DESC"):
            expression, descending = expression[: -len(" DESC")], True
        keys.append(f"{'-' if descending else ''}({expression}) AS k{index}")
    fields = ", ".join([*keys, f"{value} AS v"])
    sorted_list = f"transform(array_sort(collect_list(struct({fields})){where}), e -> e.v)"
    return _null_when_empty(sorted_list, where)


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
    depth = 0
    for index in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index
    raise ValueError(f"unbalanced parentheses in {text[open_at:]!r}")


def _split_top(text: str) -> list[str]:
    """`text` split at the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
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
