"""Settings, paths and context files.

The public names are loaded on first use: a module that needs only ``cairn.config.paths`` (the
checkpoint preparer, a memory worker) does not load the settings' pydantic models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
    from cairn.config.context_files import (
        ContextFile,
        collect_context_files,
        render_context_files,
    )
    from cairn.config.file_stamps import Inputs, StampedCache
    from cairn.config.loader import (
        Endpoint,
        LoadedSettings,
        NoAuthError,
        SettingsError,
        load_settings,
        resolve_endpoint,
    )
    from cairn.config.sections import Field, Section, ValidationError
    from cairn.config.settings import APPROVAL_MODES, ApprovalMode, Settings

__all__ = [
    "APPROVAL_MODES",
    "ApprovalMode",
    "ContextFile",
    "Endpoint",
    "Field",
    "Inputs",
    "LoadedSettings",
    "NoAuthError",
    "Section",
    "Settings",
    "SettingsError",
    "StampedCache",
    "ValidationError",
    "collect_context_files",
    "load_settings",
    "render_context_files",
    "resolve_endpoint",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ContextFile": "context_files",
        "collect_context_files": "context_files",
        "render_context_files": "context_files",
        "Inputs": "file_stamps",
        "StampedCache": "file_stamps",
        "Endpoint": "loader",
        "LoadedSettings": "loader",
        "NoAuthError": "loader",
        "SettingsError": "loader",
        "load_settings": "loader",
        "resolve_endpoint": "loader",
        "Field": "sections",
        "Section": "sections",
        "ValidationError": "sections",
        "APPROVAL_MODES": "settings",
        "ApprovalMode": "settings",
        "Settings": "settings",
    },
    __all__,
)
