"""stepscope's engine package as at a git ref, imported beside this checkout's.

A before/after benchmark times both in one run: the package at the ref is extracted with
`git archive` and imported as `stepscope_baseline_engine` (the engine imports only itself,
relatively, so it loads under any name). `import_part_at` does the same for another part
(`replay_speed.py` takes the replay package so).
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "stepscope_baseline_engine"


@dataclass(frozen=True)
class EngineApi:
    """What a scheduler benchmark takes from an engine package."""

    Scheduler: Any
    ModelRunnerOutput: Any
    DraftTokenIds: Any
    parse_workload: Any


def current_engine() -> EngineApi:
    """This checkout's engine."""
    return _api("stepscope.engine")


def baseline_engine(ref: str, folder: Path) -> EngineApi:
    """The engine at git `ref`, extracted under `folder`."""
    import_part_at(ref, "engine", PACKAGE, folder)
    return _api(PACKAGE)


def import_part_at(ref: str, part: str, name: str, folder: Path) -> None:
    """Import stepscope's top-level folder `part` as at git `ref` under the module `name`
    (extracted under `folder`): it must import only itself relatively, or the rest of this
    checkout's stepscope absolutely."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref, part], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder / "baseline", filter="data")
    package = folder / "baseline" / part
    spec = importlib.util.spec_from_file_location(
        name, package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None and spec.loader is not None
    sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[name])


def _api(package: str) -> EngineApi:
    engine = importlib.import_module(package)
    return EngineApi(
        Scheduler=engine.Scheduler,
        ModelRunnerOutput=engine.ModelRunnerOutput,
        DraftTokenIds=importlib.import_module(f"{package}.outputs").DraftTokenIds,
        parse_workload=importlib.import_module(f"{package}.workload").parse_workload,
    )
