"""A small thread-safe LRU with an optional time-to-live, for results and query embeddings."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class TTLCache:
    """Least-recently-used map whose items also expire `ttl` seconds after they were stored.

    Size and lifetime are passed on every call (they are dials and may change at run time);
    a size or ttl of 0 disables the cache.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._items: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._clock = clock
        self._cleared = 0  # how many times `clear` ran: what a value read before one is from

    @property
    def generation(self) -> int:
        """Read before computing a value; `put(..., since=)` drops it when a `clear` came
        between (it was read from what the clear forgot: another database)."""
        return self._cleared

    def get(self, key: Hashable, ttl: float | None) -> Any | None:
        """The value stored under `key`, or None when absent or older than `ttl` seconds."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            stored_at, value = item
            if ttl is not None and self._clock() - stored_at >= ttl:
                del self._items[key]
                return None
            self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value: Any, size: int, since: int | None = None) -> None:
        if size <= 0:
            return
        with self._lock:
            if since is not None and since != self._cleared:
                return
            self._items[key] = (self._clock(), value)
            self._items.move_to_end(key)
            while len(self._items) > size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._cleared += 1

    def __len__(self) -> int:
        return len(self._items)
