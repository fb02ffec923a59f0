"""The regression check: figures a benchmark measured, against those recorded in the docs.

A benchmark calls `record(name, value)` for each figure it prints; `python -m bench` then
compares every figure measured in the run with its recorded value in bench/recorded.json
(kept beside the docs' tables: each figure names the page that states it) and says which
moved by more than the file's `tolerance` (a share: 0.3 is 30%), either way. The load
average is printed beside the comparison: a figure measured on a loaded machine moves by
the load, and says so.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).with_name("recorded.json")

_measured: dict[str, float] = {}


def record(name: str, value: float) -> None:
    """Keep a figure this run measured, for the comparison at the end of `python -m bench`."""
    _measured[name] = float(value)


def measured() -> dict[str, float]:
    return dict(_measured)


@dataclass(frozen=True)
class Moved:
    """One figure compared: recorded, measured, and the change as a share of the recorded."""

    name: str
    recorded: float
    measured: float
    unit: str

    @property
    def change(self) -> float:
        return (self.measured - self.recorded) / self.recorded if self.recorded else 0.0


def load_recorded(path: Path = RECORDED) -> dict[str, Any]:
    """The recorded figures: {"tolerance": share, "figures": {name: {"value", "unit", ...}}}."""
    data = json.loads(path.read_text())
    tolerance = data.get("tolerance")
    if not isinstance(tolerance, int | float) or not 0 < tolerance < 10:
        raise ValueError(f"{path.name}: tolerance must be a share above 0, got {tolerance!r}")
    for name, figure in data.get("figures", {}).items():
        if not isinstance(figure.get("value"), int | float) or figure["value"] <= 0:
            raise ValueError(f"{path.name}: figure {name!r} needs a positive value")
    return data


def compare(
    measured_now: dict[str, float], recorded: dict[str, Any]
) -> tuple[list[Moved], list[Moved]]:
    """(every figure measured that has a recorded value, those that moved past tolerance)."""
    tolerance = float(recorded["tolerance"])
    rows = [
        Moved(name, float(fig["value"]), measured_now[name], fig.get("unit", ""))
        for name, fig in recorded["figures"].items()
        if name in measured_now
    ]
    return rows, [r for r in rows if abs(r.change) > tolerance]


def report(measured_now: dict[str, float], path: Path = RECORDED) -> int:
    """Print the comparison; the number of figures that moved past the tolerance."""
    if not measured_now:
        return 0
    recorded = load_recorded(path)
    rows, moved = compare(measured_now, recorded)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n===== regression check against {path.name} (load average {load}) =====")
    for r in rows:
        flag = "MOVED" if r in moved else "ok"
        print(
            f"{r.name:<36} recorded {r.recorded:9.3f} {r.unit:<2} measured {r.measured:9.3f} "
            f"{r.unit:<2} {r.change:+7.1%}  {flag}"
        )
    unrecorded = sorted(set(measured_now) - set(recorded["figures"]))
    if unrecorded:
        print(f"not recorded yet: {', '.join(unrecorded)}")
    limit = f"{float(recorded['tolerance']):.0%}"
    if moved:
        names = ", ".join(r.name for r in moved)
        print(f"moved by more than {limit}: {names}")
    else:
        print(f"no figure moved by more than {limit}")
    return len(moved)
