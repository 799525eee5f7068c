"""Keyed pseudonyms for token ids: equal tokens stay equal, the raw ids are never stored."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
from collections.abc import Iterable

from stepscope.engine import EngineConfig
from stepscope.engine.block_hash import STEPSCOPE_HASHER

PSEUDONYM_BITS = 63


class Redactor:
    """Maps each token id to HMAC-SHA256(key, id) truncated to 63 bits.

    Equality, and so shared prefixes, EOS and stop-token matches, survive, which
    is all the scheduler looks at: a redacted trace still replays exactly. The
    key is random per recording unless given; it is never written to the trace.
    """

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)
        self._cache: dict[int, int] = {}

    def token(self, token_id: int) -> int:
        pseudonym = self._cache.get(token_id)
        if pseudonym is None:
            digest = hmac.new(self._key, token_id.to_bytes(8, "little"), hashlib.sha256).digest()
            pseudonym = int.from_bytes(digest[:8], "little") >> (64 - PSEUDONYM_BITS)
            self._cache[token_id] = pseudonym
        return pseudonym

    def tokens(self, token_ids: Iterable[int]) -> list[int]:
        return [self.token(token_id) for token_id in token_ids]


def redacted_config(config: EngineConfig) -> EngineConfig:
    """The config a redacted trace keeps: stepscope's block hasher, without vLLM's NONE_HASH.

    NONE_HASH salts every prefix-cache hash, and the trace's tokens are pseudonyms, of
    which vLLM's hashes could not be computed anyway; only equal hashes matter to a replay.
    """
    return dataclasses.replace(config, block_hasher=STEPSCOPE_HASHER, none_hash=None)
