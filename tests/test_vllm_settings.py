"""Where a vLLM engine records: STEPSCOPE_TRACE or vLLM's additional_config (no vLLM needed)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from stepscope.tracer.vllm.attach.settings import redact, trace_path


def _config(**stepscope: object) -> SimpleNamespace:
    return SimpleNamespace(additional_config={"stepscope": stepscope} if stepscope else {})


def test_unset_means_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STEPSCOPE_TRACE", raising=False)
    assert trace_path(_config()) is None
    assert trace_path(SimpleNamespace(additional_config=None)) is None


def test_a_file_with_the_engine_process_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_TRACE", "/traces/run-{pid}.duckdb")
    assert trace_path(_config()) == Path(f"/traces/run-{os.getpid()}.duckdb")


def test_a_directory_gets_one_new_file_per_engine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STEPSCOPE_TRACE", str(tmp_path))
    path = trace_path(_config())
    assert path is not None and path.parent == tmp_path
    assert path.name.startswith("vllm-") and path.name.endswith(f"-{os.getpid()}.duckdb")
    monkeypatch.setenv("STEPSCOPE_TRACE", str(tmp_path / "not-yet") + os.sep)
    later = trace_path(_config())
    assert later is not None and later.parent == tmp_path / "not-yet"
    assert later.parent.is_dir(), "the directory is made, so the engine can create its trace"


def test_vllm_config_when_the_environment_is_silent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("STEPSCOPE_TRACE", raising=False)
    monkeypatch.delenv("STEPSCOPE_TRACE_REDACT", raising=False)
    config = _config(trace=str(tmp_path / "t.duckdb"), redact=True)
    assert trace_path(config) == tmp_path / "t.duckdb"
    assert redact(config)
    assert not redact(_config())
    monkeypatch.setenv("STEPSCOPE_TRACE", str(tmp_path / "env.duckdb"))
    assert trace_path(config) == tmp_path / "env.duckdb"
