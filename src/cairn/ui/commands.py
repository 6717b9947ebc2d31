"""The commands only the terminal UI has (:data:`~cairn.ui.completion.UI_COMMANDS`): ``/quit``
(``/exit``), ``/settings``, ``/resume`` and ``/mcp``. Their screens are in
:mod:`cairn.ui.dialogs`; every other command is the session's."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from cairn.config.editor import EditableSetting, editable_settings, save_setting
from cairn.config.loader import SettingsError
from cairn.session.runtime import SessionNotFound
from cairn.ui.dialogs import McpScreen, ResumeScreen, SettingsScreen
from cairn.ui.transcript import NoticeView

if TYPE_CHECKING:
    from cairn.ui.app import CairnApp

__all__ = ["UiCommands"]


class UiCommands:
    """The UI-only commands of ``app``."""

    def __init__(self, app: CairnApp) -> None:
        self.app = app

    async def run(self, name: str, args: str) -> None:
        app = self.app
        if name in ("quit", "exit"):
            await app.quit_app()
        elif name == "settings":
            await app.push_screen(
                SettingsScreen(app.runtime.settings, editable_settings(), self.save_setting)
            )
        elif name == "resume":
            await self.resume(args)
        elif name == "mcp":
            await app.push_screen(self.mcp_screen())

    def mcp_screen(self) -> McpScreen:
        from cairn.session.mcp import describe_servers

        session = self.app.session
        servers = session.mcp.servers if session.mcp is not None else None
        return McpScreen(
            lambda: describe_servers(servers.statuses() if servers is not None else []),
            servers.changed if servers is not None else None,
        )

    async def resume(self, args: str) -> None:
        app = self.app
        if app.busy:
            await app.transcript.add(
                NoticeView("error", "Cannot resume while a turn is running; wait or press Esc.")
            )
            return
        if args:
            await self.switch_session(args.split()[0])
            return
        sessions = await asyncio.to_thread(app.runtime.list_sessions)

        def picked(session_id: str | None) -> None:
            if session_id:
                app.call_next(self.switch_session, session_id)

        await app.push_screen(ResumeScreen(sessions, current=app.session.id), callback=picked)

    async def switch_session(self, session_id: str) -> None:
        """``/resume``: close the current session and show a recorded one."""
        app = self.app
        if session_id == app.session.id:
            await app.transcript.add(NoticeView("info", "That is the current session."))
            return
        try:
            session = app.runtime.load_session(
                session_id, frontend=app.frontend, approval_mode=app.session.approval_mode
            )
        except SessionNotFound as exc:
            await app.transcript.add(NoticeView("error", str(exc)))
            return
        await app.session.close()
        await app.show_session(session)

    async def save_setting(self, setting: EditableSetting, value: Any) -> str:
        """``/settings``' save: the user's settings file, then the session on screen."""
        app = self.app
        try:
            path = await asyncio.to_thread(
                save_setting, app.runtime.settings, setting.key, value, cwd=app.runtime.cwd
            )
        except SettingsError as exc:
            return f"Could not change {setting.key}: {exc}"
        await app.setting_saved(setting.key, value)
        return f"Saved {setting.key} to {path}."
