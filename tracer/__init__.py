"""stepscope.tracer."""
