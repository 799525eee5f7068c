"""Run under vLLM 0.33.0 (see vllm_venv.py): time vLLM's real scheduler on workloads.

    python vllm_scheduler_cost.py CASES.json SCRATCH_DIR

CASES.json is a list of {"name", "workload", "measure_from", "num_steps", "draft_seed"?};
prints a JSON list of timings. Scheduler stats are off (`log_stats=False`, as vLLM's `LLM`
class runs), the faster of vLLM's two configurations.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fake_drafter import case_drafter
from step_timer import time_steps
from stepscope.engine.workload import parse_workload
from stepscope.tracer.vllm.drive.driver import build_scheduler, prepare_environment
from vllm_inputs import arrivals, draft_token_ids, runner_output


def main() -> None:
    prepare_environment()
    results = []
    for case in json.loads(Path(sys.argv[1]).read_text()):
        workload = parse_workload(json.dumps(case["workload"]), source=case["name"])
        scheduler, hasher = build_scheduler(workload, log_stats=False)
        timing = time_steps(
            scheduler,
            arrivals(workload, hasher),
            runner_output,
            case["measure_from"],
            case["num_steps"],
            drafter=case_drafter(case, workload.config.num_speculative_tokens, draft_token_ids),
        )
        results.append({"name": case["name"], **timing})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
