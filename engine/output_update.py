"""`update_from_output()`: sampled tokens appended, stop checks, finished requests freed.

Under async scheduling the output may be for a step scheduled before a preemption:
its tokens are still appended (and may stop the preempted request) but leave the
reset counters alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from .outputs import DraftTokenIds, EngineCoreOutput, ModelRunnerOutput
from .request import Request, RequestStatus
from .scheduler_output import SchedulerOutput
from .scheduler_state import SchedulerState
from .spec_decode import roll_back_rejected
from .stop import check_stop

_PREEMPTED = RequestStatus.PREEMPTED
_RUNNING = RequestStatus.RUNNING


class OutputUpdate(SchedulerState):
    """What the scheduler does with a step's model output, and with the drafts after it."""

    def update_from_output(
        self, scheduler_output: SchedulerOutput, model_runner_output: ModelRunnerOutput
    ) -> list[EngineCoreOutput]:
        """Append sampled tokens, run stop checks and free finished requests."""
        outputs = []
        stopped_running: list[Request] = []
        stopped_preempted: list[Request] = []
        requests = self.requests
        sampled = model_runner_output.sampled_token_ids
        index_of = model_runner_output.req_id_to_index
        spec_tokens = scheduler_output.scheduled_spec_decode_tokens
        caches_drafted = self.num_spec_tokens > 0 and self.rules.caches_drafted_blocks_at_update
        for request_id, num_scheduled in scheduler_output.num_scheduled_tokens.items():
            request = requests.get(request_id)
            if request is None or request.status > _PREEMPTED:
                continue  # finished or aborted while the step was in flight
            request.num_in_flight_tokens -= num_scheduled
            is_stale = request.num_stale_output_tokens > 0 and _retire_stale(request, num_scheduled)
            generated = sampled[index_of[request_id]] if sampled else ()
            if not generated:
                continue  # a partial prefill chunk samples nothing
            if spec_tokens and not is_stale:
                drafts = spec_tokens.get(request_id)
                if drafts:
                    roll_back_rejected(request, len(drafts), len(generated))
            status_before = request.status
            outputs.append(
                self._update_request_with_output(
                    request, generated, is_stale=is_stale, caches_drafted=caches_drafted
                )
            )
            if request.status > _PREEMPTED:
                running = status_before == _RUNNING
                (stopped_running if running else stopped_preempted).append(request)
        if stopped_running:
            self._remove_stopped(stopped_running)
        if stopped_preempted:
            self.waiting.remove_requests(stopped_preempted)
        return outputs

    def _update_request_with_output(
        self, request: Request, generated: Sequence[int], *, is_stale: bool, caches_drafted: bool
    ) -> EngineCoreOutput:
        """Append tokens one by one up to the first that ends the request; cache the blocks
        they complete; free the request if it stopped."""
        status_before = request.status
        had_placeholders = request.num_output_placeholders > 0
        new_token_ids = tuple(generated)
        if len(new_token_ids) == 1:
            request.append_output_token_id(new_token_ids[0])
            check_stop(request, self.max_model_len)  # a stop shows in request.status
        else:
            new_token_ids = self._append_until_stop(request, new_token_ids, is_stale=is_stale)
        if not is_stale:
            if had_placeholders:
                # Every returned token resolves a placeholder, those trimmed at a stop too.
                request.num_output_placeholders -= len(generated)
            if status_before == _RUNNING and (had_placeholders or caches_drafted):
                # Blocks become cacheable as the tokens' output lands (async, or drafts).
                self.kv_cache_manager.cache_blocks(
                    request, request.num_computed_tokens - request.num_in_flight_tokens
                )
        if request.status <= _PREEMPTED:
            return EngineCoreOutput(request.request_id, new_token_ids)
        return self._finish_stopped(request, new_token_ids)

    def _append_until_stop(
        self, request: Request, token_ids: tuple[int, ...], *, is_stale: bool
    ) -> tuple[int, ...]:
        """Append a step's tokens (accepted drafts, then the bonus token) up to the first that
        stops the request; the positions past it are uncomputed. Returns those appended."""
        for num_new, token_id in enumerate(token_ids, 1):
            request.append_output_token_id(token_id)
            if check_stop(request, self.max_model_len):
                if not is_stale:
                    request.num_computed_tokens -= len(token_ids) - num_new
                return token_ids[:num_new]
        return token_ids

    def _finish_stopped(self, request: Request, new_token_ids: tuple[int, ...]) -> EngineCoreOutput:
        """Free a request its output stopped; its last output carries the finish reason."""
        self._free_request(request)
        return EngineCoreOutput(
            request.request_id, new_token_ids, request.get_finished_reason(), request.stop_reason
        )

    def _remove_stopped(self, stopped: list[Request]) -> None:
        stopped_set = set(stopped)
        self.running = [r for r in self.running if r not in stopped_set]

    def update_draft_token_ids(self, draft_token_ids: DraftTokenIds) -> None:
        """The drafts proposed after a step become each request's next `spec_token_ids`.

        Drafts for a request still prefilling are dropped (it samples nothing to verify).
        """
        requests = self.requests
        for request_id, spec_token_ids in zip(
            draft_token_ids.req_ids, draft_token_ids.draft_token_ids, strict=True
        ):
            request = requests.get(request_id)
            if request is None or request.status > _PREEMPTED:
                continue
            if request.is_prefill_chunk:
                if request.spec_token_ids:
                    request.spec_token_ids = []
                continue
            request.spec_token_ids = list(spec_token_ids)


def _retire_stale(request: Request, num_scheduled: int) -> bool:
    """A step's output for a request preempted since: count it off the stale tokens."""
    request.num_stale_output_tokens -= num_scheduled
    assert request.num_stale_output_tokens >= 0
    return True
