"""The diff's changed requests: the first ones listed, and how many more there were."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO
from stepscope.engine import load_workload
from stepscope.replay.diff_report import MAX_REQUEST_ROWS
from stepscope.replay.whatif import replay_whatif
from test_cli import stepscope
from traces import record

STORM = REPO / "examples" / "preemption_storm" / "workload.json"


def test_a_diff_lists_the_first_changed_requests_and_counts_the_rest(tmp_path: Path) -> None:
    base, fewer = tmp_path / "base.duckdb", tmp_path / "fewer_blocks.duckdb"
    record(load_workload(STORM), base)
    replay_whatif(base, fewer, {"num_blocks": 30})  # most requests end otherwise
    markdown = tmp_path / "diff.md"
    result = stepscope("diff", str(base), str(fewer), "--markdown", str(markdown))
    assert result.returncode == 1, result.stderr
    assert "21 requests changed" in result.stdout
    listed = re.findall(r"^│ (chat-\d\d) ", result.stdout, flags=re.MULTILINE)
    assert len(listed) == MAX_REQUEST_ROWS == 15
    assert re.search(r"^and 6 more\b", result.stdout, flags=re.MULTILINE)

    report = markdown.read_text()
    assert "21 requests changed; first ones:" in report
    assert len(re.findall(r"^\| chat-\d\d \|", report, flags=re.MULTILINE)) == 15
    assert "\nand 6 more\n" in report
