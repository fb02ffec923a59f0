"""Thin Prefect tasks around hag/ functions; the flows compose them.

Caching: every task declares `cache_policy=NO_CACHE`, one choice for all (the meta-test in
tests/test_deployments.py holds it). Each task writes to the memory, publishes an artifact or
reads a memory that changes under it, so none is a function of its inputs: a cached result
would skip work a retry or a later run must do. Nothing here persists task results either.
"""
