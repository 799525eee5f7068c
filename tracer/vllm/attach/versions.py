"""The vLLM versions stepscope records (0.32.x, 0.33.0), and where their APIs differ.

The rules each version decides by live in the engine (`stepscope.engine.vllm_versions`);
this module holds what the recorder and the scheduler-only driver need to know
about the installed vLLM.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from stepscope.engine.vllm_versions import (
    KNOWN_VERSIONS,
    VllmRules,
    is_known_version,
    vllm_rules,
)

SUPPORTED_VERSIONS = KNOWN_VERSIONS
"""The versions that can be recorded, for messages: `0.32.x, 0.33.0`."""


class UnsupportedVllmVersion(RuntimeError):
    """The installed vLLM is not a version stepscope records."""


def installed_version() -> str:
    """The installed vLLM's version, without a local build label (`0.32.0+cpu` is 0.32.0)."""
    import vllm

    return str(vllm.__version__).split("+", 1)[0]


def recorded_version() -> str:
    """The installed version, if stepscope records it; else UnsupportedVllmVersion."""
    version = installed_version()
    if not is_known_version(version):
        raise UnsupportedVllmVersion(
            f"vLLM {version} is not supported (supported: {SUPPORTED_VERSIONS})"
        )
    return version


@cache
def installed_rules() -> VllmRules:
    """The decision rules of the installed (supported) vLLM."""
    return vllm_rules(recorded_version())


def request_block_hasher(hash_block_size: int, hash_fn: Any, vllm_config: Any) -> Any:
    """vLLM's per-request block hasher; 0.33 adds hash lookahead as a third argument."""
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher

    lookahead = getattr(vllm_config, "num_hash_lookahead_tokens", None)
    if lookahead is None:
        return get_request_block_hasher(hash_block_size, hash_fn)
    return get_request_block_hasher(hash_block_size, hash_fn, lookahead)
