"""Simulated learners over a hidden prerequisite graph, taught by a tutor that reads the
memory through `retrieve` every turn, and session payloads in the ingest contract.

The simulator writes to the memory only through `ingest_payload` and the memory's own jobs
(session-end processing, nightly sweeps, enrichment); see `hag_lab.simulate.run`.
"""
