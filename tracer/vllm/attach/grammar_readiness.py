"""When a live request's structured-output grammar became ready, as vLLM's scheduler saw it.

vLLM compiles a request's grammar in the background from the moment it is added
(`StructuredOutputManager.grammar_init`) and holds the request in
`WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR`; the waiting pass promotes it to WAITING when
it reaches the request and finds its grammar compiled
(`_handle_blocked_waiting_request`). The trace keeps that as the request's
`grammar_ready_step`: the first step whose `schedule()` found the grammar compiled at
its start, or, if it finished compiling during that `schedule()`, the step whose
waiting pass promoted the request. Any step after the last waiting pass that found it
compiling, up to the promotion, replays alike; this is the earliest the scheduler knew.

A request that leaves before its grammar is ready (aborted while compiling, or the
recording ends first) is given the step after the last it was held in, so a replay
holds it just as long.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from stepscope.engine import EngineCoreOutput
from stepscope.engine.request import FinishReason

WAITING_FOR_GRAMMAR = "WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR"


def is_grammar_compiled(structured_output_request: Any) -> bool:
    """Whether the grammar has compiled (or failed to), read without resolving the future."""
    grammar = structured_output_request._grammar
    if isinstance(grammar, Future):
        return grammar.done()
    return grammar is not None


@dataclass(frozen=True, slots=True)
class CompilingRequest:
    """A request held for its grammar: vLLM's object and the step it arrived at."""

    request: Any
    arrival_step: int


class GrammarReadiness:
    """The live requests waiting for their grammar, and the step each became ready at."""

    def __init__(self) -> None:
        self.compiling: dict[str, CompilingRequest] = {}
        """The requests still in WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR, by request id."""
        self.structured: set[str] = set()
        """Requests with structured output not finished yet (a rejected token ends one)."""

    def on_arrival(self, request: Any, arrival_step: int, *, readiness_known: bool) -> bool:
        """Follow `request` if it waits for a grammar no workload scripted (whether it does)."""
        if not request.use_structured_output:
            return False
        self.structured.add(request.request_id)
        if readiness_known or request.status.name != WAITING_FOR_GRAMMAR:
            return False
        self.compiling[request.request_id] = CompilingRequest(request, arrival_step)
        return True

    def ready_at_schedule_start(self) -> list[CompilingRequest]:
        """The requests whose grammar has compiled before this `schedule()` looks at them."""
        return self._stop_following(
            lambda request: is_grammar_compiled(request.structured_output_request)
        )

    def promoted_in_schedule(self) -> list[CompilingRequest]:
        """The requests this `schedule()` took out of WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR
        (their grammar finished compiling after it started)."""
        return self._stop_following(lambda request: request.status.name != WAITING_FOR_GRAMMAR)

    def left(self, request_ids: Iterable[str]) -> list[CompilingRequest]:
        """Of `request_ids`, those that leave the scheduler with their grammar compiling."""
        never_ready = []
        for request_id in request_ids:
            self.structured.discard(request_id)
            compiling = self.compiling.pop(request_id, None)
            if compiling is not None:
                never_ready.append(compiling)
        return never_ready

    def still_compiling(self) -> list[CompilingRequest]:
        """The requests whose grammar was not ready when the recording ends."""
        return self.left(list(self.compiling))

    def _stop_following(self, is_ready: Callable[[Any], bool]) -> list[CompilingRequest]:
        ready = [c for c in self.compiling.values() if is_ready(c.request)]
        for compiling in ready:
            del self.compiling[compiling.request.request_id]
        return ready

    def rejected_tokens(self, outputs: Iterable[EngineCoreOutput]) -> bool:
        """Whether one of an update's finishes is vLLM ending a structured-output request
        whose grammar rejected its sampled token (an error finish no replay reproduces)."""
        rejected = False
        for output in outputs:
            if output.finish_reason is not None:
                is_structured = output.request_id in self.structured
                rejected |= is_structured and output.finish_reason == FinishReason.ERROR
                self.structured.discard(output.request_id)
        return rejected


def request_outside_subset(request: Any, *, speculative_decoding: bool) -> set[str]:
    """What of a request's structured output the subset leaves out: with drafts, vLLM drops
    those its grammar rejects (`validate_tokens`), which changes what is scheduled."""
    if request.use_structured_output and speculative_decoding:
        return {"structured output with speculative decoding"}
    return set()


def failed_to_compile(scheduler: Any) -> bool:
    """Whether this `schedule()` found a grammar that failed to compile (vLLM finishes its
    request as an error in the next update)."""
    return bool(scheduler.grammar_compile_error_reqs)
