"""Running vLLM ourselves to record it: its scheduler with a scripted model, or a live engine."""
