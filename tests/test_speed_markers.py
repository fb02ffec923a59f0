"""The quick loop's list of slow modules names modules that exist (tests/fix_speed.py)."""

from __future__ import annotations

from pathlib import Path

from tests.fix_speed import SLOW_MODULES


def test_every_slow_module_exists():
    """A slow module renamed or removed would leave the list stale and silently fast."""
    here = Path(__file__).resolve().parent
    assert sorted(m for m in SLOW_MODULES if not (here / f"{m}.py").is_file()) == []
