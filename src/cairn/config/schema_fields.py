"""The two kinds of field the settings schema declares beside plain ones: a key ``/settings`` may
change without a restart (:func:`editable`), and a field holding a section whose default is made
without validation (:func:`section`). The sections themselves are :mod:`cairn.config.sections`'
``Section``; the schema is :mod:`cairn.config.settings` with its ``model`` section in
:mod:`cairn.config.model_settings` and ``tools``/``permissions`` in
:mod:`cairn.config.tool_settings`.
"""

from __future__ import annotations

from typing import Any

from cairn.config.sections import Field, Section

__all__ = ["editable", "section"]


def editable(**kwargs: Any) -> Any:
    """A field ``/settings`` may change without a restart."""
    return Field(json_schema_extra={"editable": True}, **kwargs)


def section(model: type[Section], description: str | None = None) -> Any:
    """A field holding a section, whose default is made without validation."""
    return Field(default_factory=model.defaults, description=description)
