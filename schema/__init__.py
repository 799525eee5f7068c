"""stepscope.schema."""
