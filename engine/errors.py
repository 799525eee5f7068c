"""Errors for bad input: each message names what is wrong and where."""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input (workload, config, trace, argument); the CLI prints it and exits 2."""


class ConfigError(InputError):
    """An engine config value is missing, unknown or out of range."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"config.{key}: {message}")


class WorkloadError(InputError):
    """A workload file does not parse or does not validate."""
