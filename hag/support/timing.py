"""`with timed(seconds, "cull"): ...` adds the block's wall time to a dict of step seconds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def timed(into: dict[str, float], step: str) -> Iterator[None]:
    """Add the wall time of the block to `into[step]` (also when the block raises)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        into[step] = into.get(step, 0.0) + time.perf_counter() - start
