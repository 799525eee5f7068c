"""Column buffers that turn into Arrow tables without touching each value again.

Hot columns (one value per request per step) are `array.array`s reused batch after
batch (`filled_array.py`), handed to Arrow as buffers; rare columns are plain lists.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import accumulate, chain, islice
from operator import itemgetter, length_hint
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
from stepscope.schema.ddl import TableSpec

from .filled_array import FilledArray

_ARANGE = array("q", range(1 << 16))
_LIST_VALUE = {"i": pa.int32(), "q": pa.int64()}


def _from_array(values: array[int], arrow_type: pa.DataType) -> pa.Array:
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(values)])


class IntColumn:
    """Non-null integers ('i' int32, 'q' int64, 'b' int8 for booleans)."""

    def __init__(self, typecode: str = "i", arrow_type: pa.DataType | None = None) -> None:
        self.typecode = typecode
        self.arrow_type = arrow_type
        self.values = FilledArray(typecode)

    def __len__(self) -> int:
        return self.values.size

    def append(self, value: int) -> None:
        self.values.append(value)

    def extend(self, values: Iterable[int]) -> None:
        # Building an array from a list or tuple runs twice as fast as array.extend.
        if not (isinstance(values, array) and values.typecode == self.typecode):
            if not isinstance(values, list | tuple):
                values = list(values)
            values = array(self.typecode, values)
        self.values.put(values)

    def extend_repeated(self, value: int, count: int) -> None:
        self.values.put(array(self.typecode, [value]) * count)

    def to_arrow(self) -> pa.Array:
        view = self.values.view()
        return view if self.arrow_type is None else view.cast(self.arrow_type)

    def truncate(self, num_rows: int) -> None:
        self.values.truncate(num_rows)

    def reset(self) -> None:
        self.values.start_over()


class BoolColumn(IntColumn):
    def __init__(self) -> None:
        super().__init__("b", pa.bool_())


class SeqColumn(IntColumn):
    """Increasing int64 sequence numbers; runs of consecutive numbers are appended cheaply.

    A run is stored as its start repeated plus offsets 0, 1, 2, ... from a ready-made
    range, and the two are added in Arrow when the batch is built.
    """

    def __init__(self) -> None:
        super().__init__("q")
        self.offsets = FilledArray("q")

    def append(self, value: int) -> None:
        self.values.append(value)
        self.offsets.append(0)

    def extend(self, values: Iterable[int]) -> None:
        chunk = array("q", values if isinstance(values, list | tuple) else list(values))
        self.values.put(chunk)
        self.offsets.put(array("q", [0]) * len(chunk))

    def extend_range(self, start: int, stop: int) -> None:
        count = stop - start
        self.values.put(array("q", [start]) * count)
        self.offsets.put(_ARANGE[:count] if count <= len(_ARANGE) else array("q", range(count)))

    def to_arrow(self) -> pa.Array:
        return pc.add(self.values.view(), self.offsets.view())

    def truncate(self, num_rows: int) -> None:
        self.values.truncate(num_rows)
        self.offsets.truncate(num_rows)

    def reset(self) -> None:
        self.values.start_over()
        self.offsets.start_over()


class OptionalIntColumn(IntColumn):
    """Non-negative integers or NULL, kept with -1 for NULL until the Arrow conversion."""

    MISSING = -1

    def to_arrow(self) -> pa.Array:
        values = self.values.view()
        minimum = pc.min(values).as_py()
        if minimum is None or minimum >= 0:
            return values
        return pc.if_else(pc.less(values, 0), pa.scalar(None, values.type), values)


class ListColumn:
    """Lists of integers: flat values plus offsets."""

    def __init__(self, typecode: str = "i") -> None:
        self.typecode = typecode
        self.reset()

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def append(self, items: Iterable[int]) -> None:
        self.values.extend(items)
        self.offsets.append(len(self.values))

    def extend_repeated(self, items: Sequence[int], count: int) -> None:
        for _ in range(count):
            self.append(items)

    def extend(self, lists: Sequence[Sequence[int] | None]) -> None:
        """Append many lists (None counts as empty), without a Python loop per list."""
        self.values.extend(chain.from_iterable(filter(None, lists)))
        self.offsets.extend(
            islice(accumulate(map(length_hint, lists), initial=self.offsets[-1]), 1, None)
        )

    def to_arrow(self) -> pa.Array:
        offsets = _from_array(self.offsets, pa.int32())
        return pa.ListArray.from_arrays(
            offsets, _from_array(self.values, _LIST_VALUE[self.typecode])
        )

    def truncate(self, num_rows: int) -> None:
        del self.values[self.offsets[num_rows] :]
        del self.offsets[num_rows + 1 :]

    def reset(self) -> None:
        self.values: array[int] = array(self.typecode)
        self.offsets: array[int] = array("i", [0])


class EnumColumn:
    """Values from a fixed set, kept as int8 codes; Arrow gets a dictionary array."""

    def __init__(self, categories: Sequence[str]) -> None:
        self.dictionary = pa.array(list(categories), pa.string())
        self.code = {name: index for index, name in enumerate(categories)}
        self.values = FilledArray("b")

    def __len__(self) -> int:
        return self.values.size

    def append(self, value: str) -> None:
        self.values.append(self.code[value])

    def extend(self, values: Iterable[str]) -> None:
        self.values.put(array("b", map(self.code.__getitem__, values)))

    def extend_repeated(self, value: str, count: int) -> None:
        self.values.put(array("b", [self.code[value]]) * count)

    def to_arrow(self) -> pa.Array:
        return pa.DictionaryArray.from_arrays(self.values.view(), self.dictionary, safe=False)

    def truncate(self, num_rows: int) -> None:
        self.values.truncate(num_rows)

    def reset(self) -> None:
        self.values.start_over()


class ObjectColumn:
    """Anything Arrow can convert from Python values, NULLs included (rare rows only)."""

    def __init__(self, arrow_type: pa.DataType) -> None:
        self.arrow_type = arrow_type
        self.values: list[Any] = []
        self.append: Callable[[Any], None] = self.values.append
        """The list's own append: a row of rare columns costs a C call per value."""

    def __len__(self) -> int:
        return len(self.values)

    def extend(self, values: Iterable[Any]) -> None:
        self.values.extend(values)

    def extend_repeated(self, value: Any, count: int) -> None:
        self.values.extend([value] * count)

    def to_arrow(self) -> pa.Array:
        return pa.array(self.values, self.arrow_type)

    def truncate(self, num_rows: int) -> None:
        del self.values[num_rows:]

    def reset(self) -> None:
        """Empty the list in place (Arrow copied it), so `append` stays bound to it."""
        self.values.clear()


class Column(Protocol):
    """What every column buffer offers; values are checked by the concrete column."""

    def __len__(self) -> int: ...
    def append(self, value: Any) -> None: ...
    def extend(self, values: Any) -> None: ...
    def extend_repeated(self, value: Any, count: int) -> None: ...
    def to_arrow(self) -> pa.Array: ...
    def truncate(self, num_rows: int) -> None: ...
    def reset(self) -> None: ...


class TableBuffer:
    """Rows of one trace table, column by column, in the table's column order."""

    def __init__(self, table: str, columns: dict[str, Column]) -> None:
        self.table = table
        self.columns = columns
        self._first = next(iter(columns.values()))
        self._appends = tuple(column.append for column in columns.values())
        self._in_column_order = itemgetter(*columns)
        """A row's values in column order, taken in one call."""

    def __len__(self) -> int:
        return min(len(column) for column in self.columns.values())

    @property
    def num_rows(self) -> int:
        """Rows, when no row is partly appended (between steps): one column's length."""
        return len(self._first)

    def append_row(self, row: Mapping[str, Any]) -> None:
        """Append one row given by column name; its names must be exactly the table's columns."""
        try:
            values = self._in_column_order(row)
        except KeyError:
            values = None
        if values is None or len(row) != len(self._appends):
            missing = sorted(self.columns.keys() - row.keys())
            unknown = sorted(row.keys() - self.columns.keys())
            raise KeyError(f"{self.table} row: missing columns {missing}, unknown {unknown}")
        for append, value in zip(self._appends, values, strict=True):
            append(value)

    def truncate(self, num_rows: int) -> None:
        """Drop rows from `num_rows` on, in every column (a partly appended row included)."""
        for column in self.columns.values():
            column.truncate(num_rows)

    def take_arrow(self) -> pa.Table | None:
        """The buffered rows as an Arrow table (None if empty); the buffer starts over."""
        if len(self) == 0:
            return None
        lengths = {name: len(column) for name, column in self.columns.items()}
        assert len(set(lengths.values())) == 1, f"{self.table}: ragged columns {lengths}"
        table = pa.table({name: column.to_arrow() for name, column in self.columns.items()})
        for column in self.columns.values():
            column.reset()
        return table


_HOT_TABLES = frozenset({"_scheduled", "_block_ids", "_events"})
"""Tables with up to a row per request per step: typed buffers."""

_OPTIONAL_INTS = frozenset({("_scheduled", "sampled_token_id")})
"""Hot integer columns that may be NULL."""

_NULLABLE = frozenset({("_events", "detail"), ("_events", "stop_reason")})
"""Hot columns that may be NULL and are rarely set: plain lists."""

_ARROW_TYPES = {
    "INTEGER": pa.int32(),
    "BIGINT": pa.int64(),
    "BOOLEAN": pa.bool_(),
    "DOUBLE": pa.float64(),
    "VARCHAR": pa.string(),
    "INTEGER[]": pa.list_(pa.int32()),
    "BIGINT[]": pa.list_(pa.int64()),
}


def buffer_for(table: TableSpec, enum_types: Mapping[str, Sequence[str]]) -> TableBuffer:
    """A buffer whose columns follow the table's DDL, typed buffers for hot columns."""
    columns: dict[str, Column] = {}
    for name, sql_type, _ in table.columns:
        if name == "seq" and table.name in _HOT_TABLES:
            columns[name] = SeqColumn()
            continue
        if (table.name, name) in _OPTIONAL_INTS:
            columns[name] = OptionalIntColumn("q" if sql_type == "BIGINT" else "i")
            continue
        hot = table.name in _HOT_TABLES and (table.name, name) not in _NULLABLE
        columns[name] = _column_for(sql_type, enum_types, hot=hot)
    return TableBuffer(table.name, columns)


def _column_for(sql_type: str, enum_types: Mapping[str, Sequence[str]], *, hot: bool) -> Column:
    if sql_type in enum_types:
        return EnumColumn(enum_types[sql_type]) if hot else ObjectColumn(pa.string())
    if not hot:
        return ObjectColumn(_ARROW_TYPES[sql_type])
    typed: dict[str, Column] = {
        "INTEGER": IntColumn("i"),
        "BIGINT": IntColumn("q"),
        "BOOLEAN": BoolColumn(),
        "INTEGER[]": ListColumn("i"),
        "BIGINT[]": ListColumn("q"),
    }
    return typed[sql_type]
