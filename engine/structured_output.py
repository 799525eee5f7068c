"""Structured output as vLLM's scheduler sees it: a request waits until its grammar has compiled."""

from __future__ import annotations


class StructuredOutputRequest:
    """A request's structured-output state: whether its grammar has finished compiling.

    vLLM compiles a grammar in the background from the moment the request is
    added; until the compilation is done the request stays in
    `WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR` and the waiting pass skips it. The
    workload scripts the step at which it is done (`grammar_ready_step`).
    """

    __slots__ = ("is_grammar_ready",)

    def __init__(self) -> None:
        self.is_grammar_ready = False
