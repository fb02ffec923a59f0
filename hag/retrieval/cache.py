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

    def put(self, key: Hashable, value: Any, size: int) -> None:
        if size <= 0:
            return
        with self._lock:
            self._items[key] = (self._clock(), value)
            self._items.move_to_end(key)
            while len(self._items) > size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
