"""vLLM 0.33.0's `AsyncScheduler`: the next step is scheduled before this one's output is back.

It differs from the base scheduler in one place: once a step is scheduled, each
request that will sample in it gets an output placeholder per token the step may
append (one, plus its scheduled drafts), so the running pass can give it its next
token before the sampled one arrives; with speculative decoding it also gets k -1
draft placeholders, which the worker fills with the drafts it proposed itself.
Everything that reads placeholders (the running pass's skip at `max_tokens`, stale
output after a preemption, rolling back at a stop or a rejection) is in the base
class, as in vLLM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import EngineConfig
from .scheduler import Scheduler
from .scheduler_output import SchedulerOutput

if TYPE_CHECKING:
    from .probe import Probe


class AsyncScheduler(Scheduler):
    def __init__(self, config: EngineConfig, probe: Probe | None = None) -> None:
        super().__init__(config, probe)
        self._spec_token_placeholders = [-1] * self.num_spec_tokens
        """Shared by every request, never mutated (a request's list is replaced, not edited)."""

    def _update_after_schedule(self, output: SchedulerOutput) -> None:
        super()._update_after_schedule(output)
        requests = self.requests
        if self.num_spec_tokens:
            self._add_spec_placeholders(output)
            return
        for request_id in output.num_scheduled_tokens:
            request = requests[request_id]
            if not request.is_prefill_chunk:
                request.num_output_placeholders += 1

    def _add_spec_placeholders(self, output: SchedulerOutput) -> None:
        spec = output.scheduled_spec_decode_tokens
        placeholders = self._spec_token_placeholders
        for request_id in output.num_scheduled_tokens:
            request = self.requests[request_id]
            if not request.is_prefill_chunk:
                request.num_output_placeholders += 1 + len(spec.get(request_id, ()))
                request.spec_token_ids = placeholders
