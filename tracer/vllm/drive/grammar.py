"""Structured output for vLLM's scheduler without a tokenizer: a grammar that allows every token.

The scheduler only asks whether a request's grammar has compiled (the waiting pass
skips it until then) and, once it runs, fills its bitmask rows (`get_grammar_bitmask`)
and hands it the sampled tokens and drafts (`accept_tokens`, `validate_tokens`); the
scripted model samples from its tape, so nothing needs constraining. The driver adds a
request with structured-output params (vLLM then holds it in
`WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR`) and sets this grammar at the step the workload
says compilation finished.
"""

from __future__ import annotations

from functools import cache
from typing import Any

STRUCTURED_OUTPUTS_REGEX = ".*"
"""The constraint the driver's requests ask for (any text); nothing compiles it."""


def structured_outputs_params() -> Any:
    """vLLM's `StructuredOutputsParams` for a request that uses structured output."""
    from vllm.sampling_params import StructuredOutputsParams

    return StructuredOutputsParams(regex=STRUCTURED_OUTPUTS_REGEX)


def compiled_grammar() -> Any:
    """A compiled grammar, as vLLM's background compilation would leave it."""
    return _grammar_class()()


def finish_compilation(request: Any) -> None:
    """The request's grammar has compiled: its next waiting pass promotes it to WAITING."""
    structured_output_request = request.structured_output_request
    if structured_output_request is not None:
        structured_output_request.grammar = compiled_grammar()


class AnyTokenBackend:
    """The backend part `get_grammar_bitmask` uses: one int32 bitmask row per token to sample."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        import torch

        return torch.full((max_num_seqs, (self.vocab_size + 31) // 32), -1, dtype=torch.int32)


def install_backend(structured_output_manager: Any, vocab_size: int) -> None:
    """Give vLLM's manager the backend its first `grammar_init` would have chosen."""
    structured_output_manager.backend = AnyTokenBackend(vocab_size)


@cache
def _grammar_class() -> type:
    """A `StructuredOutputGrammar` (vLLM's interface) that accepts every token."""
    from vllm.v1.structured_output.backend_types import StructuredOutputGrammar

    class AnyTokenGrammar(StructuredOutputGrammar):  # type: ignore[misc]
        """Accepts and validates every token; its bitmask row allows the whole vocabulary."""

        def __init__(self) -> None:
            self.num_processed_tokens = 0

        def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
            self.num_processed_tokens += len(tokens)
            return True

        def validate_tokens(self, tokens: list[int]) -> list[int]:
            return tokens

        def rollback(self, num_tokens: int) -> None:
            self.num_processed_tokens -= num_tokens

        def fill_bitmask(self, bitmask: Any, batch_index: int) -> None:
            bitmask[batch_index].fill_(-1)

        def is_terminated(self) -> bool:
            return False

        def reset(self) -> None:
            self.num_processed_tokens = 0

    return AnyTokenGrammar
