"""Run under vLLM 0.33.0 (see vllm_venv.py): time vLLM's real scheduler on workloads.

    python vllm_scheduler_cost.py CASES.json SCRATCH_DIR

CASES.json is a list of {"name", "workload", "measure_from", "num_steps"}; prints a
JSON list of timings. Scheduler stats are off (`log_stats=False`, as vLLM's `LLM`
class runs), the faster of vLLM's two configurations.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from step_timer import time_steps
from stepscope.engine.workload import parse_workload
from stepscope.tracer.vllm.driver import build_scheduler, make_request, prepare_environment


def main() -> None:
    prepare_environment()
    from vllm.v1.outputs import ModelRunnerOutput

    def runner_output(sampled: dict[str, list[int]]) -> ModelRunnerOutput:
        req_ids = list(sampled)
        return ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={req_id: i for i, req_id in enumerate(req_ids)},
            sampled_token_ids=[sampled[req_id] for req_id in req_ids],
        )

    results = []
    for case in json.loads(Path(sys.argv[1]).read_text()):
        workload = parse_workload(json.dumps(case["workload"]), source=case["name"])
        scheduler, hasher = build_scheduler(workload, log_stats=False)
        arrivals: dict[int, list[Any]] = {}
        for spec in workload.requests:
            arrivals.setdefault(spec.arrival_step, []).append(make_request(spec, hasher))
        timing = time_steps(
            scheduler, arrivals, runner_output, case["measure_from"], case["num_steps"]
        )
        results.append({"name": case["name"], **timing})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
