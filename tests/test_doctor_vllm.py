"""`stepscope doctor` on a trace of vLLM 0.33.0's own scheduler: the cure it checks by a
what-if through stepscope's engine holds when the same change is replayed through vLLM's
scheduler."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import REPO
from stepscope.replay.doctor import diagnose
from stepscope.replay.from_step import WHOLE
from vllm_env import VllmPython

STORM = REPO / "examples" / "preemption_storm" / "workload.json"


def test_a_cure_holds_through_vllms_own_scheduler(vllm: VllmPython, tmp_path: Path) -> None:
    vllm.record(tmp_path, [STORM], {})
    trace = tmp_path / "workload.duckdb"
    (finding,) = [f for f in diagnose(trace, trace, WHOLE).findings
                  if f.kind == "preemption_thrash"]  # fmt: skip
    assert finding.what_if is not None and finding.what_if.removes, finding
    settings = [
        a for k, v in finding.what_if.knobs.items() for a in ("--set", f"{k}={json.dumps(v)}")
    ]
    cured = tmp_path / "cured.duckdb"
    result = vllm.stepscope("replay", "--engine", "vllm", str(trace), *settings, "-o", str(cured))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    kinds = [f.kind for f in diagnose(cured, cured, WHOLE, what_ifs=False).findings]
    assert "preemption_thrash" not in kinds, kinds
