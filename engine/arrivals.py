"""A workload's arrivals, grammar compilations and aborts, handed out step by step."""

from __future__ import annotations

from .workload import RequestSpec, Workload


class WorkloadArrivals:
    """The requests in arrival order (list order within a step), and the aborts by step."""

    def __init__(self, workload: Workload) -> None:
        self._pending = sorted(workload.requests, key=lambda spec: spec.arrival_step)
        self._next = 0
        self.aborts = workload.aborts_by_step(before_update=False)
        """Request ids aborted before each step's `schedule()`, in list order."""
        self.aborts_before_update = workload.aborts_by_step(before_update=True)
        """Request ids aborted after each step's `schedule()`, before its update."""
        self.grammars_ready: dict[int, list[str]] = {}
        """Request ids whose grammar finishes compiling before each step's `schedule()`."""
        for spec in workload.requests:
            if spec.grammar_ready_step is not None:
                self.grammars_ready.setdefault(spec.grammar_ready_step, []).append(spec.request_id)

    def all_arrived(self) -> bool:
        return self._next >= len(self._pending)

    def skip_before(self, step: int) -> None:
        """Hand out nothing that arrives before `step` (a run resumed there has them)."""
        pending, end = self._pending, self._next
        while end < len(pending) and pending[end].arrival_step < step:
            end += 1
        self._next = end

    def due(self, step: int) -> list[RequestSpec]:
        """The requests that arrive at `step` (or before it and were not handed out yet)."""
        pending, first = self._pending, self._next
        end = first
        while end < len(pending) and pending[end].arrival_step <= step:
            end += 1
        self._next = end
        return pending[first:end]
