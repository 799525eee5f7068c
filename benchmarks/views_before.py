"""The views as they were before they were restated for speed, each as one query.

`sql/views_before/` holds the SQL of each view as it read before it was restated to do
less work for the same rows in the same order, and, for a view added to answer at scale
what a query over another view answered, that query; every other view is as
`schema/views/` has it. A view's query inlines the earlier SQL of each restated view it reads, so a
view and everything under it run as they used to, over the same trace.
"""

from __future__ import annotations

import re
from pathlib import Path

from stepscope.schema import view_infos
from stepscope.schema.sql_files import strip_comments

BEFORE = Path(__file__).with_name("sql") / "views_before"


def restated() -> list[str]:
    """The views whose earlier SQL is kept, by name."""
    return sorted(path.stem for path in BEFORE.glob("*.sql"))


def before_query(name: str) -> str:
    """The view `name` as a query, as it read before the restatement."""
    restated_views = restated()
    if name in restated_views:
        body = strip_comments((BEFORE / f"{name}.sql").read_text())
    else:
        (info,) = (info for info in view_infos() if info.name == name)
        body = strip_comments(info.sql)
    for view in restated_views:
        if view != name:
            reads = re.compile(rf"\b(FROM|JOIN)\s+{view}\b", re.IGNORECASE)
            body = reads.sub(lambda match, v=view: f"{match.group(1)} ({before_query(v)})", body)
    return body
