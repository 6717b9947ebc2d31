"""PostgreSQL for the parts of cairn that share state between processes and machines: the
connection (a small pool of asynchronous connections, a transaction per tenant under
row-level security, TCP keepalive on each) and the one versioned migration runner every set of
tables uses (the memory backend's, the session store's; ``cairn db migrate``).

psycopg is imported only when a database is used: ``cairn -p`` and a daemon without one never
load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
    from cairn.database.connection import (
        DATABASE_ENV,
        ConnectionLost,
        Database,
        DatabaseUnavailable,
        import_psycopg,
    )
    from cairn.database.keepalive import connect_timeout_option, keepalive_options
    from cairn.database.migrations import (
        Component,
        ComponentStatus,
        Migration,
        MigrationError,
        migrate,
        schema_status,
    )

__all__ = [
    "DATABASE_ENV",
    "Component",
    "ComponentStatus",
    "ConnectionLost",
    "Database",
    "DatabaseUnavailable",
    "Migration",
    "MigrationError",
    "connect_timeout_option",
    "import_psycopg",
    "keepalive_options",
    "migrate",
    "schema_status",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "DATABASE_ENV": "connection",
        "ConnectionLost": "connection",
        "Database": "connection",
        "DatabaseUnavailable": "connection",
        "import_psycopg": "connection",
        "connect_timeout_option": "keepalive",
        "keepalive_options": "keepalive",
        "Component": "migrations",
        "ComponentStatus": "migrations",
        "Migration": "migrations",
        "MigrationError": "migrations",
        "migrate": "migrations",
        "schema_status": "migrations",
    },
    __all__,
)
