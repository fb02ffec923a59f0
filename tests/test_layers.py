"""The layers point one way (flows -> tasks -> hag, hag_lab -> hag): hag never imports the
layers above it, and inside the product and the lab no library module imports a command."""

from __future__ import annotations

import ast
import functools
import sys
import tomllib
from importlib.metadata import EntryPoint

import pytest

from hag import PROJECT_ROOT
from hag.cli import COMMANDS, added_commands
from hag.errors import ConfigError
from hag.support import orchestration

# Top-level packages nothing under hag/ may import, and why. One line per banned name.
BANNED = {
    "flows": "Prefect runs the flows; hag looks one up by name (hag.support.orchestration)",
    "tasks": "tasks wrap hag, never the reverse",
    "expectations": "the suites' runner is hag.quality; expectations/ holds only the JSON suites",
    "hag_lab": "the lab studies the product from outside; its commands come by entry point",
    "bench": "the benchmarks measure the product and the lab from outside",
}
# The command lines: a library module below them never imports one (the lab's commands reach
# `hag` through the entry-point group hag.commands, not an import).
COMMAND_PACKAGES = ("hag.cli", "hag_lab.cli")

# Inside hag, the rooms (a folder, or a module at the top) stand on floors: a room imports
# rooms of its own floor or below, never above. docs/architecture.md draws the same picture.
FLOORS = {
    # the foundations: exceptions, configuration, the dials, storage, vectors, small helpers
    "errors": 0, "config": 0, "settings": 0, "storage": 0, "vectors": 0, "support": 0,
    "retrieval": 1,  # the read path
    "operations": 2,  # operator doors: corpus, a learner's data, re-embedding
    "evidence": 2,  # the evidence model the jobs share: how reports become edge confidence
    "session": 3, "nightly": 3, "enrichment": 3, "quality": 3,  # the jobs
    "api": 4, "service": 4,  # the public surface: the library's API and the HTTP service
    "cli": 5, "docs": 5,  # the command line and the shipped pages
}  # fmt: skip


def _imported_modules(tree: ast.AST) -> set[str]:
    """Every absolute module an import statement or import_module call names, in full."""
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            modules.add(node.args[0].value)
    return modules


def _imported_roots(tree: ast.AST) -> set[str]:
    """Every absolute top-level module name an import statement or import_module call names."""
    return {name.split(".")[0] for name in _imported_modules(tree)}


@functools.cache
def _sources(package: str) -> list[tuple[str, ast.AST]]:
    """Each module of a top-level package of the checkout, as (dotted name, parsed tree)."""
    found = []
    for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
        name = ".".join(path.relative_to(PROJECT_ROOT).with_suffix("").parts)
        found.append((name.removesuffix(".__init__"), ast.parse(path.read_text(), str(path))))
    return found


def test_nothing_under_hag_imports_a_layer_above_it():
    """No module of hag/ imports flows, tasks, expectations, the lab or bench, lazily or not
    (the BANNED list)."""
    offenders = []
    for path in sorted((PROJECT_ROOT / "hag").rglob("*.py")):
        roots = _imported_roots(ast.parse(path.read_text(), filename=str(path)))
        offenders += [
            f"{path.relative_to(PROJECT_ROOT)}: {name} ({BANNED[name]})"
            for name in sorted(roots & BANNED.keys())
        ]
    assert offenders == []


def test_no_library_module_imports_a_command_line():
    """Below hag/cli and hag_lab/cli, nothing imports either command line (the demo and the
    report once borrowed cli helpers); the product's command table names only hag.cli."""
    offenders = [
        f"{name} imports {module}"
        for package in ("hag", "hag_lab")
        for name, tree in _sources(package)
        if not name.startswith(COMMAND_PACKAGES)
        for module in sorted(_imported_modules(tree))
        if module.startswith(COMMAND_PACKAGES)
    ]
    assert offenders == []
    assert all(target.startswith("hag.cli.") for target in COMMANDS.values())


def _room(module: str) -> str | None:
    """The room of hag a dotted module name lies in (`hag.storage.db` -> storage), or None for
    `hag` itself and for modules outside the product."""
    parts = module.split(".")
    return parts[1] if parts[0] == "hag" and len(parts) > 1 else None


def test_every_room_of_hag_has_a_floor():
    """Each folder and top-level module of hag/ is on exactly one floor, so a new room must
    say where it stands."""
    rooms = {
        p.stem if p.suffix == ".py" else p.name
        for p in (PROJECT_ROOT / "hag").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__")
        or (p.is_dir() and (p / "__init__.py").exists())
    }
    assert rooms == set(FLOORS)


def test_no_room_of_hag_imports_a_room_on_a_higher_floor():
    """The folders show the architecture: storage and the embedders below the read path,
    the read path below the operator doors and the jobs, the API and service above them, the
    command line on top; no import (lazy or not) points up a floor."""
    offenders = []
    for name, tree in _sources("hag"):
        room = _room(name)
        if room is None:
            continue
        imported = set(_imported_modules(tree))
        imported |= {  # `from hag import db` names the module db
            f"hag.{alias.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "hag" and node.level == 0
            for alias in node.names
        }
        offenders += [
            f"{name} (floor {FLOORS[room]}) imports {module} (floor {FLOORS[other]})"
            for module in sorted(imported)
            if (other := _room(module)) in FLOORS and FLOORS[other] > FLOORS[room]
        ]
    assert offenders == []


def test_the_floor_check_sees_an_upward_import():
    """The floor rule would catch storage importing the read path, lazily or not."""
    tree = ast.parse("def f():\n    from hag.retrieval import ann\n")
    assert {_room(m) for m in _imported_modules(tree)} == {"retrieval"}
    assert FLOORS["retrieval"] > FLOORS["storage"]


def test_the_nightly_reaches_the_evidence_model_and_never_session_end():
    """The nightly cull re-weighs prerequisites through the evidence model (hag.evidence), as
    session-end does; no module of hag.nightly imports hag.session, lazily or not, and the
    evidence model imports neither job."""
    nightly = {
        f"{name} imports {module}"
        for name, tree in _sources("hag")
        if _room(name) == "nightly"
        for module in _imported_modules(tree)
        if _room(module) == "session"
    }
    assert nightly == set()
    evidence = {
        f"{name} imports {module}"
        for name, tree in _sources("hag")
        if _room(name) == "evidence"
        for module in _imported_modules(tree)
        if _room(module) in ("session", "nightly")
    }
    assert evidence == set()
    reached = {
        module for name, tree in _sources("hag") if _room(name) == "nightly"
        for module in _imported_modules(tree)
    }  # fmt: skip
    assert "hag.evidence.reweigh" in reached


def test_the_lab_imports_the_product_and_never_a_layer_above_it():
    """hag_lab imports hag (its subject), never flows, tasks, expectations or bench: the
    lab drives the jobs through hag, as the command line does."""
    offenders = [
        f"{name}: {root}"
        for name, tree in _sources("hag_lab")
        for root in sorted(_imported_roots(tree) & (BANNED.keys() - {"hag_lab"}))
    ]
    assert offenders == []
    assert any("hag" in _imported_roots(tree) for _, tree in _sources("hag_lab"))


def test_the_lab_adds_its_commands_by_entry_point_with_their_extras():
    """`hag demo` and `hag simulate` come from the lab's entry points, each naming the extras
    it needs, and load to the lab's click commands."""
    added = added_commands()
    assert {name: ep.module for name, ep in added.items()} == {
        "demo": "hag_lab.cli.demo_cmd",
        "simulate": "hag_lab.cli.simulate_cmd",
    }
    assert added["demo"].extras == ["embedded", "lab"] and added["simulate"].extras == ["lab"]
    assert {name: ep.load().name for name, ep in added.items()} == {
        "demo": "demo",
        "simulate": "simulate",
    }


def test_an_added_command_whose_extra_is_missing_refuses_in_one_line(monkeypatch, capsys):
    """Without the lab extra, `hag simulate` (any arguments) is still listed and refuses in
    one line naming the extra, before the lab's module is imported."""
    from hag.cli import cli, main
    from hag.support import extras

    monkeypatch.setattr(extras, "installed", lambda extra: extra != "lab")
    monkeypatch.delitem(sys.modules, "hag_lab.cli.simulate_cmd", raising=False)
    with pytest.raises(SystemExit) as done:
        main(["simulate", "--seeds", "1,2", "--out", "x"])
    assert done.value.code == 1
    assert capsys.readouterr().err == (
        "hag: hag simulate needs the lab extra: pip install 'hag-memory[lab]'\n"
    )
    assert "hag_lab.cli.simulate_cmd" not in sys.modules
    assert "simulate" in cli.list_commands(None)  # type: ignore[arg-type]


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


def test_the_service_without_its_extra_refuses_before_touching_the_database(monkeypatch, capsys):
    """`hag service` with no fastapi or uvicorn: one line naming the extra, before the
    migrate every command runs on its way (which would write the schema)."""
    from hag.cli import main
    from hag.storage import migrate
    from hag.support import extras

    monkeypatch.setattr(extras, "installed", lambda extra: extra != "service")
    monkeypatch.setenv("HAG_SERVICE_TOKEN", "t")
    touched: list[str] = []
    monkeypatch.setattr(migrate, "ensure_migrated", lambda *a, **k: touched.append("migrate"))
    from hag.cli import service_cmd

    def started() -> None:  # fastapi is here: without the refusal the server would start
        raise AssertionError("the service started")

    monkeypatch.setattr(service_cmd, "_server_class", started)
    with pytest.raises(SystemExit) as done:
        main(["service"])
    assert done.value.code == 1 and touched == []
    assert capsys.readouterr().err == (
        "hag: hag service needs the service extra: pip install 'hag-memory[service]'\n"
    )


@pytest.mark.parametrize("args", [[], ["settings"], ["audit"]])
def test_a_group_without_its_command_prints_its_help(args, capsys):
    """`hag` alone (or a group alone) prints the group's help as click lays it out, exit 2,
    not the whole help run together on one line."""
    from hag.cli import main

    with pytest.raises(SystemExit) as done:
        main(args)
    err = capsys.readouterr().err
    assert done.value.code == 2
    assert err.startswith(f"Usage: hag {' '.join(args)}".rstrip() + " [OPTIONS] COMMAND")
    assert "\nCommands:\n" in err
