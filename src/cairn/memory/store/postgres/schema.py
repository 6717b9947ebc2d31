"""The shared memory's tables, and the row-level security that keeps namespaces apart.

One schema for every namespace (a project's memory, or a hosted daemon's tenant). Every table
has a ``namespace`` column and a row-level security policy that shows a connection only the rows
of the namespace it set for its transaction (``set_config('cairn.namespace', …, true)``), with
``FORCE ROW LEVEL SECURITY`` so the tables' owner is held to it too. A query that forgot its
``WHERE namespace = …`` still sees one tenant only: the database enforces the isolation, not
only cairn. (Superusers and roles with ``BYPASSRLS`` skip every policy: connect as an ordinary
role.)

Why row-level security and not a schema per tenant: a hosted daemon meets new tenants at request
time, and a schema per tenant would mean DDL on the request path, one migration run per tenant and
a catalog that grows with them; with one schema, one migration covers everyone and an index on
``(namespace, …)`` keeps each tenant's reads as fast as a table of its own.

``cairn_memory_namespaces.seq`` orders the changes of a namespace: each write transaction bumps it
(the row lock it takes also serializes the namespace's writers, so sequence order is commit
order) and stamps the rows it touches; a process catches up by reading the rows with a larger
``seq``. Deleted documents stay as rows without content (tombstones) so a catching-up process
learns of the deletion.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

    from cairn.database.migrations import Component

__all__ = ["LOCK_ORDER", "SCHEMA_VERSION", "TABLES", "ensure_schema", "memory_schema"]

# 2: cairn_memory_files (tombstones, version logs); 3: cairn_memory_docs.search (full text)
SCHEMA_VERSION = 3
TABLES = (
    "cairn_memory_namespaces",
    "cairn_memory_docs",
    "cairn_memory_indexes",
    "cairn_memory_history",
    "cairn_memory_trash",
    "cairn_memory_state",
    "cairn_memory_files",
)
SEARCH_BODY_CHARS = 20_000  # of a memory's text, its words searched in the database
_MIGRATION_LOCK = 0x6361_6972_6E00  # pg_advisory_xact_lock key while creating the tables
# The order every transaction takes the tables' locks in: a write section locks its namespace's
# row first, then reads and writes the rest in this order; a pull and a search read a suffix of
# it. An upgrade locks the tables there are in this order before its first statement.
LOCK_ORDER = (
    "cairn_memory_namespaces",
    "cairn_memory_docs",
    "cairn_memory_indexes",
    "cairn_memory_history",
    "cairn_memory_trash",
    "cairn_memory_files",
    "cairn_memory_state",
)

_DDL_TEXT = """
CREATE TABLE IF NOT EXISTS cairn_memory_schema (version integer NOT NULL);

CREATE TABLE IF NOT EXISTS cairn_memory_namespaces (
    namespace text PRIMARY KEY,
    seq bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- One row per memory file (docs), the files' parsed fields the index and MEMORY.md are built
-- from, and a tombstone (content NULL) once deleted.
CREATE TABLE IF NOT EXISTS cairn_memory_docs (
    namespace text NOT NULL,
    scope text NOT NULL CHECK (scope IN ('project', 'user')),
    path text NOT NULL,
    content bytea,
    sha256 text,
    title text,
    description text,
    type text,
    mtime double precision NOT NULL DEFAULT 0,
    seq bigint NOT NULL,
    PRIMARY KEY (namespace, scope, path)
);
CREATE INDEX IF NOT EXISTS cairn_memory_docs_seq ON cairn_memory_docs (namespace, seq);

-- The documents' words for Recall on a machine whose local index is not built yet (schema 3):
-- kept by a trigger on every write (an older cairn's writes too), NULL for a tombstone.
ALTER TABLE cairn_memory_docs ADD COLUMN IF NOT EXISTS search tsvector;
CREATE INDEX IF NOT EXISTS cairn_memory_docs_search ON cairn_memory_docs USING gin (search);
CREATE OR REPLACE FUNCTION cairn_memory_docs_words() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.content IS NULL THEN
        NEW.search := NULL;
        RETURN NEW;
    END IF;
    NEW.search := setweight(to_tsvector('english', coalesce(NEW.title, '')), 'A')
        || setweight(to_tsvector('english', coalesce(NEW.description, '')), 'B');
    BEGIN  -- the body: a file that is not UTF-8 keeps its title and description only
        NEW.search := NEW.search || setweight(
            to_tsvector('english', left(convert_from(NEW.content, 'UTF8'), {body})), 'D');
    EXCEPTION WHEN others THEN
        NULL;
    END;
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS cairn_memory_docs_words ON cairn_memory_docs;
CREATE TRIGGER cairn_memory_docs_words BEFORE INSERT OR UPDATE OF content, title, description
    ON cairn_memory_docs FOR EACH ROW EXECUTE FUNCTION cairn_memory_docs_words();

-- MEMORY.md of each scope, rebuilt in the transaction that changed the documents.
CREATE TABLE IF NOT EXISTS cairn_memory_indexes (
    namespace text NOT NULL,
    scope text NOT NULL,
    content bytea NOT NULL,
    seq bigint NOT NULL,
    PRIMARY KEY (namespace, scope)
);

-- The audit trail: one row per line, kept as written.
CREATE TABLE IF NOT EXISTS cairn_memory_history (
    namespace text NOT NULL,
    scope text NOT NULL,
    line_no bigint NOT NULL,
    line bytea NOT NULL,
    seq bigint NOT NULL,
    PRIMARY KEY (namespace, scope, line_no)
);

-- Forget's and Dream's trash: every file of a trash folder (its manifest.json included).
CREATE TABLE IF NOT EXISTS cairn_memory_trash (
    namespace text NOT NULL,
    scope text NOT NULL,
    path text NOT NULL,
    content bytea,
    seq bigint NOT NULL,
    PRIMARY KEY (namespace, scope, path)
);

-- The other files cairn keeps in a memory root, by path in the root: the tombstones of
-- forgotten facts (.forgotten.jsonl) and one version log per memory (.versions/<path>.jsonl).
CREATE TABLE IF NOT EXISTS cairn_memory_files (
    namespace text NOT NULL,
    scope text NOT NULL,
    path text NOT NULL,
    content bytea,
    seq bigint NOT NULL,
    PRIMARY KEY (namespace, scope, path)
);
CREATE INDEX IF NOT EXISTS cairn_memory_files_seq ON cairn_memory_files (namespace, seq);

-- meta.json, extract-cursor.json and the other state files of the namespace.
CREATE TABLE IF NOT EXISTS cairn_memory_state (
    namespace text NOT NULL,
    name text NOT NULL,
    content bytea,
    seq bigint NOT NULL,
    PRIMARY KEY (namespace, name)
);
"""


_DDL = _DDL_TEXT.replace("{body}", str(SEARCH_BODY_CHARS))

# The words of the documents written before schema 3. The table's owner steps out of its own
# row-level security for this one statement (in the migration's transaction, which holds the
# table's lock until commit): a backfill must see every namespace, and nothing else runs then.
_BACKFILL = """
ALTER TABLE cairn_memory_docs NO FORCE ROW LEVEL SECURITY;
UPDATE cairn_memory_docs SET title = title WHERE content IS NOT NULL AND search IS NULL;
ALTER TABLE cairn_memory_docs FORCE ROW LEVEL SECURITY
"""


def _policies() -> str:
    statements = []
    for table in TABLES:
        statements += [
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            f"DROP POLICY IF EXISTS cairn_namespace ON {table}",
            f"CREATE POLICY cairn_namespace ON {table} "
            "USING (namespace = current_setting('cairn.namespace', true)) "
            "WITH CHECK (namespace = current_setting('cairn.namespace', true))",
        ]
    return ";\n".join(statements)


def ensure_schema(connection: psycopg.Connection[Any]) -> None:
    """Create the tables and policies when missing, or bring an older schema up to this
    version (idempotent; concurrent callers wait).

    Every version so far only adds: the upgrade is the same ``CREATE … IF NOT EXISTS`` as a
    new database, then (from before 3) the full-text words of the documents already there,
    then the policies for every table again (they are idempotent), so a table a newer version
    added is never left without row-level security.
    """
    if _current(connection):  # the common case: no lock, no DDL
        return
    migrate_under_lock(connection)


def migrate_under_lock(connection: psycopg.Connection[Any]) -> None:
    """:func:`ensure_schema`'s work once the schema was found older or missing: under the
    migration lock, create or upgrade it in one transaction, unless the process that held the
    lock before already did (the DDL must not run again then: it would wait for the tables'
    exclusive locks behind that process's first writes).

    An upgrade first locks the tables there are, exclusively, in :data:`LOCK_ORDER`: it waits
    for the write sections and pulls under way (an older cairn's, in a rolling upgrade) to end,
    holding nothing they wait for. Its statements one by one took a share lock on the documents
    (an index) and then waited for their exclusive lock (a new column) behind a section that had
    read them and now waited to write them behind that share lock: a deadlock, which PostgreSQL
    broke by failing one of the two."""
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        if _version(connection) >= SCHEMA_VERSION:
            return
        _lock_tables(connection)
        connection.execute(_DDL)
        found = connection.execute("SELECT max(version) FROM cairn_memory_schema").fetchone()
        if found is None or found[0] is None or found[0] < SCHEMA_VERSION:
            connection.execute(_BACKFILL)
            connection.execute(_policies())
            connection.execute(
                "INSERT INTO cairn_memory_schema (version) VALUES (%s)", (SCHEMA_VERSION,)
            )


def _lock_tables(connection: psycopg.Connection[Any]) -> None:
    """The tables of :data:`LOCK_ORDER` there are, locked exclusively in that order."""
    rows = connection.execute(
        "SELECT tablename FROM pg_catalog.pg_tables WHERE tablename = ANY (%s) "
        "AND schemaname = ANY (current_schemas(false))",
        (list(LOCK_ORDER),),
    ).fetchall()
    there = {str(row[0]) for row in rows}
    tables = [table for table in LOCK_ORDER if table in there]
    if tables:  # one statement: LOCK TABLE takes them in the order named
        connection.execute(f"LOCK TABLE {', '.join(tables)} IN ACCESS EXCLUSIVE MODE")


def _current(connection: psycopg.Connection[Any]) -> bool:
    """Whether the schema exists at this version already."""
    with connection.transaction():
        return _version(connection) >= SCHEMA_VERSION


def _version(connection: psycopg.Connection[Any]) -> int:
    """The schema's version, 0 when there is none yet. Whether its table exists is read from
    the catalog with a query, not with ``to_regclass``: that looks the name up in the server's
    catalog cache, which may still hold "no such table" from before another process created it
    (an advisory lock processes no invalidation), so a process waiting for the migration lock
    saw no schema and ran the DDL again."""
    table = connection.execute(
        "SELECT 1 FROM pg_catalog.pg_tables WHERE tablename = 'cairn_memory_schema' "
        "AND schemaname = ANY (current_schemas(false))"
    ).fetchone()
    if table is None:
        return 0
    found = connection.execute("SELECT max(version) FROM cairn_memory_schema").fetchone()
    return 0 if found is None or found[0] is None else int(found[0])


def _migrate(connection: psycopg.Connection[Any]) -> None:
    ensure_schema(connection)


def memory_schema() -> Component:
    """The memory tables as a component of the shared migration runner (``cairn db migrate``):
    each step is :func:`ensure_schema`, which brings a database of any earlier schema up to
    this one (step 2: the documents' full-text words, for a database step 1 migrated before)."""
    from cairn.database.migrations import Component, Migration

    steps = (
        Migration(1, "memory tables", _migrate),
        Migration(2, f"full-text search of memories (schema {SCHEMA_VERSION})", _migrate),
    )
    return Component("memory", steps)
