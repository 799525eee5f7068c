"""A test-only vLLM general plugin: async scheduling stays on on the CPU platform.

vLLM's `CpuPlatform.check_and_update_config` sets `async_scheduling = False`
whatever was asked; its model runner (the GPU runner's, with CUDA streams and
events stubbed) handles the async output path all the same. With this directory on
PYTHONPATH, vLLM finds the plugin through its `vllm.general_plugins` entry point in
every process and keeps the value the engine was given.
"""

from __future__ import annotations

from typing import Any


def register() -> None:
    from vllm.platforms.cpu import CpuPlatform

    original = CpuPlatform.check_and_update_config.__func__

    def keep_async_scheduling(cls: Any, vllm_config: Any) -> None:
        asked = vllm_config.scheduler_config.async_scheduling
        original(cls, vllm_config)
        vllm_config.scheduler_config.async_scheduling = asked

    CpuPlatform.check_and_update_config = classmethod(keep_async_scheduling)
