"""Run by the vLLM oracle's interpreter: time vLLM 0.33.0's real scheduler on workloads.

    $VLLM_ORACLE_VENV/bin/python vllm_scheduler_cost.py ORACLE_DIR CASES.json

CASES.json is a list of {"name", "workload", "measure_from", "num_steps"}; prints a
JSON list of timings. Scheduler stats are off (`log_stats=False`, as vLLM's `LLM`
class runs), the faster of vLLM's two configurations.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from step_timer import time_steps


def main() -> None:
    oracle_dir, cases_path = sys.argv[1], sys.argv[2]
    sys.path.insert(0, oracle_dir)
    import vllm_oracle  # sets vLLM's CPU environment before vLLM is imported
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.outputs import ModelRunnerOutput

    original_init = Scheduler.__init__

    def init_without_stats(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["log_stats"] = False
        original_init(self, *args, **kwargs)

    Scheduler.__init__ = init_without_stats  # the oracle builds with stats on

    def runner_output(sampled: dict[str, list[int]]) -> ModelRunnerOutput:
        req_ids = list(sampled)
        return ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={req_id: i for i, req_id in enumerate(req_ids)},
            sampled_token_ids=[sampled[req_id] for req_id in req_ids],
        )

    results = []
    for case in json.loads(Path(cases_path).read_text()):
        workload = case["workload"]
        scheduler, _, hasher = vllm_oracle.build_scheduler(workload["config"])
        arrivals: dict[int, list[object]] = {}
        for index, spec in enumerate(workload["requests"]):
            request = vllm_oracle.make_request(spec, index, hasher)
            arrivals.setdefault(spec["arrival_step"], []).append(request)
        timing = time_steps(
            scheduler, arrivals, runner_output, case["measure_from"], case["num_steps"]
        )
        results.append({"name": case["name"], **timing})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
