"""The session store's tables (component ``sessions`` of :mod:`cairn.database.migrations`).

Every table holding a tenant's rows carries ``tenant`` (``(none)`` on a daemon without tenants)
and ``project`` (the project key of the workspace), and a row-level security policy that shows
a transaction only the rows of the tenant it named (``cairn.tenant``), with ``FORCE ROW LEVEL
SECURITY`` so the tables' owner is held to it too: the same isolation as the memory tables.

- ``cairn_sessions``: one row per session: what a listing shows, its lease (``owner``,
  ``epoch``: the fencing token every write of the owner checks, ``lease_until``), the prompt
  running now, the open permission requests, the last command list, and counters (records,
  the last event's id);
- ``cairn_session_records``: the recording, one row per record, the JSONL line's text as is;
- ``cairn_session_events``: the event log (``Last-Event-ID`` resumes from it on any replica);
- ``cairn_session_prompts``: admitted prompts (the queue a new owner takes over, and each
  ``Idempotency-Key``);
- ``cairn_replicas``: the replicas and where they listen (no tenant data, no policy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cairn.database.migrations import Component

__all__ = ["CHANNEL", "HANDOVER_CHANNEL", "TENANT_TABLES", "sessions_schema"]

CHANNEL = "cairn_session_events"  # NOTIFY channel: "<tenant>\t<project>\t<session>\t<seq>"
# NOTIFY channel: "<tenant>\t<project>\t<session>": its queued prompts wait for a replica
HANDOVER_CHANNEL = f"{CHANNEL}_handover"
TENANT_TABLES = (
    "cairn_sessions",
    "cairn_session_records",
    "cairn_session_events",
    "cairn_session_prompts",
)

_KEY = """
    tenant text NOT NULL,
    project text NOT NULL,
    session_id text NOT NULL,"""

_TABLES = f"""
CREATE TABLE cairn_sessions ({_KEY}
    cwd text NOT NULL,
    state text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed')),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    title text,
    first_prompt text NOT NULL DEFAULT '',
    last_recap text,
    message_count integer NOT NULL DEFAULT 0,
    record_count bigint NOT NULL DEFAULT 0,
    event_seq bigint NOT NULL DEFAULT 0,
    owner text,
    epoch bigint NOT NULL DEFAULT 0,
    lease_until timestamptz,
    running_prompt text,
    pending jsonb NOT NULL DEFAULT '[]',
    commands jsonb,
    approval_mode text,
    model text,
    turns integer NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, project, session_id)
);
CREATE INDEX cairn_sessions_updated ON cairn_sessions (tenant, project, updated_at DESC);

CREATE TABLE cairn_session_records ({_KEY}
    seq bigint NOT NULL,
    record text NOT NULL,
    PRIMARY KEY (tenant, project, session_id, seq)
);

CREATE TABLE cairn_session_events ({_KEY}
    seq bigint NOT NULL,
    type text NOT NULL,
    envelope text NOT NULL,
    PRIMARY KEY (tenant, project, session_id, seq)
);

CREATE TABLE cairn_session_prompts ({_KEY}
    prompt_id text NOT NULL,
    position bigserial,
    idempotency_key text,
    body_hash text NOT NULL,
    body jsonb NOT NULL,
    client_id text,
    state text NOT NULL
        CHECK (state IN ('queued', 'running', 'done', 'failed', 'interrupted', 'dropped')),
    queued_at timestamptz NOT NULL DEFAULT now(),
    last_event_id bigint NOT NULL,
    PRIMARY KEY (tenant, project, session_id, prompt_id)
);
CREATE UNIQUE INDEX cairn_session_prompts_key
    ON cairn_session_prompts (tenant, project, session_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX cairn_session_prompts_queue
    ON cairn_session_prompts (tenant, project, session_id, position) WHERE state = 'queued';

CREATE TABLE cairn_replicas (
    replica_id text PRIMARY KEY,
    url text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at timestamptz NOT NULL DEFAULT now()
);
"""


def _policies() -> str:
    statements = []
    for table in TENANT_TABLES:
        statements += [
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            f"CREATE POLICY cairn_tenant ON {table} "
            "USING (tenant = current_setting('cairn.tenant', true)) "
            "WITH CHECK (tenant = current_setting('cairn.tenant', true))",
        ]
    return ";\n".join(statements) + ";"


def sessions_schema() -> Component:
    """The session store's steps for the shared migration runner."""
    from cairn.database.migrations import Component, Migration

    return Component(
        "sessions",
        (Migration(1, "sessions, records, events, prompts and replicas", _TABLES + _policies()),),
    )
