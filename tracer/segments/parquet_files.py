"""A segment's tables as Parquet files: quick to write in parts, compact once closed.

A part is written every flush, so it is written fast (zstd at its lowest level, each
column as pyarrow does by default). A closed segment is written once, column by column
in the encoding that stores it smallest on a recorder's data: a column that climbs
(steps, seq, positions, counters) as deltas, one that repeats a few values (kinds,
token counts, block ids) as a dictionary, one that is neither (the queue order of
request indices) plainly, and token ids as 4-byte integers split into byte streams
(a tokenizer's ids fit; a redacted recording's 63-bit pseudonyms do not, and stay 8
bytes); all of it zstd-compressed. Readers cast every column back to its schema type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

PART_COMPRESSION_LEVEL = 1
SEGMENT_COMPRESSION_LEVEL = 9
"""zstd's level for closed segments: a few percent smaller than its default, written once."""
ROW_GROUP_ROWS = 131_072
"""Rows per row group of a closed segment's file: a reader skips whole groups by their
step statistics, and the recorder's batches are about this size."""

_DICTIONARY = frozenset(
    {
        ("_scheduled", "num_tokens"),
        ("_scheduled", "sampled_token_id"),
        ("_block_ids", "slot"),
        ("_block_ids", "block_id"),
        ("_block_ids", "kv_cache_group"),
    }
)
"""Integer columns that repeat a few values: a dictionary."""
_PLAIN = frozenset({("_scheduled", "request_index"), ("_block_ids", "request_index")})
"""Integer columns that neither climb nor repeat (the running queue's order): plain."""


def write_part_file(table: pa.Table, path: Path) -> None:
    """One table of a part, written quickly."""
    pq.write_table(
        table,
        path,
        compression="zstd",
        compression_level=PART_COMPRESSION_LEVEL,
        write_statistics=["step"] if "step" in table.schema.names else False,
    )


Batches = Callable[[], Iterable[pa.Table]]
"""The rows of a table, read afresh at each call."""


def write_segment_file(name: str, schema: pa.Schema, batches: Batches, path: Path) -> int:
    """The table `name` of a closed segment from its parts' rows, in row groups of
    `ROW_GROUP_ROWS`; the rows written. Only a row group's rows are in memory at once."""
    narrow = _narrowed(schema)
    if narrow != schema:
        try:
            return _write(name, narrow, batches(), path)
        except (pa.ArrowInvalid, OverflowError):
            pass  # a token id past 4 bytes (a pseudonym): written as recorded
    return _write(name, schema, batches(), path)


def _write(name: str, schema: pa.Schema, batches: Iterable[pa.Table], path: Path) -> int:
    encodings = {field.name: _encoding(name, field) for field in schema}
    with pq.ParquetWriter(
        path,
        schema,
        compression="zstd",
        compression_level=SEGMENT_COMPRESSION_LEVEL,
        use_dictionary=[column for column, encoding in encodings.items() if encoding is None],
        column_encoding={
            _leaf(schema.field(column)): encoding
            for column, encoding in encodings.items()
            if encoding is not None
        },
        write_statistics=["step"] if "step" in schema.names else False,
    ) as writer:
        rows = 0
        for group in _row_groups(batches):
            writer.write_table(group.cast(schema), row_group_size=ROW_GROUP_ROWS)
            rows += group.num_rows
    return rows


def _encoding(table: str, field: pa.Field) -> str | None:
    """The column's encoding (None: a dictionary)."""
    if _is_token_column(field):
        return "BYTE_STREAM_SPLIT"
    if (table, field.name) in _PLAIN:
        return "PLAIN"
    if pa.types.is_integer(field.type) and (table, field.name) not in _DICTIONARY:
        return "DELTA_BINARY_PACKED"  # they climb, or hardly change
    return None


def _is_token_column(field: pa.Field) -> bool:
    return field.name.endswith(("token_id", "token_ids")) and field.type in (
        pa.int32(),
        pa.list_(pa.int32()),
    )


def _narrowed(schema: pa.Schema) -> pa.Schema:
    """`schema` with its token-id columns as 4-byte integers."""
    fields = []
    for field in schema:
        if field.name.endswith(("token_id", "token_ids")):
            if field.type == pa.int64():
                field = field.with_type(pa.int32())
            elif field.type == pa.list_(pa.int64()):
                field = field.with_type(pa.list_(pa.int32()))
        fields.append(field)
    return pa.schema(fields)


def _leaf(field: pa.Field) -> str:
    """The path pyarrow names a column's values by (a list's are its elements)."""
    return f"{field.name}.list.element" if pa.types.is_list(field.type) else field.name


def _row_groups(batches: Iterable[pa.Table]) -> Iterator[pa.Table]:
    """The batches' rows regrouped into tables of `ROW_GROUP_ROWS` rows (the last fewer)."""
    pending: list[pa.Table] = []
    num_pending = 0
    for batch in batches:
        pending.append(batch)
        num_pending += batch.num_rows
        while num_pending >= ROW_GROUP_ROWS:
            whole = pa.concat_tables(pending)
            yield whole.slice(0, ROW_GROUP_ROWS)
            rest = whole.slice(ROW_GROUP_ROWS)
            pending, num_pending = [rest], rest.num_rows
    if num_pending:
        yield pa.concat_tables(pending)


def read_file(path: Path) -> pa.Table:
    """A part's table, whole."""
    return pq.read_table(path)


def file_schema(path: Path) -> pa.Schema:
    return pq.read_schema(path)
