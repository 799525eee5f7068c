"""Which of the suites that need an optional part (vLLM, a real engine, Spark, a GPU) ran.

Those suites skip where their part cannot be installed, so a run can pass with one of them
gone unseen. Every run ends with one line per suite: how many of its tests passed, failed
or skipped, and why the skipped ones did.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest


@dataclass(frozen=True)
class Suite:
    """Tests that share an optional part: those taking one of `fixtures`, marked with one
    of `markers` or in one of `modules`."""

    name: str
    fixtures: frozenset[str] = frozenset()
    markers: frozenset[str] = frozenset()
    modules: frozenset[str] = frozenset()

    def holds(self, item: pytest.Item) -> bool:
        fixtures = set(getattr(item, "fixturenames", ()))
        markers = {mark.name for mark in item.iter_markers()}
        module = item.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
        return bool(fixtures & self.fixtures or markers & self.markers or module in self.modules)


SUITES = (
    Suite("vLLM 0.33.0's scheduler (.ci/vllm-venv)", fixtures=frozenset({"vllm"})),
    Suite(
        "a real vLLM engine and server (.ci/vllm-live-venv)",
        fixtures=frozenset({"vllm_live", "tiny_model"}),
    ),
    Suite("vLLM oracle, 0.33 and 0.32", modules=frozenset({"test_oracle_differential"})),
    Suite("Spark SQL (.ci/spark-venv)", fixtures=frozenset({"spark_python"})),
    Suite("GPU", markers=frozenset({"gpu"})),
)


SUITE_PROPERTY = "stepscope_suite"
"""The `user_properties` key that names a test's suite."""


@dataclass
class Tally:
    outcomes: Counter[str] = field(default_factory=Counter)
    skip_reasons: Counter[str] = field(default_factory=Counter)

    def line(self, name: str) -> str:
        if not self.outcomes:
            return f"{name}: no tests collected"
        counts = ", ".join(f"{n} {o}" for o, n in sorted(self.outcomes.items()))
        verdict = "SKIPPED" if set(self.outcomes) == {"skipped"} else "ran"
        reasons = "; ".join(f"{r} ({n})" for r, n in self.skip_reasons.most_common())
        return f"{name}: {verdict}: {counts}" + (f"; skipped because: {reasons}" if reasons else "")


class SuiteSummary:
    """A pytest plugin that tallies each suite's outcomes and prints them last."""

    def __init__(self) -> None:
        self.tallies = {suite.name: Tally() for suite in SUITES}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Name each test's suite in its reports (a pytest-xdist worker collects; the
        controller, which tallies, sees only the reports)."""
        for item in items:
            suite = next((s for s in SUITES if s.holds(item)), None)
            if suite is not None:
                item.user_properties.append((SUITE_PROPERTY, suite.name))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        name = dict(report.user_properties).get(SUITE_PROPERTY)
        if name is None or not (report.when == "call" or report.outcome != "passed"):
            return
        tally = self.tallies[name]
        tally.outcomes[report.outcome] += 1
        if report.skipped and isinstance(report.longrepr, tuple):
            tally.skip_reasons[report.longrepr[2].removeprefix("Skipped: ")] += 1

    def lines(self) -> list[str]:
        return [tally.line(name) for name, tally in self.tallies.items()]
