"""CPU time per step of `schedule()` and `update_from_output()`: stepscope next to vLLM 0.33.0.

    python benchmarks/scheduler_cost.py [--results benchmarks/RESULTS.md] [--quick]

Workloads: (a) N requests decoding together (N = 64, 256, 1024; prompt 128, block
size 16, budget 8192, max_num_seqs 1024, prefix caching on, no preemption), timed
once every request is decoding; (b) a mixed load with staggered arrivals, prompts
64–2048, outputs 16–256 and a KV pool tight enough to preempt, timed over the whole
run. When the vLLM oracle's venv exists (`../shared/oracle/build_venv.sh`), the same
workloads run through vLLM's own scheduler in a subprocess of the same run and the
ratio stepscope / vLLM is printed (goal: at most 0.8).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import tempfile
from datetime import date
from pathlib import Path
from typing import Any

from results_file import write_section
from step_timer import time_steps
from stepscope.engine import ModelRunnerOutput, Scheduler
from stepscope.engine.workload import parse_workload

HERE = Path(__file__).resolve().parent
ORACLE_DIR = HERE.parent.parent / "shared" / "oracle"
GOAL = 0.8


def decode_case(num_requests: int, num_steps: int) -> dict[str, Any]:
    prompt_len, block_size = 128, 16
    blocks_per_request = (prompt_len + num_steps + 64) // block_size + 1
    requests = [
        {
            "id": f"d{i}",
            "arrival_step": 0,
            "prompt_token_ids": [(i * 7919 + t) % 30000 + 3 for t in range(prompt_len)],
            "max_tokens": 100_000,
        }
        for i in range(num_requests)
    ]
    config = {
        "block_size": block_size,
        "num_blocks": num_requests * blocks_per_request + 1,
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 1024,
        "max_model_len": 65536,
        "enable_prefix_caching": True,
    }
    warmup = num_requests * prompt_len // 8192 + 2
    return {
        "name": f"decode N={num_requests}",
        "workload": {"config": config, "requests": requests},
        "measure_from": warmup,
        "num_steps": num_steps,
    }


def mixed_case(num_requests: int, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    requests = []
    for i in range(num_requests):
        prompt_len = rng.randint(64, 2048)
        shared = [11 + (i % 4)] * 256 if rng.random() < 0.3 else []  # some shared prefixes
        prompt = shared + [rng.randint(3, 30000) for _ in range(prompt_len - len(shared))]
        requests.append(
            {
                "id": f"m{i}",
                "arrival_step": i // 2,
                "prompt_token_ids": prompt[:prompt_len],
                "max_tokens": rng.randint(16, 256),
            }
        )
    config = {
        "block_size": 16,
        "num_blocks": 2400,
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 256,
        "max_model_len": 4096,
        "enable_prefix_caching": True,
    }
    return {
        "name": f"mixed {num_requests} reqs",
        "workload": {"config": config, "requests": requests},
        "measure_from": 0,
        "num_steps": 100_000,
    }


def time_stepscope(case: dict[str, Any]) -> dict[str, Any]:
    workload = parse_workload(json.dumps(case["workload"]), source=case["name"])
    scheduler = Scheduler(workload.config)
    arrivals: dict[int, list[Any]] = {}
    for spec in workload.requests:
        request = spec.make_request(scheduler.block_hasher)
        arrivals.setdefault(spec.arrival_step, []).append(request)
    timing = time_steps(
        scheduler,
        arrivals,
        ModelRunnerOutput.from_sampled,
        case["measure_from"],
        case["num_steps"],
    )
    return {"name": case["name"], **timing}


def time_vllm(cases: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    venv = Path(os.environ.get("VLLM_ORACLE_VENV", Path.home() / ".cache" / "vllm-oracle-venv"))
    python = venv / "bin" / "python"
    if not python.exists() or not (ORACLE_DIR / "vllm_oracle.py").exists():
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(cases, handle)
    try:
        result = subprocess.run(
            [str(python), str(HERE / "vllm_scheduler_cost.py"), str(ORACLE_DIR), handle.name],
            capture_output=True,
            text=True,
            check=True,
            cwd=HERE,
        )
    finally:
        os.unlink(handle.name)
    parsed: list[dict[str, Any]] = json.loads(result.stdout.strip().splitlines()[-1])
    return parsed


def table(ours: list[dict[str, Any]], theirs: list[dict[str, Any]] | None) -> str:
    header = "| workload | steps | preemptions | stepscope schedule / update (µs) |"
    if theirs is not None:
        header = header.replace("| preemptions |", "| preemptions (ours / vLLM) |")
    rule = "|---|---:|---:|---:|"
    if theirs is not None:
        header += " vLLM schedule / update (µs) | ratio (total) |"
        rule += "---:|---:|"
    lines = [header, rule]
    for index, mine in enumerate(ours):
        preemptions = str(mine["preemptions"])
        if theirs is not None:
            preemptions += f" / {theirs[index]['preemptions']}"
        row = (
            f"| {mine['name']} | {mine['steps']} | {preemptions} | "
            f"{mine['schedule_us']:.1f} / {mine['update_us']:.1f} |"
        )
        if theirs is not None:
            other = theirs[index]
            ratio = (mine["schedule_us"] + mine["update_us"]) / (
                other["schedule_us"] + other["update_us"]
            )
            mark = "ok" if ratio <= GOAL else "over goal"
            row += (
                f" {other['schedule_us']:.1f} / {other['update_us']:.1f} | {ratio:.2f} ({mark}) |"
            )
        lines.append(row)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run)")
    args = parser.parse_args()
    num_steps = 20 if args.quick else 200
    cases = [decode_case(n, num_steps) for n in (64, 256, 1024)]
    cases.append(mixed_case(40 if args.quick else 400))
    ours = [time_stepscope(case) for case in cases]
    theirs = time_vllm(cases)
    text = table(ours, theirs)
    if theirs is None:
        text += "\n\nvLLM not available (build ../shared/oracle's venv to compare)."
    print(text)
    if args.results:
        heading = (
            f"## scheduler_cost.py ({date.today()}, {platform.machine()}, "
            f"Python {platform.python_version()})\n\n"
            "CPU time per step (mean over the measured steps); vLLM 0.33.0's `Scheduler` "
            "with scheduler stats off, run in the same invocation. Ratio = stepscope / vLLM "
            f"of schedule + update; goal ≤ {GOAL}.\n\n"
        )
        write_section(args.results, "scheduler_cost", heading + text)


if __name__ == "__main__":
    main()
