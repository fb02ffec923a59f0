"""The layers point one way (flows -> tasks -> hag): hag never imports the layers above it."""

from __future__ import annotations

import ast
import tomllib
from importlib.metadata import EntryPoint

import pytest

from hag import PROJECT_ROOT, orchestration
from hag.errors import ConfigError

# Top-level packages nothing under hag/ may import, and why. One line per banned name.
BANNED = {
    "flows": "Prefect runs the flows; hag looks one up by name (hag.orchestration)",
    "tasks": "tasks wrap hag, never the reverse",
    "expectations": "the suites' runner is hag.quality; expectations/ holds only the JSON suites",
}


def _imported_roots(tree: ast.AST) -> set[str]:
    """Every absolute top-level module name an import statement or import_module call names."""
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            roots.add(node.args[0].value.split(".")[0])
    return roots


def test_nothing_under_hag_imports_a_layer_above_it():
    """No module of hag/ imports flows, tasks or expectations, lazily or not (the BANNED list)."""
    offenders = []
    for path in sorted((PROJECT_ROOT / "hag").rglob("*.py")):
        roots = _imported_roots(ast.parse(path.read_text(), filename=str(path)))
        offenders += [
            f"{path.relative_to(PROJECT_ROOT)}: {name} ({BANNED[name]})"
            for name in sorted(roots & BANNED.keys())
        ]
    assert offenders == []


def test_the_import_scan_sees_lazy_and_dynamic_imports():
    """The scan that guards the layers finds an import inside a function and import_module."""
    source = (
        "def f():\n    from flows.nightly import nightly_flow\n"
        "def g():\n    import importlib\n    importlib.import_module('tasks.session')\n"
        "from . import sibling\n"
    )
    assert _imported_roots(ast.parse(source)) == {"flows", "importlib", "tasks"}


def test_the_library_reads_no_data_through_the_checkout_root():
    """Only hag/__init__ (the one resource lookup) and `hag serve` (prefect.yaml) use
    PROJECT_ROOT, so an installed wheel never looks for its data in site-packages' parent."""
    users = sorted(
        str(p.relative_to(PROJECT_ROOT))
        for p in (PROJECT_ROOT / "hag").rglob("*.py")
        if "PROJECT_ROOT" in p.read_text()
    )
    assert users == ["hag/__init__.py", "hag/cli/serve_cmd.py"]


def test_every_flow_is_registered_under_its_flow_name():
    """pyproject's `hag.flows` entry points name every flow module's flow, under the name the
    flow gives itself, and each loads to that flow."""
    declared = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"][
        "entry-points"
    ][orchestration.FLOW_GROUP]
    modules = {p.stem for p in (PROJECT_ROOT / "flows").glob("*.py") if p.stem != "__init__"}
    assert {v.split(":")[0] for v in declared.values()} == {f"flows.{m}" for m in modules}
    installed = orchestration.registered()
    assert set(installed) == set(declared)
    for name in declared:
        assert orchestration.flow(name).name == name


def test_an_unknown_flow_name_is_one_clear_line():
    """Asking for a flow nobody registered names the group, in one line."""
    with pytest.raises(ConfigError, match=r"no flow named 'nope' in the entry-point group") as e:
        orchestration.flow("nope")
    assert "\n" not in str(e.value)


def test_a_flow_whose_project_is_not_installed_is_one_clear_line(monkeypatch, tmp_path):
    """With the flows' package absent (an installed wheel), the lookup says so in one line
    and how to go on; a missing dependency inside a present flow module is not hidden."""
    absent = EntryPoint("session-end", "hag_absent_flows.session_end:flow", "hag.flows")
    monkeypatch.setattr(orchestration, "registered", lambda: {"session-end": absent})
    with pytest.raises(ConfigError, match=r"the session-end flow .* is not installed") as e:
        orchestration.flow("session-end")
    assert "\n" not in str(e.value) and "PREFECT_API_URL" in str(e.value)

    (tmp_path / "hag_present_flows.py").write_text("import hag_absent_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    present = EntryPoint("x", "hag_present_flows:flow", "hag.flows")
    monkeypatch.setattr(orchestration, "registered", lambda: {"x": present})
    with pytest.raises(ModuleNotFoundError, match="hag_absent_dependency"):
        orchestration.flow("x")
