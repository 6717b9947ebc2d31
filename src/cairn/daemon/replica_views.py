"""A session as the database has it, in the shapes the daemon's routes answer with (the status,
a listing's row, the slash commands): what any replica of ``cairn serve --database`` says about
a session it does not hold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["listed_commands", "listing_row", "status_view"]


def status_view(
    session_id: str,
    summary: Mapping[str, Any],
    *,
    subscribers: int,
    approval_mode: str,
    model: str,
) -> dict[str, Any]:
    """``GET /session/{id}/status`` from the session's row (``approval_mode`` and ``model``:
    the daemon's defaults, for a session that set neither)."""
    running = summary["runningPrompt"] if summary["leaseLive"] else None
    pending = [
        {
            "promptId": p["promptId"],
            "text": _prompt_text(p["body"]),
            "state": "running" if p["promptId"] == running else "queued",
            "queuedAt": int(p["queuedAt"].timestamp() * 1000),
            "originatorClientId": p["clientId"],
        }
        for p in summary["prompts"]
    ]
    return {
        "sessionId": session_id,
        "workspaceCwd": summary["cwd"],
        "createdAt": int(summary["createdAt"].timestamp() * 1000),
        "hasActivePrompt": running is not None,
        "pendingPrompts": pending,
        "isWaitingForPermission": bool(summary["pending"]) and summary["leaseLive"],
        "pendingPermissions": summary["pending"] if summary["leaseLive"] else [],
        "approvalMode": summary["approvalMode"] or approval_mode,
        "model": summary["model"] or model,
        "lastEventId": summary["eventSeq"],
        "subscribers": subscribers,
        "turns": summary["turns"],
        "replicaId": summary["owner"] if summary["leaseLive"] else None,
    }


def listing_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """One session of ``GET /workspace/sessions``."""
    return {
        "sessionId": row["sessionId"],
        "workspaceCwd": row["cwd"],
        "createdAt": int(row["createdAt"].timestamp() * 1000),
        "updatedAt": int(row["updatedAt"].timestamp() * 1000),
        "displayName": row["title"] or row["firstPrompt"],
        "lastRecap": row["lastRecap"],
        "messageCount": row["messageCount"],
        "live": row["state"] == "open",
        "hasActivePrompt": bool(row["leaseLive"] and row["runningPrompt"]),
        "replicaId": row["owner"] if row["leaseLive"] else None,
    }


def listed_commands(summary: Mapping[str, Any]) -> list[Any]:
    """The session's slash commands as last announced."""
    commands = summary["commands"] or {}
    listed = commands.get("availableCommands") if isinstance(commands, dict) else None
    return listed if isinstance(listed, list) else []


def _prompt_text(body: Any) -> str:
    prompt = body.get("prompt") if isinstance(body, dict) else None
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        texts = [
            b.get("text", "") for b in prompt if isinstance(b, dict) and b.get("type") == "text"
        ]
        return "".join(t for t in texts if isinstance(t, str))
    return ""
