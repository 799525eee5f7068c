"""stepscope: record, replay and diff a vLLM-style LLM-serving scheduler, step by step."""

__version__ = "0.1.0"
