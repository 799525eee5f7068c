"""Fuzzed workloads (JSON and TOML) through the CLI's entry point: `run` and `record` exit
0, 1 or 2, never with a traceback, hold bounded memory, and leave no trace behind on error.

Each example mutates a valid workload at one to three places with hostile values (huge
and negative integers, NaN and infinities, control, NUL and bidi characters, wrong
types). A valid mutation of a step or request count is clamped so an example runs in a
fraction of a second: a long run is not a bug.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import resource
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stepscope.cli import main

CASE = TESTS / "conformance" / "03_s03_fcfs_tail_victim_recompute.json"
MEMORY_LIMIT = "256M"
MAX_RSS_GROWTH_KB = 1024 * 1024
"""The test process may grow by at most 1 GB over this module's examples."""
CLAMPS = {"max_steps": 300, "num_requests": 64, "value": 2000, "max": 2000, "min": 64}
"""A valid count above its clamp (and below a refusal's size) is cut to it."""
REFUSAL_SIZE = 10**7

HOSTILE_STRINGS = [
    "",
    "\x1b]0;pwned\x07",
    "\x1b[31mred",
    "a\x00b",
    "x\u202ey",
    "\u2066",
    "[bold]markup[/]",
    "é" * 3,
    "x" * 2000,
]
INTEGERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-3, max_value=300),
    st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, -(2**31) - 1, 2**63 - 1, 2**63, 10**12]),
    st.sampled_from([REFUSAL_SIZE * 10, 10**8, 5 * 10**6]),
)
SCALARS = st.one_of(
    INTEGERS,
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.5, 1e308]),
    st.booleans(),
    st.sampled_from(HOSTILE_STRINGS),
    st.text(max_size=12),
)
ANY_VALUE = st.one_of(
    SCALARS,
    st.none(),
    st.lists(SCALARS, max_size=4),
    st.dictionaries(st.sampled_from(["a", "value", "id"]), SCALARS, max_size=2),
)
VALUES = st.integers(0, 9).flatmap(lambda kind: INTEGERS if kind < 7 else ANY_VALUE)
"""Mostly integers, which every size knob is, so that runs reach the engine and recorder."""

REQUEST_KEYS = [
    "id", "arrival_step", "arrival_time", "prompt_token_ids", "output_token_ids", "max_tokens",
    "priority", "eos_token_id", "min_tokens", "stop_token_ids", "abort_step",
    "abort_before_update", "temperature", "top_k", "top_p", "seed", "unknown",
]  # fmt: skip
CONFIG_KEYS = [
    "block_size", "num_blocks", "max_num_batched_tokens", "max_num_seqs", "max_model_len",
    "policy", "enable_prefix_caching", "enable_chunked_prefill", "long_prefill_token_threshold",
    "watermark", "max_num_scheduled_tokens", "max_num_active_seqs", "async_scheduling",
    "vllm_version", "unknown",
]  # fmt: skip
JSON_PATHS = st.one_of(
    st.tuples(st.sampled_from(["max_steps", "max_steps", "description", "requests", "other"])),
    *[st.tuples(st.just("config"), st.sampled_from(CONFIG_KEYS))] * 2,
    *[st.tuples(st.just("requests"), st.integers(0, 2), st.sampled_from(REQUEST_KEYS))] * 4,
)

TOML_BASE: dict[str, Any] = {
    "seed": 1,
    "num_requests": 8,
    "vocab_size": 1000,
    "max_steps": 300,
    "config": {"block_size": 4, "num_blocks": 64, "max_num_batched_tokens": 64,
               "max_num_seqs": 8, "max_model_len": 128},
    "arrivals": {"process": "poisson", "rate": 1.0},
    "prompt_len": {"distribution": "uniform", "min": 4, "max": 40},
    "output_len": {"distribution": "lognormal", "mean": 8.0, "sigma": 0.5},
    "prefix_groups": [{"share": 0.5, "prefix_len": 8}],
    "priorities": {"values": [0, 1], "weights": [1.0, 2.0]},
    "sampling": {"eos_token_id": 2, "stop_token_ids": [5], "temperature": 0.0},
}  # fmt: skip
TOML_PATHS = st.sampled_from(
    [
        (key,)
        for key in (
            "seed",
            "num_requests",
            "vocab_size",
            "max_steps",
            "first_token_id",
            "id_prefix",
        )
    ]
    + [("config", key) for key in CONFIG_KEYS[:6]]
    + [("arrivals", key) for key in ("process", "rate", "size", "every", "interval")]
    + [("prompt_len", key) for key in ("distribution", "min", "max", "value")]
    + [("output_len", key) for key in ("distribution", "mean", "sigma", "min", "max", "value")]
    + [("prefix_groups", 0, "share"), ("prefix_groups", 0, "prefix_len")]
    + [("priorities", "values"), ("priorities", "weights")]
    + [("sampling", key) for key in ("eos_token_id", "stop_token_ids", "top_p", "seed")]
)


def _set(document: Any, path: tuple[Any, ...], value: Any) -> None:
    """Set `path` in `document` to `value`, clamping a valid count to keep the run short."""
    target = document
    for part in path[:-1]:
        target = target[part] if not isinstance(target, dict) else target.setdefault(part, {})
        if not isinstance(target, dict | list):
            return
    key = path[-1]
    if isinstance(value, int) and not isinstance(value, bool):
        clamp = CLAMPS.get(str(key))
        if clamp is not None and clamp < value < REFUSAL_SIZE:
            value = clamp
    if isinstance(target, dict) or (
        isinstance(target, list) and isinstance(key, int) and key < len(target)
    ):
        target[key] = value


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(
            value) else repr(value)  # fmt: skip
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value if item is not None) + "]"
    if isinstance(value, dict):
        items = (f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items() if v is not None)
        return "{" + ", ".join(items) + "}"
    return '""'


def _toml(document: dict[str, Any]) -> str:
    lines = [f"{k} = {_toml_value(v)}" for k, v in document.items() if not _is_table(v)]
    for key, value in document.items():
        if isinstance(value, dict):
            lines += [f"[{key}]", *(f"{k} = {_toml_value(v)}" for k, v in value.items())]
        elif _is_table(value):
            for table in value:
                lines += [f"[[{key}]]", *(f"{k} = {_toml_value(v)}" for k, v in table.items())]
    return "\n".join(line for line in lines if not line.endswith("= None")) + "\n"


def _is_table(value: Any) -> bool:
    return isinstance(value, dict) or (
        isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)
    )


def _cli(args: list[str]) -> tuple[int, str, str]:
    """Run `stepscope ARGS` through its entry point; an exception that escapes it fails."""
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["stepscope", *args]
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            main()
        code: Any = 0
    except SystemExit as exit_:
        code = exit_.code
    finally:
        sys.argv = argv
    return (code if isinstance(code, int) else 1), stdout.getvalue(), stderr.getvalue()


@pytest.fixture(autouse=True)
def memory_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_MEMORY_LIMIT", MEMORY_LIMIT)
    monkeypatch.setenv("NO_COLOR", "1")


def _check(workload: Path, tmp_path: Path, command: str, baseline_kb: int) -> None:
    output = tmp_path / "out.duckdb"
    output.unlink(missing_ok=True)
    args = [command, str(workload)] + (["-o", str(output)] if command == "record" else [])
    code, _, stderr = _cli(args)
    assert code in (0, 1, 2), (code, stderr)
    if code == 2:
        assert len(stderr.strip().splitlines()) == 1, stderr
        assert command != "record" or not output.exists(), "a trace was left behind"
    if code == 0 and command == "record":
        assert output.exists()
    growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - baseline_kb
    assert growth < MAX_RSS_GROWTH_KB, f"memory grew by {growth // 1024} MB"


@pytest.fixture(scope="module")
def baseline_kb() -> int:
    """The process's peak before this module's first example (a pytest-xdist worker may
    have run other test files first, and their peaks are not this module's growth)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


FUZZ = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(
    mutations=st.lists(st.tuples(JSON_PATHS, VALUES), min_size=1, max_size=3),
    command=st.sampled_from(["run", "record"]),
)
def test_fuzzed_json_workloads(
    tmp_path: Path, baseline_kb: int, mutations: list[Any], command: str
) -> None:
    document = json.loads(CASE.read_text())
    for path, value in mutations:
        _set(document, path, value)
    workload = tmp_path / "fuzz.json"
    workload.write_text(json.dumps(document, allow_nan=True))
    _check(workload, tmp_path, command, baseline_kb)


@FUZZ
@given(
    mutations=st.lists(st.tuples(TOML_PATHS, VALUES), min_size=1, max_size=3),
    command=st.sampled_from(["run", "record"]),
)
def test_fuzzed_toml_workloads(
    tmp_path: Path, baseline_kb: int, mutations: list[Any], command: str
) -> None:
    document = json.loads(json.dumps(TOML_BASE))
    for path, value in mutations:
        _set(document, path, value)
    workload = tmp_path / "fuzz.toml"
    workload.write_text(_toml(document))
    _check(workload, tmp_path, command, baseline_kb)


def test_fuzzed_bytes_are_refused_cleanly(tmp_path: Path) -> None:
    """Not text, not JSON: a one-line error."""
    for name, content in (("a.json", b"\xff\xfe{"), ("b.toml", b"\x00\x01"), ("c.json", b"")):
        path = tmp_path / name
        path.write_bytes(content)
        code, _, stderr = _cli(["run", str(path)])
        assert code == 2 and len(stderr.strip().splitlines()) == 1, stderr
