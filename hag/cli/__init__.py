"""`hag`: the operator's command line.

Sub-commands are imported only when called (a lazy click group), so `hag retrieve` never
pays for Prefect or Great Expectations. The lab's commands (`hag demo`, `hag simulate`, in
hag_lab) are not the product's: the lab declares them in pyproject.toml as the entry-point
group `hag.commands`, each with the extras it needs, and this group loads one only when it
is called and its extras are installed (hag never imports the lab; tests/test_layers.py).

The error convention (README, "The command line"), held by tests/test_cli_errors.py over
every command: every failure is one line on stderr starting `hag: `, and no traceback.
Exit 0: done. Exit 1: the command was understood but refused or failed: a value that is
malformed or out of range, an unknown topic, dial, file, session or id (each named), a
database refusal, a failed check. Exit 2: the command line itself is wrong: an unknown
option or command, a missing or extra argument, options that exclude each other.
"""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import EntryPoint, entry_points
from typing import Any, NoReturn

import click

# name -> "module:attribute"; each module owns its commands.
COMMANDS: dict[str, str] = {
    "db": "hag.cli.db_cmd:db",
    "migrate": "hag.cli.db_cmd:migrate",
    "load-corpus": "hag.cli.corpus_cmd:load_corpus",
    "export": "hag.cli.corpus_cmd:export",
    "settings": "hag.cli.settings_cmd:settings",
    "retrieve": "hag.cli.retrieve_cmd:retrieve",
    "ingest": "hag.cli.session_cmd:ingest",
    "process-sessions": "hag.cli.session_cmd:process_sessions",
    "nightly": "hag.cli.nightly_cmd:nightly",
    "audit": "hag.cli.nightly_cmd:audit",
    "history": "hag.cli.history_cmd:history",
    "explain": "hag.cli.explain_cmd:explain",
    "learner": "hag.cli.learner_cmd:learner",
    "runs": "hag.cli.runs_cmd:runs",
    "check": "hag.cli.check_cmd:check",
    "enrich": "hag.cli.enrich_cmd:enrich",
    "serve": "hag.cli.serve_cmd:serve",
    "service": "hag.cli.service_cmd:service",
    "reembed": "hag.cli.reembed_cmd:reembed",
}

# Commands another package adds, by entry point: `demo = "hag_lab.cli.demo_cmd:demo [lab]"`.
COMMAND_GROUP = "hag.commands"


def added_commands() -> dict[str, EntryPoint]:
    """The commands the installed distributions add, by name (the product's own win)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=COMMAND_GROUP):
        if ep.name not in COMMANDS:
            found.setdefault(ep.name, ep)
    return found


def _needs_extra(name: str, extra: str) -> click.Command:
    """A stand-in for an added command whose extra is missing: listed in `hag --help`, and
    called (with any arguments) it refuses in one line naming the extra."""
    from hag.support import extras

    def refuse(args: tuple[str, ...]) -> None:
        extras.require(extra, f"hag {name}")

    return click.Command(
        name,
        callback=refuse,
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
        context_settings={"ignore_unknown_options": True},
        add_help_option=False,
        help=f"(needs the {extra} extra: {extras.install_hint(extra)})",
    )


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS.keys() | added_commands().keys())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return self._added(cmd_name)
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]

    def _added(self, cmd_name: str) -> click.Command | None:
        from hag.support import extras

        ep = added_commands().get(cmd_name)
        if ep is None:
            return None
        missing = [e for e in ep.extras if not extras.installed(e)]
        if missing:  # checked before loading: the command's module may import the extra
            return _needs_extra(cmd_name, missing[0])
        return ep.load()  # type: ignore[no-any-return]


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hag-memory")
@click.option(
    "--require-database",
    is_flag=True,
    help="Refuse to start the embedded database when DATABASE_URL is unset "
    "(as HAG_REQUIRE_DATABASE=1; a worker or service must reach the real memory).",
)
def cli(require_database: bool) -> None:
    """HAG memory: the long-term, learning memory of an AI tutor."""
    if require_database:
        import os

        from hag.config import reset_config

        os.environ["HAG_REQUIRE_DATABASE"] = "1"  # the processes this one starts inherit it
        reset_config()


def _one_line(message: str) -> str:
    return " ".join(part.strip() for part in message.strip().splitlines() if part.strip())


def _usage(exc: click.UsageError) -> NoReturn:
    hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
    click.echo(f"hag: {_one_line(exc.format_message()).rstrip('.')}{hint}", err=True)
    sys.exit(2)


def main(argv: list[str] | None = None) -> Any:
    from hag.errors import HagError

    try:
        _check_environment(sys.argv[1:] if argv is None else argv)
        return cli.main(args=argv, prog_name="hag", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("hag: aborted", err=True)
        sys.exit(1)
    except click.BadParameter as exc:  # a value: malformed or out of range
        if isinstance(exc, click.MissingParameter):  # an absent one is the command line's shape
            _usage(exc)
        click.echo(f"hag: {_one_line(exc.format_message())}", err=True)
        sys.exit(1)
    except click.exceptions.NoArgsIsHelpError as exc:  # `hag`, `hag settings`: the help
        click.echo(exc.format_message(), err=True)
        sys.exit(2)
    except click.UsageError as exc:  # the command line's shape
        _usage(exc)
    except click.ClickException as exc:
        click.echo(f"hag: {_one_line(exc.format_message())}", err=True)
        sys.exit(exc.exit_code)
    except HagError as exc:
        click.echo(f"hag: {exc}", err=True)
        sys.exit(1)
    except ModuleNotFoundError as exc:
        # A path no command checks up front met an extra that is not installed.
        from hag.support import extras

        extra = extras.extra_for(exc.name)
        if extra is None:
            raise
        args = sys.argv[1:] if argv is None else argv
        command = next((f"hag {a}" for a in args if not a.startswith("-")), "hag")
        click.echo(
            f"hag: {command} needs the {extra} extra: {extras.install_hint(extra)}", err=True
        )
        sys.exit(1)
    except Exception as exc:
        # A database refusal nobody foresaw (a read-only replica, a lock timeout) is still an
        # operator's one-line reason, not a traceback; psycopg is in sys.modules once any
        # command has touched the database, and only then can the error be one of its.
        psycopg = sys.modules.get("psycopg")
        if psycopg is None or not isinstance(exc, psycopg.Error):
            raise
        lines = str(exc).strip().splitlines()
        click.echo(
            f"hag: database error: {lines[0] if lines else type(exc).__name__}"
            + _unreadable_rows(exc),
            err=True,
        )
        sys.exit(1)
    finally:
        from hag.storage import db

        db.close_all()


def _check_environment(args: list[str]) -> None:
    """Read the process configuration before any command runs, so that an invalid
    environment value is the same one line whatever the command (help still works)."""
    if {"-h", "--help", "--version"} & set(args):
        return
    from hag.config import get_config

    get_config()


def _unreadable_rows(exc: Exception) -> str:
    """For a read that met a timestamp the client cannot hold, which rows hold one."""
    if "timestamp too" not in str(exc) and "year" not in str(exc):
        return ""
    from hag.storage import db
    from hag.support import bounds

    try:
        with db.connect() as conn:
            where = bounds.unreadable_rows(conn)
    except Exception:  # naming the row is a courtesy: never hide the first error
        return ""
    return f" (stored out of range: {where})" if where else ""
