"""Data-quality suites (SPEC §8), Great Expectations 1.x, one module per checked view.

Each suite is a reviewable JSON file in `expectations/suites/`, read by its module:
`entries` (bounds, enums, scope shapes, the three identity indexes as compound uniqueness),
`edges` (bounds, enums, identity, no self-loops, no dangling edges, `_unanchored_`
isolated), `cull_runs` (audit completeness) and `culled_edges` (the cull only took what
its recorded rule allowed; never a seed edge). `run_all()` runs them all; `hag check` and
the end of every flow call it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from expectations._gx import Failure, SuiteResult

SUITES = ("entries", "edges", "cull_runs", "culled_edges")


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
        lines = [
            f"{'ok  ' if s.success else 'FAIL'} {s.suite:<13} {s.evaluated} expectations over "
            f"{s.rows} rows of {s.view}"
            for s in self.suites
        ]
        lines += [f"  - {f.line()}" for f in self.failures]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "success": self.success,
            "suites": [
                {
                    "suite": s.suite,
                    "view": s.view,
                    "rows": s.rows,
                    "evaluated": s.evaluated,
                    "success": s.success,
                }
                for s in self.suites
            ],
            "failures": [f.__dict__ for f in self.failures],
        }


def run_all(conn: Any = None, suites: tuple[str, ...] = SUITES) -> CheckResult:
    """Run every suite (or the named ones) on `conn`, or on a new connection."""
    from importlib import import_module  # noqa: PLC0415

    from hag import db  # noqa: PLC0415

    with db.connection_or_own(conn) as c:
        return CheckResult([import_module(f"expectations.{name}").validate(c) for name in suites])
