"""Settings, paths and context files."""

from cairn.config.context_files import ContextFile, collect_context_files, render_context_files
from cairn.config.loader import (
    Endpoint,
    LoadedSettings,
    NoAuthError,
    SettingsError,
    load_settings,
    resolve_endpoint,
)
from cairn.config.settings import APPROVAL_MODES, ApprovalMode, Settings

__all__ = [
    "APPROVAL_MODES",
    "ApprovalMode",
    "ContextFile",
    "Endpoint",
    "LoadedSettings",
    "NoAuthError",
    "Settings",
    "SettingsError",
    "collect_context_files",
    "load_settings",
    "render_context_files",
    "resolve_endpoint",
]
