"""Running a workload through the engine and comparing decision logs line by line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stepscope.engine import EngineLoop, TapeModelRunner, Workload, load_workload
from stepscope.engine.oracle_lines import decision_lines

FINAL_FIELDS = (
    "finish_step",
    "finish_reason",
    "output_token_ids",
    "num_preemptions",
    "stop_reason",
)


def run_lines(workload: Workload | Path) -> list[dict[str, Any]]:
    if isinstance(workload, Path):
        workload = load_workload(workload)
    return list(decision_lines(EngineLoop(workload, TapeModelRunner.for_workload(workload))))


def first_difference(ours: list[dict[str, Any]], expected: list[dict[str, Any]]) -> str | None:
    """A readable report of the first line that differs, or None if the logs agree.

    Step lines must be equal field by field; the final line on each request's
    finish fields (the config echo differs by design).
    """
    for index, (mine, theirs) in enumerate(zip(ours[:-1], expected[:-1], strict=False)):
        if mine != theirs:
            fields = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
            detail = "\n".join(
                f"  {k}:\n    ours     {mine.get(k)!r}\n    expected {theirs.get(k)!r}"
                for k in fields
            )
            return f"step line {index} (step {theirs.get('step')}) differs:\n{detail}"
    if len(ours) != len(expected):
        return f"{len(ours)} lines, expected {len(expected)}"
    mine_final, theirs_final = ours[-1]["final"], expected[-1]["final"]
    if list(mine_final) != list(theirs_final):
        return f"final requests {list(mine_final)} != {list(theirs_final)}"
    for req_id, theirs in theirs_final.items():
        for field in FINAL_FIELDS:
            if mine_final[req_id].get(field) != theirs.get(field):
                return (
                    f"final {req_id}.{field}: ours {mine_final[req_id].get(field)!r}, "
                    f"expected {theirs.get(field)!r}"
                )
    return None
