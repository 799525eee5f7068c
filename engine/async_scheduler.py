"""vLLM 0.33.0's `AsyncScheduler`: the next step is scheduled before this one's output is back.

It differs from the base scheduler in one place: once a step is scheduled, each
request that will sample in it gets an output placeholder, so the running pass
can give it its next token before the sampled one arrives. Everything that reads
placeholders (the running pass's skip at `max_tokens`, stale output after a
preemption, rolling back at a stop) is in the base class, as in vLLM.
"""

from __future__ import annotations

from .scheduler import Scheduler
from .scheduler_output import SchedulerOutput


class AsyncScheduler(Scheduler):
    def _update_after_schedule(self, output: SchedulerOutput) -> None:
        super()._update_after_schedule(output)
        requests = self.requests
        for request_id in output.num_scheduled_tokens:
            request = requests[request_id]
            if not request.is_prefill_chunk:
                request.num_output_placeholders += 1
