"""stepscope.tui."""
