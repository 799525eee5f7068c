"""Synthetic workloads described in TOML: arrivals, lengths, shared prefixes, priorities."""
