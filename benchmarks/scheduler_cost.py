"""CPU time per step of `schedule()` and `update_from_output()`: stepscope next to vLLM 0.33.0.

    python benchmarks/scheduler_cost.py [--results benchmarks/RESULTS.md] [--quick]
                                        [--baseline GIT_REF] [--rounds N]

Workloads: (a) N requests decoding together (N = 64, 256, 1024; prompt 128, block
size 16, budget 8192, max_num_seqs 1024, prefix caching on, no preemption), timed
once every request is decoding; (b) a mixed load with staggered arrivals, prompts
64–2048, outputs 16–256 and a KV pool tight enough to preempt, timed over the whole
run; (c) production features: decode N=256 with ngram speculative decoding k=3 (the
fake model accepts a seeded pattern of drafts and hands k new ones to
`update_draft_token_ids` after each update, timed with the update), and the mixed load
with LoRA (max_loras 2, 4 adapters, so the LoRA gate skips); (d) chat: 600 multi-turn
conversations at max_num_seqs 256, each turn's prompt the conversation so far (prefix
hits on a shared system prompt and on earlier turns), long prompts chunked, a KV pool
tight enough to preempt, timed over 1,000 steps once the running list is full; (e) hybrid
KV cache groups: the mixed load and chat with gpt-oss's groups (full attention and a
128-token sliding window) and the mixed load with a 256-token chunked local group. Where the
vLLM venv exists (`.ci/vllm-venv` builds it), the same workloads run through vLLM's own
scheduler in a subprocess of the same run and the ratio stepscope / vLLM is printed
(goal: at most 0.3); the two must agree on steps, preemptions and scheduled tokens,
else the run says so and exits 1.

With `--baseline GIT_REF` the engine package as at that ref runs the plain cases (a-d) in
the same process, alternating with this checkout's, and a second table prints after / before
per case: what a change to the engine costs the path every run takes. `--rounds N` times
each case N times (the order turning each round) and keeps each side's fastest.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import vllm_venv
from baseline_engine import EngineApi, baseline_engine, current_engine
from fake_drafter import case_drafter
from results import heading, write_section
from step_timer import time_steps
from workloads import (
    CHUNKED_LOCAL_256,
    SLIDING_WINDOW_128,
    chat_case,
    decode_case,
    hybrid_case,
    lora_mixed_case,
    mixed_case,
    spec_decode_case,
)

GOAL = 0.3


def time_stepscope(case: dict[str, Any], engine: EngineApi) -> dict[str, Any]:
    workload = engine.parse_workload(json.dumps(case["workload"]), source=case["name"])
    scheduler = engine.Scheduler(workload.config)
    arrivals: dict[int, list[Any]] = {}
    for spec in workload.requests:
        request = spec.make_request(scheduler.block_hasher)
        arrivals.setdefault(spec.arrival_step, []).append(request)

    def draft_token_ids(req_ids: list[str], drafts: list[list[int]]) -> Any:
        return engine.DraftTokenIds(tuple(req_ids), tuple(tuple(d) for d in drafts))

    timing = time_steps(
        scheduler,
        arrivals,
        engine.ModelRunnerOutput.from_sampled,
        case["measure_from"],
        case["num_steps"],
        drafter=case_drafter(case, workload.config.num_speculative_tokens, draft_token_ids),
    )
    return {"name": case["name"], **timing}


def fastest(
    cases: list[dict[str, Any]], engines: dict[str, EngineApi], rounds: int
) -> dict[str, list[dict[str, Any]]]:
    """Each engine's fastest timing of each case over `rounds`, the engines' order turning
    every round (so neither always runs on a warmer or quieter machine)."""
    best: dict[str, list[dict[str, Any]]] = {name: [] for name in engines}
    for case in cases:
        order = list(engines)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in engines}
        for _ in range(rounds):
            for name in order:
                runs[name].append(time_stepscope(case, engines[name]))
            order.reverse()
        for name, timings in runs.items():
            best[name].append(min(timings, key=_total_us))
    return best


def _total_us(timing: dict[str, Any]) -> float:
    return float(timing["schedule_us"] + timing["update_us"])


def time_vllm(cases: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    if not vllm_venv.available():
        return None
    timings: list[dict[str, Any]] = vllm_venv.run_worker("vllm_scheduler_cost.py", cases)
    return timings


def table(ours: list[dict[str, Any]], theirs: list[dict[str, Any]] | None) -> str:
    header = (
        "| workload | steps | preemptions | scheduled tokens | stepscope schedule / update (µs) |"
    )
    rule = "|---|---:|---:|---:|---:|"
    if theirs is not None:
        header = header.replace("preemptions |", "preemptions (ours / vLLM) |")
        header = header.replace("tokens |", "tokens (ours / vLLM) |")
        header += " vLLM schedule / update (µs) | ratio (total) |"
        rule += "---:|---:|"
    rows = [row(mine, None if theirs is None else theirs[i]) for i, mine in enumerate(ours)]
    return "\n".join([header, rule, *rows])


def row(mine: dict[str, Any], other: dict[str, Any] | None) -> str:
    """One case: its step count, decisions (both sides'), and times (with the ratio)."""
    preemptions, tokens = str(mine["preemptions"]), str(mine["scheduled_tokens"])
    if other is not None:
        preemptions += f" / {other['preemptions']}"
        tokens += f" / {other['scheduled_tokens']}"
    line = (
        f"| {mine['name']} | {mine['steps']} | {preemptions} | {tokens} | "
        f"{mine['schedule_us']:.1f} / {mine['update_us']:.1f} |"
    )
    if other is None:
        return line
    ratio = (mine["schedule_us"] + mine["update_us"]) / (other["schedule_us"] + other["update_us"])
    mark = "ok" if ratio <= GOAL else "over goal"
    if disagreement(mine, other):
        mark += ", DECISIONS DIFFER"
    times = f"{other['schedule_us']:.1f} / {other['update_us']:.1f}"
    return line + f" {times} | {ratio:.2f} ({mark}) |"


def disagreement(mine: dict[str, Any], other: dict[str, Any]) -> str | None:
    """What the two schedulers decided differently on a case, or None when they agree."""
    keys = ("steps", "preemptions", "scheduled_tokens")
    differ = [f"{key} {mine[key]} vs vLLM {other[key]}" for key in keys if mine[key] != other[key]]
    return f"{mine['name']}: " + ", ".join(differ) if differ else None


def plain_cases(*, quick: bool) -> list[dict[str, Any]]:
    num_steps = 20 if quick else 200
    num_mixed = 40 if quick else 400
    return [
        *(decode_case(n, num_steps) for n in (64, 256, 1024)),
        mixed_case(num_mixed),
        spec_decode_case(256, num_steps, num_speculative_tokens=3),
        lora_mixed_case(num_mixed, max_loras=2, num_adapters=4),
        chat_case(150, 150, 40) if quick else chat_case(600, 600, 1000),
    ]


def hybrid_cases(*, quick: bool) -> list[dict[str, Any]]:
    mixed = mixed_case(40 if quick else 400)
    chat = chat_case(150, 150, 40) if quick else chat_case(600, 600, 1000)
    return [
        hybrid_case(mixed, SLIDING_WINDOW_128, "+ sliding window 128"),
        hybrid_case(chat, SLIDING_WINDOW_128, "+ sliding window 128"),
        hybrid_case(mixed, CHUNKED_LOCAL_256, "+ chunked local 256"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run)")
    parser.add_argument("--baseline", metavar="GIT_REF", help="also time the engine at this ref")
    parser.add_argument("--rounds", type=int, default=1, help="keep the fastest of N timings")
    args = parser.parse_args()
    plain = plain_cases(quick=args.quick)
    hybrid = hybrid_cases(quick=args.quick)
    current = current_engine()
    with tempfile.TemporaryDirectory() as folder:
        engines = {"current": current}
        if args.baseline:
            engines["baseline"] = baseline_engine(args.baseline, Path(folder))
        before_after = fastest(plain, engines, args.rounds)
    ours = before_after["current"] + fastest(hybrid, {"current": current}, args.rounds)["current"]
    text, mismatches = against_vllm(plain + hybrid, ours)
    if args.baseline:
        text += "\n\n" + baseline_table(args.baseline, before_after)
    print(text)
    if args.results:
        write_section(args.results, "scheduler_cost", intro(args.rounds) + text)
    if mismatches:
        sys.exit(f"scheduler_cost: decisions differ from vLLM's on {len(mismatches)} case(s)")


def against_vllm(
    workloads: list[dict[str, Any]], ours: list[dict[str, Any]]
) -> tuple[str, list[str]]:
    """The table of this engine next to vLLM's scheduler, and the cases they decide apart."""
    theirs = time_vllm(workloads)
    text = table(ours, theirs)
    if theirs is None:
        return text + "\n\nvLLM not available (build its venv with .ci/vllm-venv to compare).", []
    differ = [disagreement(m, o) for m, o in zip(ours, theirs, strict=True)]
    mismatches = [d for d in differ if d is not None]
    if mismatches:
        text += "\n\n**DECISIONS DIFFER from vLLM's** (timings not comparable):\n"
        text += "\n".join(f"- {m}" for m in mismatches)
    return text, mismatches


def baseline_table(ref: str, before_after: dict[str, list[dict[str, Any]]]) -> str:
    """After / before per plain case; the two engines must decide alike."""
    lines = [
        f"Before / after: the engine at `{ref}` and this checkout's, on the plain cases.",
        "",
        "| workload | before: schedule / update (µs) | after (µs) | after / before |",
        "|---|---:|---:|---:|",
    ]
    for before, after in zip(before_after["baseline"], before_after["current"], strict=True):
        lines.append(_before_after_row(before, after))
    return "\n".join(lines)


def _before_after_row(before: dict[str, Any], after: dict[str, Any]) -> str:
    same = disagreement(after, before)
    mark = "" if same is None else " (DECISIONS DIFFER)"
    return (
        f"| {after['name']} | {before['schedule_us']:.1f} / {before['update_us']:.1f} | "
        f"{after['schedule_us']:.1f} / {after['update_us']:.1f} | "
        f"{_total_us(after) / _total_us(before):.3f}{mark} |"
    )


def intro(rounds: int) -> str:
    return (
        f"{heading('scheduler_cost.py')}\n\n"
        "CPU time per step (mean over the measured steps); vLLM 0.33.0's `Scheduler` "
        "with scheduler stats off, run in the same invocation. Update = "
        "`update_from_output` (+ `update_draft_token_ids` with spec decoding: the fake model "
        "accepts a seeded pattern of drafts and proposes k after each step, the same on both "
        "sides). Preemptions and scheduled tokens count the whole run, both sides must agree. "
        f"Ratio = stepscope / vLLM of schedule + update; goal ≤ {GOAL}. stepscope's figures are "
        f"the fastest of {rounds} timing(s) per case.\n\n"
    )


if __name__ == "__main__":
    main()
