"""The one schema migration runner: numbered steps per component, applied once, in order.

A *component* is a set of tables with its own history (``memory``, ``sessions``); its
:class:`Migration` steps are numbered from 1 and never change once released: a change to the
tables is a new step. ``cairn_schema_versions`` holds each component's version; :func:`migrate`
applies the missing steps of the given components, each step in one transaction with its
version bump. That transaction first takes the migration lock (``pg_advisory_xact_lock``: the
server lets go of it when the transaction ends, however it ends, and it needs no session of its
own, so a pooler in transaction mode cannot strand it) and reads the component's version again:
of several processes migrating at once (replicas started together, ``cairn db migrate`` on two
machines) one applies each step and the others, let in after it committed, find it done. A
failing step leaves the steps before it. An up-to-date database costs one read: no lock, no DDL.
:func:`schema_status` says where a database stands, which the daemon's ``GET /ready`` and
``cairn db status`` report.

A step that changes a table the running code uses takes that table's locks itself, before its
first statement and in the order the code's transactions take them (see the memory tables'
``LOCK_ORDER``): a step's statements one by one, each taking a stronger lock than the last, can
deadlock with a transaction of a replica still at work.

A database whose tables are newer than the code (a rolling upgrade's old replicas) is current
for that code: steps only ever add, so older code keeps working on newer tables, and migrates
nothing.
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
    """Apply every missing step of ``components``; what was applied (``"sessions 1: ..."``),
    not what another process applied meanwhile.

    Quick when nothing is missing: one read, no lock, no DDL.
    """
    if all(s.up_to_date for s in schema_status(connection, components)):
        return []
    applied: list[str] = []
    for component in components:
        for step in component.migrations:
            if _apply(connection, component, step):
                applied.append(f"{component.name} {step.version}: {step.description}")
    return applied


def _apply(connection: psycopg.Connection[Any], component: Component, step: Migration) -> bool:
    """Apply ``step`` under the migration lock, unless the database has it already (False)."""
    try:
        with connection.transaction():  # the step and its version, or neither
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
            if _version_under_lock(connection, component.name) >= step.version:
                return False
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
    return True


def _version_under_lock(connection: psycopg.Connection[Any], name: str) -> int:
    """The component's version, read in the transaction holding the migration lock (the
    versions table made when missing). Whether the table exists is asked of the catalog with a
    query, which sees what committed before the lock was granted; ``to_regclass`` reads the
    server's catalog cache, which waiting for an advisory lock does not refresh."""
    there = connection.execute(
        "SELECT 1 FROM pg_catalog.pg_tables WHERE tablename = %s "
        "AND schemaname = ANY (current_schemas(false))",
        (VERSIONS_TABLE,),
    ).fetchone()
    if there is None:
        connection.execute(_VERSIONS_DDL)
        return 0
    query = f"SELECT version FROM {VERSIONS_TABLE} WHERE component = %s"  # noqa: S608 - fixed
    found = connection.execute(query, (name,)).fetchone()
    return 0 if found is None else int(found[0])


def _versions(connection: psycopg.Connection[Any]) -> dict[str, int]:
    with connection.transaction():
        found = connection.execute("SELECT to_regclass(%s)", (VERSIONS_TABLE,)).fetchone()
        if found is None or found[0] is None:
            return {}
        query = f"SELECT component, version FROM {VERSIONS_TABLE}"  # noqa: S608 - fixed text
        rows = connection.execute(query).fetchall()
    return {str(name): int(version) for name, version in rows}
