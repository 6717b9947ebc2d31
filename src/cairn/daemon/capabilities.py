"""What ``GET /capabilities`` says: the daemon's features and limits, from its configuration alone.

It needs no session runtime, so the daemon answers it from the moment it listens
(:class:`cairn.daemon.app.BootApp`), as it answers ``/health``.
"""

from __future__ import annotations

from typing import Any

from cairn._version import __version__
from cairn.daemon.config import DaemonConfig

__all__ = ["FEATURES", "capabilities"]

FEATURES = (
    "health",
    "capabilities",
    "session_create",
    "session_load",
    "session_list",
    "session_status",
    "session_commands",
    "session_prompt",
    "non_blocking_prompt",
    "session_cancel",
    "session_events",
    "slow_client_warning",
    "session_close",
    "session_permission_vote",
    "session_approval_mode_control",
    "session_model",  # GET/POST /session/{id}/model: the model picker
    "session_recap",
    "session_recap_cancel",  # a recap stops when its HTTP client disconnects
    "session_context",  # GET /session/{id}/context: what fills the window, tokens by purpose
    "client_identity",
    "session_rewind",
    "idempotent_prompts",  # POST /session/{id}/prompt with an Idempotency-Key runs it once
)


def capabilities(config: DaemonConfig) -> dict[str, Any]:
    """The body of ``GET /capabilities``."""
    features = list(FEATURES)
    if config.allow_origins:
        features.append("allow_origin")
    tenancy: dict[str, Any] = {}
    if config.tenant_header is not None:
        features.append("tenants")
        tenancy["tenantHeader"] = config.tenant_header
    if config.database is not None:
        features.append("replicas")  # several replicas over one database serve any session
        if config.replica_id is not None:
            tenancy["replicaId"] = config.replica_id
    return {
        "v": 1,
        "mode": "replica" if config.database is not None else "in-process",
        "features": features,
        "workspaceCwd": str(config.workspace.resolve()),
        "version": __version__,
        "limits": {
            "maxSessions": config.max_sessions,
            "maxPendingPromptsPerSession": config.max_pending_prompts,
            "eventRingSize": config.event_ring_size,
            "maxBodyBytes": config.max_body_bytes,
        },
        **tenancy,
    }
