"""What the README says this release does, checked against the code that does it."""

from __future__ import annotations

import re

from conftest import REPO
from stepscope.schema.version import SUPPORTED_VERSIONS


def test_the_readme_names_the_schema_versions_this_release_reads() -> None:
    readme = " ".join((REPO / "README.md").read_text().split())
    (first, last) = re.findall(r"this release reads versions (\d+) to (\d+)", readme)[0]
    assert set(range(int(first), int(last) + 1)) == SUPPORTED_VERSIONS
