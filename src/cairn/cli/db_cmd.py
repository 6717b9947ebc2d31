"""``cairn db``: create or upgrade cairn's tables in a PostgreSQL database, and say where a
database stands. Argument parsing and output only: the steps are each component's
(:mod:`cairn.database.migrations`)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from cairn.cli.app import group_app
from cairn.exit_codes import ExitCode

if TYPE_CHECKING:
    from cairn.database.migrations import Component

__all__ = ["db_app"]

db_app = group_app("db")

_DATABASE = typer.Option(
    "--database",
    help="The database's DSN (default: CAIRN_DATABASE_URL).",
    envvar="CAIRN_DATABASE_URL",
)


def components() -> list[Component]:
    """Every set of cairn's tables, in the order they are migrated."""
    from cairn.memory.store.postgres.schema import memory_schema
    from cairn.recording.store.schema import sessions_schema

    return [sessions_schema(), memory_schema()]


def _fail(message: str, code: int = ExitCode.ERROR) -> NoReturn:
    sys.stderr.write(f"cairn db: {message}\n")
    raise typer.Exit(code)


def _dsn(database: str | None) -> str:
    dsn = (database or os.environ.get("CAIRN_DATABASE_URL") or "").strip()
    if not dsn:
        _fail("no database: pass --database DSN or set CAIRN_DATABASE_URL", ExitCode.BAD_INPUT)
    return dsn


@db_app.command()
def migrate(database: Annotated[str | None, _DATABASE] = None) -> None:
    """Apply every missing migration (safe to run again, and from several machines at once)."""
    from cairn.database.connection import Database, DatabaseUnavailable, redact
    from cairn.database.migrations import MigrationError
    from cairn.database.migrations import migrate as run

    dsn = _dsn(database)
    try:
        with Database(dsn).connect() as connection:
            applied = run(connection, components())
    except DatabaseUnavailable as error:
        _fail(f"{redact(dsn)}: {error}")
    except MigrationError as error:
        _fail(str(error))
    for step in applied:
        typer.echo(f"applied {step}")
    typer.echo("the database is up to date" if applied else "nothing to do: up to date")


@db_app.command()
def status(database: Annotated[str | None, _DATABASE] = None) -> None:
    """Each component's version in the database and the one this cairn needs (exit 1 when
    one is behind)."""
    from cairn.database.connection import Database, DatabaseUnavailable, redact
    from cairn.database.migrations import schema_status

    dsn = _dsn(database)
    try:
        with Database(dsn).connect() as connection:
            found = schema_status(connection, components())
    except DatabaseUnavailable as error:
        _fail(f"{redact(dsn)}: {error}")
    for component in found:
        state = "up to date" if component.up_to_date else "behind: run cairn db migrate"
        typer.echo(f"{component.name}: {component.current} (needs {component.expected}) {state}")
    if not all(c.up_to_date for c in found):
        raise typer.Exit(ExitCode.ERROR)
