"""The benchmarks' regression check (bench/figures.py): recorded figures against measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import figures

ROOT = Path(__file__).resolve().parents[1]


def _recorded(tmp_path: Path, **values: float) -> Path:
    path = tmp_path / "recorded.json"
    path.write_text(
        json.dumps(
            {
                "tolerance": 0.3,
                "figures": {
                    k: {"value": v, "unit": "s", "doc": "docs/x.md"} for k, v in values.items()
                },
            }
        )
    )
    return path


def test_a_figure_past_the_tolerance_either_way_is_named(tmp_path, capsys):
    """31% slower and 31% faster both move; 29% does not; an unmeasured figure is not compared."""
    path = _recorded(tmp_path, slower=10.0, faster=10.0, steady=10.0, absent=1.0)
    moved = figures.report({"slower": 13.1, "faster": 6.9, "steady": 12.9, "new": 1.0}, path)
    out = capsys.readouterr().out
    assert moved == 2
    assert "moved by more than 30%: slower, faster" in out
    assert "not recorded yet: new" in out
    assert "absent" not in out
    assert "load average" in out


def test_the_tolerance_is_read_from_the_file(tmp_path):
    """A wider tolerance in recorded.json lets the same change pass."""
    path = _recorded(tmp_path, sweep=10.0)
    data = json.loads(path.read_text())
    data["tolerance"] = 0.5
    path.write_text(json.dumps(data))
    assert figures.report({"sweep": 14.0}, path) == 0


def test_a_broken_recorded_file_is_refused_by_name(tmp_path):
    """A figure without a positive value is named in a clear error."""
    path = _recorded(tmp_path, sweep=0.0)
    with pytest.raises(ValueError, match="figure 'sweep' needs a positive value"):
        figures.load_recorded(path)


def test_the_recorded_figures_name_pages_that_exist():
    """bench/recorded.json parses, and every figure's page is in docs/."""
    data = figures.load_recorded()
    assert data["figures"]
    for name, figure in data["figures"].items():
        assert (ROOT / figure["doc"]).is_file(), name
