"""The trace schema's version; a reader refuses versions it does not know."""

from __future__ import annotations

SCHEMA_VERSION = 2
"""Bumped on any change to `tables.sql` that a reader must know about.

1: the first schema.
2: `_steps.update_step` and `_requests.abort_before_update` (async scheduling and
   aborts between schedule and update), `_config.async_scheduling`.
"""

SUPPORTED_VERSIONS = frozenset({SCHEMA_VERSION})
