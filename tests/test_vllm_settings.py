"""Where a vLLM engine records: STEPSCOPE_TRACE or vLLM's additional_config (no vLLM needed)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from stepscope.tracer.segments import KeepRule, Retention, SegmentEvery, SegmentSettings
from stepscope.tracer.vllm.attach.dp_rank import DataParallelRank
from stepscope.tracer.vllm.attach.settings import (
    backlog_steps,
    low_priority,
    prune,
    redact,
    segments,
    trace_path,
)


def _config(**stepscope: object) -> SimpleNamespace:
    return SimpleNamespace(
        additional_config={"stepscope": stepscope} if stepscope else {}, instance_id="server-7"
    )


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


def test_a_segment_setting_makes_the_recording_a_folder_per_engine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STEPSCOPE_TRACE", str(tmp_path) + os.sep)
    monkeypatch.setenv("STEPSCOPE_TRACE_SEGMENT", "60s")
    monkeypatch.setenv("STEPSCOPE_TRACE_RETAIN", "2GB,24h")
    path = trace_path(_config())
    assert path is not None and path.parent == tmp_path and path.suffix == ""
    assert path.name.startswith("vllm-") and path.name.endswith(f"-{os.getpid()}")
    assert segments(_config()) == SegmentSettings(
        SegmentEvery(seconds=60.0), Retention(max_bytes=2 * 10**9, max_age_s=24 * 3600.0)
    )
    ranked = trace_path(_config(), DataParallelRank(1, 2))
    assert ranked is not None and ranked.name == "rank1" and ranked.parent.name == "vllm-server-7"
    monkeypatch.setenv("STEPSCOPE_TRACE", str(tmp_path / "run-{rank}"))
    assert trace_path(_config(), DataParallelRank(1, 2)) == tmp_path / "run-1"


def test_a_segmented_recording_named_as_a_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_TRACE", "/traces/run.duckdb")
    monkeypatch.setenv("STEPSCOPE_TRACE_SEGMENT", "5000steps")
    with pytest.raises(ValueError, match=r"^STEPSCOPE_TRACE='/traces/run.duckdb': a segmented"):
        trace_path(_config())


def test_segments_through_vllm_config_when_the_environment_is_silent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("STEPSCOPE_TRACE_SEGMENT", raising=False)
    monkeypatch.delenv("STEPSCOPE_TRACE_RETAIN", raising=False)
    assert segments(_config()) is None
    config = _config(segment="5000steps", retain="512MB")
    assert segments(config) == SegmentSettings(SegmentEvery(steps=5000), Retention(512 * 10**6))
    monkeypatch.setenv("STEPSCOPE_TRACE_SEGMENT", "2m")
    assert segments(config) == SegmentSettings(SegmentEvery(seconds=120.0), Retention(512 * 10**6))


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        ("STEPSCOPE_TRACE_SEGMENT", "5000", "expected the steps or the time a segment spans"),
        ("STEPSCOPE_TRACE_SEGMENT", "0s", "expected the steps or the time a segment spans"),
        ("STEPSCOPE_TRACE_RETAIN", "2 parsecs", "expected a size, an age or both"),
        ("STEPSCOPE_TRACE_RETAIN", "2GB,3GB", "expected a size, an age or both"),
    ],
)
def test_a_malformed_segment_setting_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, message: str
) -> None:
    monkeypatch.setenv("STEPSCOPE_TRACE_SEGMENT", "60s")
    monkeypatch.setenv(env, value)
    with pytest.raises(ValueError, match=rf"^{env}='{value}': {message}") as raised:
        segments(_config())
    assert "\n" not in str(raised.value)


def test_a_retention_without_segments_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STEPSCOPE_TRACE_SEGMENT", raising=False)
    monkeypatch.setenv("STEPSCOPE_TRACE_RETAIN", "2GB")
    with pytest.raises(ValueError, match="needs STEPSCOPE_TRACE_SEGMENT"):
        segments(_config())


def test_a_keep_rule_spares_segments_up_to_retentions_size_or_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STEPSCOPE_TRACE_SEGMENT", "60s")
    monkeypatch.setenv("STEPSCOPE_TRACE_RETAIN", "2GB")
    monkeypatch.setenv("STEPSCOPE_TRACE_KEEP", " num_preemptions > 0 ")
    chosen = segments(_config())
    assert chosen is not None and chosen.keep == KeepRule("num_preemptions > 0", 2 * 10**9)
    monkeypatch.delenv("STEPSCOPE_TRACE_KEEP")
    config = _config(keep="num_waiting_after > 100", keep_max="500MB")
    chosen = segments(config)
    assert chosen is not None and chosen.keep == KeepRule("num_waiting_after > 100", 500 * 10**6)


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        ("STEPSCOPE_TRACE_KEEP", "num_preemption > 0", 'Binder Error: Referenced column "num_p'),
        ("STEPSCOPE_TRACE_KEEP", "1) FROM x; COPY y TO 'z'; SELECT (1", "Parser Error"),
        ("STEPSCOPE_TRACE_KEEP_MAX", "lots", "expected a size"),
    ],
)
def test_a_malformed_keep_rule_is_one_line_naming_its_setting(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, message: str
) -> None:
    monkeypatch.setenv("STEPSCOPE_TRACE_SEGMENT", "60s")
    monkeypatch.setenv("STEPSCOPE_TRACE_KEEP", "num_preemptions > 0")
    monkeypatch.setenv(env, value)
    with pytest.raises(ValueError, match=rf"^{env}=") as raised:
        segments(_config())
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_keep_max_without_a_keep_rule_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_TRACE_SEGMENT", "60s")
    monkeypatch.delenv("STEPSCOPE_TRACE_KEEP", raising=False)
    monkeypatch.setenv("STEPSCOPE_TRACE_KEEP_MAX", "1GB")
    with pytest.raises(ValueError, match="needs STEPSCOPE_TRACE_KEEP as well"):
        segments(_config())


def test_the_backlog_is_the_recorder_s_default_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STEPSCOPE_TRACE_BACKLOG", raising=False)
    assert backlog_steps(_config()) is None
    assert backlog_steps(_config(backlog=4096)) == 4096
    monkeypatch.setenv("STEPSCOPE_TRACE_BACKLOG", "2048")
    assert backlog_steps(_config(backlog=4096)) == 2048


@pytest.mark.parametrize("value", ["0", "-5", "lots", "1.5"])
def test_a_malformed_backlog_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("STEPSCOPE_TRACE_BACKLOG", value)
    with pytest.raises(ValueError, match=rf"^STEPSCOPE_TRACE_BACKLOG='{value}': want a positive"):
        backlog_steps(_config())


def test_the_recorder_runs_at_low_priority_unless_set_to_normal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("STEPSCOPE_TRACE_PRIORITY", raising=False)
    assert low_priority(_config())
    assert not low_priority(_config(priority="normal"))
    monkeypatch.setenv("STEPSCOPE_TRACE_PRIORITY", "Low")
    assert low_priority(_config(priority="normal"))
    monkeypatch.setenv("STEPSCOPE_TRACE_PRIORITY", "normal")
    assert not low_priority(_config())


def test_a_malformed_priority_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STEPSCOPE_TRACE_PRIORITY", raising=False)
    with pytest.raises(ValueError, match=r"^additional_config stepscope.priority='high': want one"):
        low_priority(_config(priority="high"))


def test_pruning_at_start_names_the_directory_and_its_bound(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("STEPSCOPE_TRACE_PRUNE", raising=False)
    monkeypatch.setenv("STEPSCOPE_TRACE", str(tmp_path / "traces") + os.sep)
    monkeypatch.setenv("STEPSCOPE_TRACE_SEGMENT", "60s")
    assert prune(_config()) is None
    monkeypatch.setenv("STEPSCOPE_TRACE_PRUNE", "20GB,7d")
    assert prune(_config()) == (tmp_path / "traces", Retention(20 * 10**9, 7 * 86400.0))
    monkeypatch.delenv("STEPSCOPE_TRACE_PRUNE")
    assert prune(_config(prune="1h")) == (tmp_path / "traces", Retention(None, 3600.0))
    monkeypatch.setenv("STEPSCOPE_TRACE", str(tmp_path))  # a directory that exists, no `/`
    assert prune(_config(prune="1h")) == (tmp_path, Retention(None, 3600.0))


@pytest.mark.parametrize(
    ("trace", "segment", "value", "message"),
    [
        ("{tmp}/", "60s", "lots", r"^STEPSCOPE_TRACE_PRUNE='lots': expected a size, an age"),
        ("{tmp}/", None, "2GB", r"^STEPSCOPE_TRACE_PRUNE='2GB' needs STEPSCOPE_TRACE_SEGMENT"),
        ("{tmp}/run", "60s", "2GB", r"needs STEPSCOPE_TRACE to name a directory of recordings"),
        ("{tmp}/run-{{rank}}", "60s", "2GB", r"needs STEPSCOPE_TRACE to name a directory"),
    ],
)
def test_a_malformed_or_misplaced_prune_setting_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    trace: str,
    segment: str | None,
    value: str,
    message: str,
) -> None:
    """Pruning a folder's parent could delete recordings nobody meant: a directory only."""
    monkeypatch.setenv("STEPSCOPE_TRACE", trace.format(tmp=tmp_path))
    if segment is None:
        monkeypatch.delenv("STEPSCOPE_TRACE_SEGMENT", raising=False)
    else:
        monkeypatch.setenv("STEPSCOPE_TRACE_SEGMENT", segment)
    monkeypatch.setenv("STEPSCOPE_TRACE_PRUNE", value)
    with pytest.raises(ValueError, match=message) as raised:
        prune(_config())
    assert "\n" not in str(raised.value)
