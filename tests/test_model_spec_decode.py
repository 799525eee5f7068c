"""Speculative decoding on the real decoder: ngram drafts, verified in the forward pass.

Drafts must never change what a greedy request decodes, the paged logits of every
appended token must still equal a dense forward, and a repetitive context must
get drafts accepted.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from model_checks import (  # noqa: E402
    FLOAT32_ATOL,
    LoggedRun,
    check_against_dense,
    pressure_workload,
    run_logged,
    tiny_model,
)
from stepscope.engine import EngineLoop, InputError, Workload  # noqa: E402
from stepscope.engine.ngram_proposer import (  # noqa: E402
    NgramProposer,
    find_longest_matched_ngram_and_propose_tokens,
)
from stepscope.engine.torch_runner import TorchModelRunner, accept_drafts  # noqa: E402
from stepscope.replay.whatif import replay_whatif  # noqa: E402
from stepscope.tracer.record_workload import record_workload  # noqa: E402

import stepscope  # noqa: E402


def spec_workload(seed: int, policy: str, k: int, **knobs: int | str) -> Workload:
    """The model tests' KV-pressure workload with `k` drafts and outputs long enough for some
    drafts to be wrong."""
    return pressure_workload(
        seed, policy, (8, 40), max_model_len=128, num_speculative_tokens=k, **knobs
    )


def brute_force_ngram(tokens: list[int], min_n: int, max_n: int, max_len: int, k: int) -> list[int]:
    """The longest suffix n-gram seen earlier, its earliest occurrence, the tokens after it."""
    k = min(k, max_len - len(tokens))
    if len(tokens) < min_n or k <= 0:
        return []
    for n in range(min(max_n, len(tokens) - 1), min_n - 1, -1):
        suffix = tokens[-n:]
        for start in range(len(tokens) - n):
            if tokens[start : start + n] == suffix:
                return tokens[start + n : start + n + k]
    return []


def test_ngram_lookup_equals_the_longest_earliest_match() -> None:
    rng = random.Random(0)
    for _ in range(3000):
        tokens = [rng.randrange(3) for _ in range(rng.randrange(0, 30))]
        min_n = rng.randrange(1, 4)
        max_n = rng.randrange(min_n, 6)
        max_len, k = rng.randrange(20, 40), rng.randrange(1, 6)
        expected = brute_force_ngram(tokens, min_n, max_n, max_len, k)
        got = find_longest_matched_ngram_and_propose_tokens(tokens, min_n, max_n, max_len, k)
        assert got == expected, (tokens, min_n, max_n, max_len, k)


def test_ngram_cases_from_vllm() -> None:
    find = find_longest_matched_ngram_and_propose_tokens
    assert find([1, 2, 3, 4, 5], 2, 2, 100, 2) == []
    assert find([1, 2, 3, 4, 1, 2, 3], 2, 2, 100, 3) == [4, 1, 2]
    assert find([1, 2, 3, 4, 1, 2, 3], 1, 1, 100, 2) == [4, 1]  # earliest `3`
    assert find([1, 2, 3, 4, 1, 2, 3], 2, 2, 8, 3) == [4]  # one slot left to max_model_len
    assert find([1, 2, 3, 1, 2], 2, 2, 100, 4) == [3, 1, 2]  # only 3 tokens after the match
    proposer = NgramProposer(2, 8, 2, 2)
    assert proposer.propose([[3], [], [3]], [[1, 2, 3, 1, 2, 3]] * 2 + [[1] * 8]) == [
        [1, 2],
        [],  # sampled nothing (a partial prefill)
        [],  # at max_model_len
    ]


def test_verification_accepts_while_the_sample_equals_the_draft() -> None:
    assert accept_drafts([5, 6, 7], [5, 6, 7, 8]) == [5, 6, 7, 8]
    assert accept_drafts([5, 6, 7], [5, 9, 7, 8]) == [5, 9]
    assert accept_drafts([-1, -1], [4, 4, 4]) == [4]
    assert accept_drafts([], [3]) == [3]


def _outputs(workload: Workload) -> tuple[dict[str, tuple[int, ...]], int, int]:
    """Each request's output tokens, and the drafts scheduled and accepted over the run."""
    loop = EngineLoop(workload, TorchModelRunner(tiny_model(), workload.config))
    num_drafts = num_accepted = 0
    for record in loop.run():
        step = record.engine_step
        if step is None:
            continue
        runner_output = step.model_runner_output
        for req_id, drafts in step.scheduler_output.scheduled_spec_decode_tokens.items():
            sampled = runner_output.sampled_token_ids[runner_output.req_id_to_index[req_id]]
            num_drafts += len(drafts)
            num_accepted += max(len(sampled) - 1, 0)
    outputs = {req_id: tuple(f.output_token_ids) for req_id, f in loop.final().items()}
    return outputs, num_drafts, num_accepted


@pytest.mark.parametrize(("seed", "policy"), [(3, "fcfs"), (4, "priority")])
def test_drafts_do_not_change_greedy_outputs_and_some_are_accepted(seed: int, policy: str) -> None:
    plain, no_drafts, _ = _outputs(spec_workload(seed, policy, 0))
    spec = spec_workload(seed, policy, 3)
    assert all(s.sampling_params.is_greedy for s in spec.requests)
    drafted, num_drafts, num_accepted = _outputs(spec)
    assert no_drafts == 0
    assert drafted == plain
    assert num_drafts > 0 and 0 < num_accepted < num_drafts


def _appended_rows_only(run: LoggedRun) -> LoggedRun:
    """Rows of tokens the request kept (one accepted past max_tokens is cut by the scheduler)."""
    lengths = {
        spec.request_id: len(spec.prompt_token_ids + run.final[spec.request_id].output_token_ids)
        for spec in run.workload.requests
    }
    kept = [row for row in run.logits if row[1] < lengths[row[0]] - 1]
    return LoggedRun(run.workload, run.final, kept, run.coverage)


def test_paged_logits_with_drafts_equal_dense() -> None:
    model = tiny_model()
    run = run_logged(spec_workload(5, "priority", 4), model)
    assert run.coverage.num_preemptions > 0 and run.coverage.num_prefix_hit_tokens > 0
    assert check_against_dense(model, _appended_rows_only(run), FLOAT32_ATOL) > 100


def test_a_draft_model_is_refused_with_one_line() -> None:
    workload = spec_workload(1, "fcfs", 2, speculative_method="draft_model")
    with pytest.raises(InputError, match="speculative_method: 'draft_model' needs a draft model"):
        TorchModelRunner(tiny_model(), workload.config)


def test_a_what_if_with_nothing_changed_keeps_the_real_models_verdicts(tmp_path: Path) -> None:
    """A real model's drafts are not all right: what-if replays its recorded verdicts.

    With no knob changed the what-if must decide exactly as the recording did; drafting
    every token right (the tape's default) would finish requests sooner.
    """
    workload = spec_workload(3, "fcfs", 3)
    trace = tmp_path / "spec.duckdb"
    record_workload(workload, TorchModelRunner(tiny_model(), workload.config), trace)
    with stepscope.open(trace) as opened:
        (rejected,) = opened.sql(
            "SELECT count(*) FROM _spec_decode WHERE num_accepted < len(scheduled_draft_token_ids)"
        ).fetchall()[0]
    assert rejected > 0
    whatif = replay_whatif(trace, tmp_path / "whatif.duckdb", {"watermark": 0.0})
    assert whatif.diff.identical, whatif.diff.first_decision_step
