"""Data-quality suites (SPEC §8): the runner of the Great Expectations suites.

The suites themselves are reviewable JSON files in the repository's `expectations/suites/`
folder (`SUITES_DIR`), one per checked view: `entries` (bounds, enums, scope shapes, the three
identity indexes as compound uniqueness), `edges` (bounds, enums, identity, no self-loops, no
dangling edges, `_unanchored_` isolated), `cull_runs` (audit completeness) and `culled_edges`
(the cull only took what its recorded rule allowed; never a seed edge). `run_all()` runs them
inside PostgreSQL (`_gx.py`), reporting each suite as it finishes; `hag check`, `hag nightly`,
the simulator and the flows' last task call it. Great Expectations is imported only when a
suite runs, so the rest of the library never pays for it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hag import SUITES_DIR, settings
from hag.quality import _gx
from hag.quality._gx import Failure, SuiteResult, import_gx, preload

if TYPE_CHECKING:
    from hag.storage.db import Conn

SUITES = ("entries", "edges", "cull_runs", "culled_edges")
# SUITES_DIR (from hag): where the suites are kept, one JSON file per suite, named after it.
__all__ = [
    "SUITES",
    "SUITES_DIR",
    "CheckResult",
    "Failure",
    "SuiteResult",
    "import_gx",
    "preload",
    "run_all",
]


@dataclass
class CheckResult:
    """All suites' outcome: `.success`, and `.failures` naming every expectation that failed."""

    suites: list[SuiteResult] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return all(s.success for s in self.suites)

    @property
    def failures(self) -> list[Failure]:
        return [f for s in self.suites for f in s.failures]

    def report(self) -> str:
        lines = [s.line() for s in self.suites]
        lines += [f"  - {f.line()}" for f in self.failures]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "success": self.success,
            "suites": [
                {
                    "suite": s.suite,
                    "view": s.view,
                    "rows": s.rows,
                    "evaluated": s.evaluated,
                    "success": s.success,
                    "seconds": round(s.seconds, 3),
                }
                for s in self.suites
            ],
            "failures": [f.__dict__ for f in self.failures],
        }


def run_all(
    conn: Conn | None = None,
    suites: tuple[str, ...] = SUITES,
    progress: Callable[[str], None] | None = None,
) -> CheckResult:
    """Run every suite (or the named ones) on the database of `conn`, or of a new connection.

    The suites read what is committed there (GX has connections of its own): a caller
    commits before it checks. Up to `suite_concurrency` suites run at once, each on its own
    sessions (the work is PostgreSQL's). `progress` receives a line when Great Expectations
    has loaded and a line per suite, in the suites' order, as soon as it and those before it
    have finished, with its seconds.
    """
    from hag.storage import db

    seconds = import_gx()
    if progress is not None and seconds >= 0.05:  # a second call finds it loaded
        progress(f"data-quality suites: Great Expectations loaded in {seconds:.2f} s")
    with db.connection_or_own(conn) as c:
        dials = settings.load(c)
        url, parameters = _gx.prepare(c, dials)
    result = CheckResult()
    with ThreadPoolExecutor(
        max_workers=dials.suite_concurrency, thread_name_prefix="suite"
    ) as pool:
        running = [pool.submit(_gx.validate, url, parameters, name) for name in suites]
        for future in running:
            suite = future.result()
            result.suites.append(suite)
            if progress is not None:
                progress(f"{suite.line()} ({suite.seconds:.2f} s)")
    return result
