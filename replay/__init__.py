"""stepscope.replay."""
