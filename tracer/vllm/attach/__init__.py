"""Attaching a recorder to a vLLM scheduler: the hooks, the recording session, the conversion."""
