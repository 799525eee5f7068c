"""What the docs say this release does, checked against the code that does it."""

from __future__ import annotations

import re

from conftest import REPO
from stepscope.schema import sql_files
from stepscope.schema.version import SUPPORTED_VERSIONS


def test_the_schema_page_names_the_schema_versions_this_release_reads() -> None:
    page = " ".join((REPO / "docs" / "schema.md").read_text().split())
    (first, last) = re.findall(r"this release reads versions (\d+) to (\d+)", page)[0]
    assert set(range(int(first), int(last) + 1)) == SUPPORTED_VERSIONS


def test_the_schema_page_tables_every_view_a_trace_has() -> None:
    page = (REPO / "docs" / "schema.md").read_text()
    rows = re.findall(r"^\| (`.+?) \|", page, re.MULTILINE)
    tabled = {name for row in rows for name in re.findall(r"`(\w+)`", row)}
    assert tabled == set(sql_files.names("stepscope.schema", "views"))
