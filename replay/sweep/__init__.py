"""Sweeps: a grid of what-if replays of one trace, its result file, and the views of that result."""
