"""A session's permission rules and hooks, as its settings files say while it runs.

They are read when the session starts. A tool call that changes cairn's own settings files
(:mod:`cairn.tools.protected`) is confirmed as a settings change; a change the user approved in
that dialog applies to the running session at once (its rules and hooks follow the files, and
a trusted folder stays trusted with the commands just approved), while one nobody confirmed
(yolo) waits for the next start of cairn, where the project's trust check sees it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.config.loader import SettingsError, load_settings
from cairn.config.trust import TrustFileError, keep_trust_after_approved_change, project_trust
from cairn.debug_log import get_logger
from cairn.hooks.runner import HookRunner
from cairn.tools.permissions import PermissionRules
from cairn.tools.scheduler import SETTINGS_APPLIED_NOTICE, SETTINGS_KEPT_NOTICE
from cairn.vocabulary.events import EventSink, Notice

if TYPE_CHECKING:
    from cairn.config.settings import HooksSettings
    from cairn.config.trust import ProjectTrust
    from cairn.llm.types import Provider
    from cairn.session.workspace import SessionWorkspace
    from cairn.tools.scheduler import ToolScheduler

__all__ = ["LiveSettings"]

_log = get_logger("SESSION")


class LiveSettings:
    """See the module docstring; :attr:`hooks` is the session's hook runner now."""

    def __init__(
        self,
        workspace: SessionWorkspace,
        session_id: str,
        transcript_path: Path | None,
        *,
        provider: Provider | None = None,
        approval_mode: Callable[[], str] | None = None,
        env_file: Path | None = None,
    ) -> None:
        """``transcript_path``: the recording hooks are told about (``None``: not recorded);
        ``provider``: the model prompt hooks ask; ``approval_mode``: the session's, for the
        hooks' ``permission_mode``; ``env_file``: SessionStart hooks' ``CLAUDE_ENV_FILE``."""
        self._provider = provider
        self._approval_mode = approval_mode
        self._env_file = env_file
        settings = workspace.settings
        self.cwd = workspace.cwd
        self.project_root = workspace.project_root
        self.session_id = session_id
        self.transcript_path = transcript_path
        self.environ = workspace.environment
        self.hooks = self._hook_runner(settings.hooks, disabled=settings.disable_all_hooks)
        self._trust_at_start = self._project_trust()

    def _hook_runner(self, hooks: HooksSettings, *, disabled: bool) -> HookRunner:
        return HookRunner(
            hooks,
            cwd=self.cwd,
            session_id=self.session_id,
            transcript_path=self.transcript_path,
            disabled=disabled,
            environ=self.environ,
            provider=self._provider,
            approval_mode=self._approval_mode,
            rule_test=self._rule_covers,
            env_file=self._env_file,
        )

    def _rule_covers(self, rule: str, tool: str, arguments: Mapping[str, Any]) -> bool:
        """Does the permission rule ``rule`` cover this call (a hook's ``if``)?"""
        from cairn.tools.permissions import PermissionRule

        return PermissionRule.parse(rule).matches(tool, arguments, self.cwd)

    async def changed(
        self, scheduler: ToolScheduler, what: str, approval: str, sink: EventSink
    ) -> None:
        """A tool call run by ``scheduler`` changed ``what`` (approved by ``approval``)."""
        if approval != "user":
            await sink(Notice("warning", _sentence(SETTINGS_KEPT_NOTICE, what), "permissions"))
            return
        trust = await asyncio.to_thread(self._keep_trust)
        if trust is not None and not trust.trusted:
            await sink(Notice("warning", trust.notice, "permissions"))
        try:
            loaded = await asyncio.to_thread(load_settings, self.cwd)
        except SettingsError as exc:
            text = f"{_sentence(SETTINGS_KEPT_NOTICE, what)} It cannot be used: {exc}"
            await sink(Notice("error", text, "permissions"))
            return
        new = loaded.settings
        self.hooks = self._hook_runner(new.hooks, disabled=new.disable_all_hooks)
        scheduler.follow_settings(PermissionRules.from_settings(new.permissions), self.hooks)
        await sink(Notice("info", _sentence(SETTINGS_APPLIED_NOTICE, what), "permissions"))

    def _project_trust(self) -> ProjectTrust | None:
        try:
            return project_trust(self.project_root)
        except OSError as exc:
            _log.warning(f"trusted folders unreadable: {exc}")
            return None

    def _keep_trust(self) -> ProjectTrust | None:
        """A trusted folder stays trusted with the commands the user just approved (trusted
        folders: config/trust.py); None when trust cannot be recorded."""
        if self._trust_at_start is None:
            return None
        try:
            return keep_trust_after_approved_change(self.project_root, self._trust_at_start)
        except TrustFileError as exc:
            _log.warning(str(exc))
            return None


def _sentence(template: str, what: str) -> str:
    text = template.format(what=what)
    return text[0].upper() + text[1:]
