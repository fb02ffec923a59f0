"""The session-end run report: the markdown an operator reads in the Prefect UI, and the
counts as table rows (tasks/session.py publishes both as artifacts)."""

from __future__ import annotations

from typing import Any

from hag.session.summary import ProcessSummary, SessionCounts


def render_markdown(summary: ProcessSummary) -> str:
    """The run summary an operator reads in the Prefect UI (no links)."""
    rate = summary.sessions / summary.seconds * 60 if summary.seconds else 0.0
    lines = [
        f"# Session-end run {summary.run_id}",
        "",
        f"{summary.sessions} session(s) applied, {summary.rejects} rejected, "
        f"{summary.failures} failed, {summary.retries} retried, in {summary.seconds:.1f} s "
        f"({rate:,.0f} sessions/min).",
        "",
        f"Left in the queue: {_count(summary.left_pending)} pending, "
        f"{_count(summary.left_failed)} failed.",
        "",
        "| what | count |",
        "| --- | ---: |",
        *(
            f"| {name.replace('_', ' ')} | {value} |"
            for name, value in SessionCounts.as_dict(summary).items()
        ),
        "",
        "| step | seconds |",
        "| --- | ---: |",
        *(f"| {step} | {seconds:.2f} |" for step, seconds in summary.step_seconds.items()),
    ]
    if summary.failed:
        lines += [
            "",
            "## Failed sessions (kept; retry with `hag process-sessions --retry-failed`)",
            "",
            *(f"- `{r['session_id']}`: {r['reason']} ({r['class']})" for r in summary.failed),
        ]
    if summary.rejected:
        lines += [
            "",
            "## Rejected sessions",
            "",
            *(f"- `{r['session_id']}`: {r['reason']}" for r in summary.rejected),
        ]
    return "\n".join(lines) + "\n"


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def summary_table(summary: ProcessSummary) -> list[dict[str, Any]]:
    """The counts as table rows (a Prefect table artifact)."""
    rows = [{"what": k, "count": v} for k, v in SessionCounts.as_dict(summary).items()]
    return rows + [
        {"what": "rejects", "count": summary.rejects},
        {"what": "failures", "count": summary.failures},
        {"what": "retries", "count": summary.retries},
    ]
