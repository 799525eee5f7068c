"""The trace schema's version; a reader refuses versions it does not know."""

from __future__ import annotations

SCHEMA_VERSION = 1
"""Bumped on any change to `tables.sql` that a reader must know about."""

SUPPORTED_VERSIONS = frozenset({SCHEMA_VERSION})
