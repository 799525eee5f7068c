"""`stepscope run --model/--device/--dtype` and TOML workloads, through the real command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from test_cli import CASE

CHAT = REPO / "examples" / "workloads" / "chat_poisson.toml"
ENV = {"COLUMNS": "160", "PATH": "/usr/bin:/bin", "NO_COLOR": "1", "OMP_NUM_THREADS": "1"}
"""One torch thread: see `model_checks`."""


def stepscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stepscope", *args], capture_output=True, text=True, env=ENV
    )


def _final(result: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert result.returncode == 0, result.stderr
    final: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])["final"]
    return final


def _assert_clean_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr


def test_a_tiny_model_replaces_the_tape() -> None:
    pytest.importorskip("torch")
    tape = _final(stepscope("run", str(CASE), "--jsonl"))
    model = _final(stepscope("run", str(CASE), "--jsonl", "--model", "tiny", "--device", "cpu"))
    assert model.keys() == tape.keys()
    assert all(
        m["output_token_ids"] != t["output_token_ids"]
        for m, t in zip(model.values(), tape.values(), strict=True)
    )


def test_a_toml_workload_runs_with_the_tape_and_the_model() -> None:
    tape = stepscope("run", str(CHAT))
    assert tape.returncode == 0, tape.stderr
    assert "chat_poisson.toml" in tape.stdout and "40 requests: 40 length" in tape.stdout
    if _has_torch():
        model = stepscope("run", str(CHAT), "--model", "tiny", "--dtype", "bfloat16")
        assert model.returncode == 0, model.stderr
        assert "model tiny" in model.stdout and "40 requests" in model.stdout


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (("--model", "gpt-9"), ("--model 'gpt-9': expected tape, a preset",)),
        (("--model", "tiny", "--dtype", "float16"), ("--dtype 'float16'",)),
        (("--model", "tiny", "--device", "tpu"), ("--device 'tpu'",)),
    ],
)
def test_bad_model_options_are_one_line_and_exit_2(
    args: tuple[str, ...], needles: tuple[str, ...]
) -> None:
    _assert_clean_error(stepscope("run", str(CASE), *args), *needles)


def test_cuda_without_a_device_is_one_line_and_exit_2() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("there is a CUDA device here")
    _assert_clean_error(
        stepscope("run", str(CASE), "--model", "tiny", "--device", "cuda"), "--device cuda"
    )


def test_a_bad_toml_workload_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(CHAT.read_text().replace("rate = 0.6", "rate = 0"))
    _assert_clean_error(
        stepscope("run", str(bad)), f"{bad}:", "arrivals.rate: must be greater than 0"
    )


def test_token_ids_outside_the_vocabulary_are_one_line_and_exit_2(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    workload = json.loads(CASE.read_text())
    workload["requests"][1]["prompt_token_ids"][0] = 99999
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload))
    _assert_clean_error(
        stepscope("run", str(path), "--model", "tiny"), "request 'r1'", "vocab_size 32000"
    )


def _run_without_torch(*args: str) -> subprocess.CompletedProcess[str]:
    """`stepscope` in an interpreter where `import torch` fails."""
    code = "import sys; sys.modules['torch'] = None; from stepscope.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=ENV
    )


def test_the_tape_needs_no_torch_and_a_model_says_how_to_get_it() -> None:
    tape = _run_without_torch("run", str(CASE), "--jsonl")
    assert tape.returncode == 0, tape.stderr
    _assert_clean_error(
        _run_without_torch("run", str(CASE), "--model", "tiny"),
        "needs PyTorch",
        "pip install torch",
    )
