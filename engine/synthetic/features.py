"""The optional-feature tables of a TOML workload: draft script, LoRA adapters, grammars.

[drafts]               # with config.num_speculative_tokens: the tape model's draft script
mismatch_every = 3     #   every request's (see `request_features`), or
accept = [2, 0, 3]     #   accepted drafts per verification
[lora]                 # with config.max_loras
ids = [1, 2]           # each request draws one (0: the base model)
weights = [3, 1]       # optional
[grammar]              # structured output
share = 0.5            # fraction of requests with a grammar
compile_steps = 2      # steps from arrival until it is ready
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ..config import EngineConfig
from ..request_features import FeatureError, RequestFeatures, request_features
from .toml_reader import TableReader

FEATURE_TABLES = ("drafts", "lora", "grammar")


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """What each generated request gets: one draft script, a drawn adapter, a drawn grammar."""

    draft_mismatch_every: int | None = None
    draft_accept: tuple[int, ...] | None = None
    lora_ids: tuple[int, ...] = ()
    lora_weights: tuple[float, ...] = ()
    grammar_share: float = 0.0
    grammar_compile_steps: int = 0

    def draw(
        self, arrival_step: int, lora: random.Random, grammar: random.Random
    ) -> RequestFeatures:
        """One request's features; a stream is drawn from only when its table is given."""
        lora_id = lora.choices(self.lora_ids, self.lora_weights)[0] if self.lora_ids else 0
        has_grammar = self.grammar_share > 0 and grammar.random() < self.grammar_share
        return RequestFeatures(
            lora_id=lora_id or None,
            draft_mismatch_every=self.draft_mismatch_every,
            draft_accept=self.draft_accept,
            grammar_ready_step=arrival_step + self.grammar_compile_steps if has_grammar else None,
        )


NO_FEATURES = FeatureSpec()


def parse_features(top: TableReader, config: EngineConfig) -> FeatureSpec:
    drafts, lora, grammar = (top.table(name) for name in FEATURE_TABLES)
    item: dict[str, Any] = {}
    spec: dict[str, Any] = {}
    if drafts is not None:
        drafts.reject_unknown({"mismatch_every", "accept"})
        if drafts.has("mismatch_every"):
            item["draft_mismatch_every"] = drafts.integer("mismatch_every")
        if drafts.has("accept"):
            item["draft_accept"] = list(drafts.integers("accept"))
    if lora is not None:
        spec.update(_lora(lora))
        item["lora_id"] = max((i for i in spec["lora_ids"] if i), default=None)
    _check(item, config, {"draft_mismatch_every": drafts, "draft_accept": drafts, "lora_id": lora})
    if grammar is not None:
        grammar.reject_unknown({"share", "compile_steps"})
        spec["grammar_share"] = grammar.number("share", minimum=0.0)
        if spec["grammar_share"] > 1:
            raise grammar.error("share", f"must be in [0, 1], got {spec['grammar_share']}")
        spec["grammar_compile_steps"] = grammar.integer("compile_steps", 0, minimum=0)
    accept = item.get("draft_accept")
    return FeatureSpec(
        draft_mismatch_every=item.get("draft_mismatch_every"),
        draft_accept=None if accept is None else tuple(accept),
        **spec,
    )


def _lora(table: TableReader) -> dict[str, Any]:
    table.reject_unknown({"ids", "weights"})
    ids = table.integers("ids", minimum=0)
    if not ids:
        raise table.error("ids", "required, a non-empty list of adapter ids (0: base model)")
    weights = table.numbers("weights", minimum=0.0) if table.has("weights") else (1.0,) * len(ids)
    if len(weights) != len(ids) or sum(weights) <= 0:
        raise table.error("weights", f"needs one weight per id ({len(ids)}), not all 0")
    return {"lora_ids": ids, "lora_weights": weights}


_TOML_KEY = {"draft_mismatch_every": "mismatch_every", "draft_accept": "accept", "lora_id": "ids"}


def _check(item: dict[str, Any], config: EngineConfig, tables: dict[str, Any]) -> None:
    """The JSON format's checks of the same keys, reported at the TOML key."""
    try:
        request_features(item, config, arrival_step=0)
    except FeatureError as error:
        raise tables[error.key].error(_TOML_KEY[error.key], error.message) from None
