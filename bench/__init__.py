"""Benchmarks: each prints its figures beside a baseline measured in the same run."""
