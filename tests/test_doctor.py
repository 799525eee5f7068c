"""`stepscope doctor` on real recordings: each kind of finding on a workload that shows it and
not on its near twin, the cure it proposes replayed and shown to work, the report's forms,
and bad input."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import REPO
from doctor_workloads import Twins, held_by_prefill_interval, twins
from stepscope.replay.doctor import KINDS, Severity, diagnose
from stepscope.replay.from_step import WHOLE, StepWindow
from stepscope.replay.whatif import replay_whatif
from test_cli import stepscope
from test_hardening_errors import assert_one_line_error
from traces import CONFORMANCE, record

TWINS = twins()
FEATURES = [CONFORMANCE.parent / f"conformance_{name}" for name in ("async", "spec", "lora")]


def test_every_kind_has_twins() -> None:
    assert sorted({t.kind for t in TWINS}) == sorted(KINDS)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("doctor")
    paths = {}
    for t in TWINS:
        sick, healthy = folder / f"{t.kind}-sick.duckdb", folder / f"{t.kind}-healthy.duckdb"
        record(t.sick, sick)
        record(t.healthy, healthy)
        paths[t.kind] = (sick, healthy)
    return paths


@pytest.mark.parametrize("twin", TWINS, ids=[t.kind for t in TWINS])
def test_a_kind_is_found_where_it_is_and_its_cure_works(
    twin: Twins, recorded: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    sick, healthy = recorded[twin.kind]
    findings = diagnose(sick, sick, WHOLE).findings
    (finding,) = [f for f in findings if f.kind == twin.kind]
    assert finding.severity >= Severity.WARNING
    assert finding.what_if is not None, finding
    before, after = finding.what_if.effect[finding.what_if.target]
    assert finding.what_if.removes or after <= 0.75 * before
    cured = tmp_path / "cured.duckdb"
    replay_whatif(sick, cured, finding.what_if.knobs)
    still = [f for f in diagnose(cured, cured, WHOLE, what_ifs=False).findings
             if f.kind == twin.kind]  # fmt: skip
    if finding.what_if.removes:
        assert not still, still[0].summary
    else:
        assert not still or _size(still[0]) < _size(finding), (finding.cost, still[0].cost)
    assert not [f.kind for f in diagnose(healthy, healthy, WHOLE).findings]


def _size(finding: object) -> float:
    """A finding's first cost figure: what its kind counts (steps, preemptions, drafts)."""
    return float(next(iter(finding.cost.values())))  # type: ignore[attr-defined]


def _calm(case: Path) -> bool:
    return not any(word in case.stem for word in ("stress", "heavy_kv_pressure"))


CASES = sorted(case for folder in (CONFORMANCE, *FEATURES) for case in folder.glob("*.json"))
CALM = [case for case in CASES if _calm(case)]


def test_the_calm_conformance_cases_have_no_findings(tmp_path: Path) -> None:
    assert len(CALM) > 50
    for case in CALM:
        trace = tmp_path / f"{case.stem}.duckdb"
        record(case, trace)
        findings = diagnose(trace, trace, WHOLE, what_ifs=False).findings
        assert not findings, (case.name, [f.summary for f in findings])


def test_each_findings_evidence_runs_and_shows_rows(
    recorded: dict[str, tuple[Path, Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for kind, (sick, _) in recorded.items():
        link = tmp_path / f"{kind}.duckdb"
        link.symlink_to(sick)
        for finding in diagnose(link, Path(link.name), WHOLE, what_ifs=False).findings:
            words = shlex.split(finding.evidence)
            assert words[:3] == ["stepscope", "sql", link.name], finding.evidence
            monkeypatch.chdir(tmp_path)
            result = stepscope(*words[1:2], str(link), *words[3:], "--csv")
            assert result.returncode == 0, (finding.evidence, result.stderr)
            assert len(result.stdout.splitlines()) > 1, finding.evidence


def test_json_is_one_object_in_the_documented_shape(
    recorded: dict[str, tuple[Path, Path]],
) -> None:
    sick, _ = recorded["head_of_line_blocking"]
    result = stepscope("doctor", str(sick), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"trace", "window", "findings"}
    assert report["window"][0] == 0
    finding = next(f for f in report["findings"] if f["kind"] == "head_of_line_blocking")
    assert {"kind", "severity", "steps", "requests", "cost", "evidence", "what_if"} <= set(finding)
    assert finding["severity"] == "critical"
    assert finding["requests"] == ["big-doc"]
    assert set(finding["what_if"]) >= {"knobs", "effect"}
    assert finding["what_if"]["knobs"]["num_blocks"] > 48


def test_fail_on_sets_the_exit_status(recorded: dict[str, tuple[Path, Path]]) -> None:
    sick, healthy = recorded["admission_stall"]
    assert stepscope("doctor", str(sick), "--no-what-if").returncode == 0
    assert stepscope("doctor", str(sick), "--no-what-if", "--fail-on", "warning").returncode == 1
    assert stepscope("doctor", str(healthy), "--fail-on", "warning").returncode == 0


def test_a_window_limits_the_findings(recorded: dict[str, tuple[Path, Path]]) -> None:
    sick, _ = recorded["head_of_line_blocking"]
    inside = diagnose(sick, sick, StepWindow(0, 30), what_ifs=False)
    after = diagnose(sick, sick, StepWindow(70, None), what_ifs=False)
    assert inside.window == (0, 30)
    assert "head_of_line_blocking" in [f.kind for f in inside.findings]
    assert all(f.steps[0] >= 70 for f in after.findings)
    assert "head_of_line_blocking" not in [f.kind for f in after.findings]


def test_the_text_and_markdown_reports(
    recorded: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    sick, _ = recorded["preemption_thrash"]
    markdown = tmp_path / "doctor.md"
    result = stepscope("doctor", str(sick), "--markdown", str(markdown))
    assert result.returncode == 0, result.stderr
    assert "critical preemption_thrash:" in result.stdout
    assert "what-if: num_blocks=" in result.stdout and "(checked by replay)" in result.stdout
    text = markdown.read_text()
    assert text.startswith("## stepscope doctor:")
    assert "### critical: `preemption_thrash`" in text


def test_request_ids_reach_the_terminal_escaped(tmp_path: Path) -> None:
    workload = next(t for t in TWINS if t.kind == "head_of_line_blocking").sick
    hostile = "big-doc\x1b[2J\x07'; DROP"
    specs = tuple(
        replace(spec, request_id=hostile) if spec.request_id == "big-doc" else spec
        for spec in workload.requests
    )
    trace = tmp_path / "hostile.duckdb"
    record(replace(workload, requests=specs), trace)
    result = stepscope("doctor", str(trace), "--no-what-if")
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "\\x1b[2J\\x07" in result.stdout


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--from-step", "-1"], ["--from-step -1"]),
        (["--from-step", "9999"], ["--from-step 9999"]),
        (["--from-step", "20", "--to-step", "10"], ["--to-step 10"]),
        (["--fail-on", "sometimes"], ["--fail-on"]),
    ],
)
def test_bad_input_is_one_line(
    recorded: dict[str, tuple[Path, Path]], args: list[str], names: list[str]
) -> None:
    sick, _ = recorded["admission_stall"]
    result = stepscope("doctor", str(sick), *args)
    if args[0] == "--fail-on":
        assert result.returncode == 2 and "--fail-on" in result.stderr
        return
    assert_one_line_error(result, *names)


def test_a_missing_or_damaged_trace_is_one_line(tmp_path: Path) -> None:
    assert_one_line_error(stepscope("doctor", str(tmp_path / "none.duckdb")), "none.duckdb")
    damaged = tmp_path / "damaged.duckdb"
    damaged.write_bytes(b"not a trace" * 100)
    assert_one_line_error(stepscope("doctor", str(damaged)), "damaged.duckdb")


def test_a_markdown_report_never_replaces_the_trace(
    recorded: dict[str, tuple[Path, Path]],
) -> None:
    sick, _ = recorded["admission_stall"]
    before = sick.read_bytes()
    assert_one_line_error(stepscope("doctor", str(sick), "--markdown", str(sick)), str(sick))
    assert sick.read_bytes() == before


def test_prefill_held_by_the_interval_is_cured_by_a_shorter_one(tmp_path: Path) -> None:
    sick = tmp_path / "held.duckdb"
    record(held_by_prefill_interval(32), sick)
    (finding,) = [f for f in diagnose(sick, sick, WHOLE).findings if f.kind == "admission_stall"]
    assert "prefill_held" in finding.summary
    assert finding.what_if is not None, finding
    assert finding.what_if.knobs == {"prefill_schedule_interval": 16}
    before, after = finding.what_if.effect[finding.what_if.target]
    assert after < before


def test_what_ifs_from_a_step_start_at_its_checkpoint(tmp_path: Path) -> None:
    """A window's what-ifs replay only the window, from the recorded state at its start."""
    workload = next(t for t in TWINS if t.kind == "head_of_line_blocking").sick
    trace = tmp_path / "blocked.duckdb"
    record(workload, trace, checkpoint_every=10)
    window = StepWindow(20, 60)
    (finding,) = [f for f in diagnose(trace, trace, window).findings
                  if f.kind == "head_of_line_blocking"]  # fmt: skip
    assert finding.steps[0] >= 20 and finding.steps[1] <= 60
    assert finding.what_if is not None
    before, after = finding.what_if.effect[finding.what_if.target]
    assert finding.what_if.removes or after <= 0.75 * before


def test_what_ifs_from_a_step_need_checkpoints(recorded: dict[str, tuple[Path, Path]]) -> None:
    sick, _ = recorded["head_of_line_blocking"]
    result = stepscope("doctor", str(sick), "--from-step", "20")
    assert_one_line_error(result, "no checkpoints", "--no-what-if")
    assert stepscope("doctor", str(sick), "--from-step", "20", "--no-what-if").returncode == 0


def test_the_bundled_vllm_server_recording() -> None:
    """The real vLLM server recording of examples/sweep_capacity/: its preemptions are
    found and a what-if removes them."""
    trace = REPO / "examples" / "sweep_capacity" / "vllm-bench.duckdb"
    findings = {f.kind: f for f in diagnose(trace, trace, WHOLE).findings}
    thrash = findings["preemption_thrash"]
    assert thrash.severity is Severity.CRITICAL
    assert thrash.cost["num_preemptions"] == 155
    assert thrash.what_if is not None and thrash.what_if.removes
    assert thrash.what_if.effect["num_preemptions"] == (155, 0)
    assert "head_of_line_blocking" in findings
