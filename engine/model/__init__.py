"""A Llama-style decoder whose KV cache is paged by the scheduler's block tables.

Importing this package does not import PyTorch; its modules other than `config`
do, so `stepscope run --model tape` works without it.
"""
