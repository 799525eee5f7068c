"""Replay and diff: inputs back out of a trace, exact and what-if replay, the diff of two traces."""
