"""Importing the ACP SDK without its largest avoidable start-up cost.

``import acp`` always runs the package's ``__init__``, which imports every one of its ~270
pydantic models (``acp.schema``), so importing only the submodules cairn needs saves nothing.
Those models set ``use_attribute_docstrings``: at class creation pydantic re-reads the source
of each class to copy attribute docstrings into field descriptions, which only matter for
generating JSON Schema (never done here) and take about 40% of the import. While the SDK is
imported, that step is skipped; validation and serialisation are unchanged. The models are also
created with ``defer_build`` (pydantic's own option): each builds its validator and serialiser
the first time it is used instead of at import, so a start that answers ``initialize`` and
``session/new`` builds the few models those use, not all of them. If pydantic moves either
private hook, the SDK is imported the ordinary way (slower, never broken).
See benchmarks/README.md (``## cairn --acp``) for the figures.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["import_sdk"]

_FIELDS_MODULE = "pydantic._internal._fields"
_DOCSTRING_HOOK = "_update_fields_from_docstrings"
_CONFIG_MODULE = "pydantic._internal._config"
_CONFIG_DEFAULTS = "config_defaults"  # the configuration a model gets for what it leaves unset


def import_sdk() -> None:
    """Import ``acp`` (once per process)."""
    if "acp" in sys.modules:
        return
    with _field_docstrings_skipped(), _builds_deferred():
        importlib.import_module("acp")


@contextlib.contextmanager
def _builds_deferred() -> Iterator[None]:
    try:
        config = importlib.import_module(_CONFIG_MODULE)
    except ImportError:
        yield
        return
    defaults = getattr(config, _CONFIG_DEFAULTS, None)
    if not isinstance(defaults, dict) or "defer_build" not in defaults:
        yield
        return
    original = defaults["defer_build"]
    defaults["defer_build"] = True
    try:
        yield
    finally:
        defaults["defer_build"] = original



@contextlib.contextmanager
def _field_docstrings_skipped() -> Iterator[None]:
    try:
        fields = importlib.import_module(_FIELDS_MODULE)
    except ImportError:
        yield
        return
    original = getattr(fields, _DOCSTRING_HOOK, None)
    if not callable(original):
        yield
        return

    def skip(*_args: Any, **_kwargs: Any) -> None:
        return None

    setattr(fields, _DOCSTRING_HOOK, skip)
    try:
        yield
    finally:
        setattr(fields, _DOCSTRING_HOOK, original)
