"""The Prefect flows, found by name: how the library runs a flow without importing upward.

The layers point one way, flows -> tasks -> hag, so nothing under `hag/` imports `flows` or
`tasks` (tests/test_layers.py). The flows declare themselves in pyproject.toml as the
entry-point group `hag.flows` (`session-end = "flows.session_end:session_end_flow"`, ...);
the command line and the simulator ask this module for a flow by that name when a Prefect
server is configured. A checkout (`uv sync`) installs the group and has `flows/` on the path;
the wheel ships only `hag` (docs/architecture.md), so there a configured server gets one line
saying the Prefect project is missing, and the job can still run directly.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from hag.errors import ConfigError, PartlyFailed

FLOW_GROUP = "hag.flows"


def registered() -> dict[str, EntryPoint]:
    """Every flow the installed distributions declare, by name (first declaration wins)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=FLOW_GROUP):
        found.setdefault(ep.name, ep)
    return found


def flow(name: str) -> Callable[..., Any]:
    """The flow registered as `name`; a ConfigError in one line when it cannot be loaded."""
    ep = registered().get(name)
    if ep is None:
        raise ConfigError(
            f"no flow named {name!r} in the entry-point group {FLOW_GROUP} "
            "(is the hag-memory project installed, e.g. `uv sync` in a checkout?)"
        )
    try:
        loaded: Callable[..., Any] = ep.load()
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != ep.module.split(".")[0]:
            raise  # a missing dependency of the flow, not the flow itself
        raise ConfigError(
            f"a Prefect server is configured but the {name} flow ({ep.value}) is not installed: "
            "the hag wheel carries the library only; run from a checkout of the repository, "
            "or unset PREFECT_API_URL to run the job directly"
        ) from exc
    return loaded


def run_summary(name: str, **parameters: Any) -> dict[str, Any]:
    """Run the flow registered as `name` in this process; its summary (every job flow
    returns its summary as a dict, the shape of the direct job's)."""
    try:
        summary = flow(name)(**parameters)
    except PartlyFailed as partly:  # the run ended Failed, its work done in part: the summary
        summary = partly.summary
    if not isinstance(summary, dict):
        raise TypeError(f"the {name} flow returned {type(summary).__name__}, not its summary")
    return summary
