"""The tables a trace's reader sees, in `tables.sql` order: what an export writes."""

from __future__ import annotations

from stepscope.schema.ddl import table_specs


def logical_tables() -> tuple[str, ...]:
    """The `_name`s of the reader's tables (`_meta`, `_config`, ..., `_spec_decode`)."""
    return tuple(spec.name for spec in table_specs())
