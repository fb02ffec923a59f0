"""Benchmarks: each prints its figures beside a baseline measured in the same run.

OpenBLAS is held to one thread before anything imports numpy. With its default (one worker
per core), each matrix product in a baseline (the retrieval benchmark's numpy floor) leaves a
worker thread spinning on the second of two cores for a while afterwards, and the database
work measured next runs against it: measured on the 100k retrieval run, p99 15.9 ms with the
spinning worker, 11.6 ms without it, and the floor's own p95 12 ms for a 1 ms product.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
