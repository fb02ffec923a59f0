"""What applying sessions changed: per session, summed per batch and per run."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any
from uuid import UUID

STEPS = ("observations", "discovery", "proposals", "reinforcement", "grading")


@dataclass
class SessionCounts:
    """What applying sessions changed; one per session, summed per batch and per run."""

    sessions: int = 0
    entries_created: int = 0
    entries_merged: int = 0
    observations_dropped: int = 0
    edges_created: int = 0
    edges_reinforced: int = 0
    edges_reweighed: int = 0
    edges_graded_up: int = 0
    edges_graded_down: int = 0
    edges_traversed: int = 0
    edges_missing: int = 0
    entries_graded: int = 0
    struggles_proposed: int = 0
    struggles_unresolved: int = 0
    struggles_without_evidence: int = 0
    struggles_contradicted: int = 0
    struggles_off_turn: int = 0
    reports_withdrawn: int = 0
    reports_resumed: int = 0

    def add(self, other: SessionCounts) -> None:
        for f in fields(SessionCounts):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(SessionCounts)}


@dataclass
class ProcessSummary(SessionCounts):
    """A run's (or a batch's) totals, with rejects, failures, retries and time per step, and
    (a run's) what it left in the queue."""

    run_id: UUID | None = None
    rejects: int = 0  # bad payloads: rejected and quarantined
    failures: int = 0  # failed for a reason outside the payload: kept, retried on request
    retries: int = 0
    seconds: float = 0.0
    step_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STEPS, 0.0))
    rejected: list[dict[str, str]] = field(default_factory=list)
    failed: list[dict[str, str]] = field(default_factory=list)
    left_pending: int | None = None  # after the run (None: not counted, e.g. a batch)
    left_failed: int | None = None

    @property
    def handled(self) -> int:
        """Sessions this batch or run finished one way or another (each counted once)."""
        return self.sessions + self.rejects + self.failures

    def merge(self, other: ProcessSummary) -> None:
        self.add(other)
        self.rejects += other.rejects
        self.failures += other.failures
        self.retries += other.retries
        self.rejected.extend(other.rejected)
        self.failed.extend(other.failed)
        for step, seconds in other.step_seconds.items():
            self.step_seconds[step] = self.step_seconds.get(step, 0.0) + seconds

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run_id": str(self.run_id) if self.run_id else None}
        out.update(super().as_dict())
        out.update(
            rejects=self.rejects,
            failures=self.failures,
            retries=self.retries,
            seconds=round(self.seconds, 3),
            step_seconds={k: round(v, 3) for k, v in self.step_seconds.items()},
            rejected=self.rejected,
            failed=self.failed,
            left_pending=self.left_pending,
            left_failed=self.left_failed,
        )
        return out
