"""The one schema migration runner: numbered steps per component, applied once, in order.

A *component* is a set of tables with its own history (``memory``, ``sessions``); its
:class:`Migration` steps are numbered from 1 and never change once released: a change to the
tables is a new step. ``cairn_schema_versions`` holds each component's version; :func:`migrate`
applies the missing steps of the given components, each step in its own transaction with the
version bump, under one advisory lock held for the whole run (two processes migrating at once:
the second waits, then finds nothing left to do); a failing step leaves the steps before it.
:func:`schema_status` says where a database stands, which the daemon's ``GET /ready`` and
``cairn db status`` report.

A database whose tables are newer than the code (a rolling upgrade's old replicas) is current
for that code: steps only ever add, so older code keeps working on newer tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "VERSIONS_TABLE",
    "Component",
    "ComponentStatus",
    "Migration",
    "MigrationError",
    "migrate",
    "schema_status",
]

VERSIONS_TABLE = "cairn_schema_versions"
_LOCK = 0x6361_6972_6E01  # pg_advisory_xact_lock key while migrating (memory's own was ...00)

_VERSIONS_DDL = f"""
CREATE TABLE IF NOT EXISTS {VERSIONS_TABLE} (
    component text PRIMARY KEY,
    version integer NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
)
"""

Apply = Callable[["psycopg.Connection[Any]"], None]


class MigrationError(RuntimeError):
    """A step failed; the database keeps the steps before it."""


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Apply | str  # a function run inside the step's transaction, or SQL statements


@dataclass(frozen=True)
class Component:
    name: str
    migrations: tuple[Migration, ...]

    @property
    def version(self) -> int:
        """The version this code expects (its newest step)."""
        return max((m.version for m in self.migrations), default=0)

    def __post_init__(self) -> None:
        numbers = [m.version for m in self.migrations]
        if numbers != list(range(1, len(numbers) + 1)):
            raise ValueError(f"{self.name}: migrations must be numbered 1, 2, 3 ... in order")


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    current: int  # what the database holds (0: none of it)
    expected: int  # what this code needs

    @property
    def up_to_date(self) -> bool:
        return self.current >= self.expected


def schema_status(
    connection: psycopg.Connection[Any], components: Sequence[Component]
) -> list[ComponentStatus]:
    """Each component's version in the database and the one this code expects."""
    versions = _versions(connection)
    return [ComponentStatus(c.name, versions.get(c.name, 0), c.version) for c in components]


def migrate(connection: psycopg.Connection[Any], components: Sequence[Component]) -> list[str]:
    """Apply every missing step of ``components``; what was applied (``"sessions 1: ..."``).

    Quick when nothing is missing: one read, no lock, no DDL.
    """
    if all(s.up_to_date for s in schema_status(connection, components)):
        return []
    applied: list[str] = []
    with connection.transaction():
        connection.execute("SELECT pg_advisory_lock(%s)", (_LOCK,))  # until unlocked below
    try:
        with connection.transaction():
            connection.execute(_VERSIONS_DDL)
        versions = _versions(connection)
        for component in components:
            for step in component.migrations:
                if step.version <= versions.get(component.name, 0):
                    continue
                _apply(connection, component, step)
                applied.append(f"{component.name} {step.version}: {step.description}")
    finally:
        if not connection.broken:
            with connection.transaction():
                connection.execute("SELECT pg_advisory_unlock(%s)", (_LOCK,))
    return applied


def _apply(connection: psycopg.Connection[Any], component: Component, step: Migration) -> None:
    try:
        with connection.transaction():  # the step and its version, or neither
            if isinstance(step.apply, str):
                connection.execute(step.apply.encode())
            else:
                step.apply(connection)
            bump = (
                f"INSERT INTO {VERSIONS_TABLE} (component, version) VALUES (%s, %s) "  # noqa: S608
                "ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version, "
                "updated_at = now()"
            )
            connection.execute(bump, (component.name, step.version))
    except Exception as error:
        raise MigrationError(
            f"{component.name} migration {step.version} ({step.description}) failed: {error}"
        ) from error


def _versions(connection: psycopg.Connection[Any]) -> dict[str, int]:
    with connection.transaction():
        found = connection.execute("SELECT to_regclass(%s)", (VERSIONS_TABLE,)).fetchone()
        if found is None or found[0] is None:
            return {}
        query = f"SELECT component, version FROM {VERSIONS_TABLE}"  # noqa: S608 - fixed text
        rows = connection.execute(query).fetchall()
    return {str(name): int(version) for name, version in rows}
