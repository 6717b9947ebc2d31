"""Importing the ACP SDK without its largest avoidable start-up cost.

``import acp`` always runs the package's ``__init__``, which imports every one of its ~270
pydantic models (``acp.schema``), so importing only the submodules cairn needs saves nothing.
Those models set ``use_attribute_docstrings``: at class creation pydantic re-reads the source
of each class to copy attribute docstrings into field descriptions, which only matter for
generating JSON Schema (never done here) and take about 40% of the import. While the SDK is
imported, that step is skipped; validation and serialisation are unchanged. The models are also
created with ``defer_build`` (pydantic's own option): each builds its validator and serialiser
the first time it is used instead of at import, so a start that answers ``initialize`` and
``session/new`` builds the few models those use, not all of them; so does each of the SDK's
module-level type adapters. The models' annotations are strings (``from __future__ import
annotations``) that pydantic evaluates one by one, 765 of them but only ~250 different
(``field_meta``'s alone is repeated in most classes): while the SDK is imported, an annotation
of ``acp.schema`` already evaluated is reused, unless the class it is read for defines one of
the names it mentions (then it is evaluated as usual). If pydantic moves any of these private
hooks, the SDK is imported the ordinary way (slower, never broken).
See benchmarks/README.md (``## cairn --acp``) for the figures.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["import_sdk"]

_FIELDS_MODULE = "pydantic._internal._fields"
_DOCSTRING_HOOK = "_update_fields_from_docstrings"
_CONFIG_MODULE = "pydantic._internal._config"
_CONFIG_DEFAULTS = "config_defaults"  # the configuration a model gets for what it leaves unset
_ADAPTER_MODULE = "pydantic.type_adapter"
_ADAPTER_CLASS = "TypeAdapter"
_TYPING_MODULE = "pydantic._internal._typing_extra"
_EVAL_HOOK = "try_eval_type"  # evaluates one annotation: (value, evaluated?)
_SCHEMA_MODULE = "acp.schema"  # the generated models whose annotations repeat
_QUOTED = re.compile(r"\"[^\"]*\"|'[^']*'")  # string literals in an annotation (aliases)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def import_sdk() -> None:
    """Import ``acp`` (once per process)."""
    if "acp" in sys.modules:
        return
    with (
        _field_docstrings_skipped(),
        _builds_deferred(),
        _adapters_deferred(),
        _annotations_reused(),
    ):
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
def _adapters_deferred() -> Iterator[None]:
    """``TypeAdapter(union)`` at module level (two in the SDK, for elicitations) builds its
    validator when first used, like the models (``defer_build`` is a TypeAdapter option too)."""
    try:
        adapter = getattr(importlib.import_module(_ADAPTER_MODULE), _ADAPTER_CLASS)
    except (ImportError, AttributeError):
        yield
        return
    original = adapter.__init__

    def init(self: Any, type_: Any, *args: Any, config: Any = None, **kwargs: Any) -> None:
        if config is None and not isinstance(type_, type):  # a class may carry its own config
            config = {"defer_build": True}
        original(self, type_, *args, config=config, **kwargs)

    adapter.__init__ = init
    try:
        yield
    finally:
        adapter.__init__ = original


@contextlib.contextmanager
def _annotations_reused() -> Iterator[None]:
    try:
        typing_extra = importlib.import_module(_TYPING_MODULE)
    except ImportError:
        yield
        return
    original = getattr(typing_extra, _EVAL_HOOK, None)
    if not callable(original):
        yield
        return
    known: dict[tuple[str, int], Any] = {}

    def evaluate(value: Any, globalns: Any = None, localns: Any = None) -> tuple[Any, bool]:
        if (
            not isinstance(value, str)
            or not isinstance(globalns, dict)
            or globalns.get("__name__") != _SCHEMA_MODULE
        ):
            return original(value, globalns, localns)
        if _shadowed(_names(value), localns):
            return original(value, globalns, localns)
        key = (value, id(globalns))
        if key in known:
            return known[key], True
        evaluated, ok = original(value, globalns, localns)
        if ok:  # a name not defined yet is not remembered: it is evaluated again later
            known[key] = evaluated
        return evaluated, ok

    setattr(typing_extra, _EVAL_HOOK, evaluate)
    try:
        yield
    finally:
        setattr(typing_extra, _EVAL_HOOK, original)


@functools.cache
def _names(annotation: str) -> frozenset[str]:
    """The identifiers an annotation mentions (not the text of its string literals)."""
    return frozenset(_NAME.findall(_QUOTED.sub("", annotation)))


def _shadowed(names: frozenset[str], localns: Any) -> bool:
    """Whether the class being read (or its parents' locals) defines one of ``names``."""
    if localns is None:
        return False
    # pydantic's lazy namespace holds the mappings it would merge; reading them needs no merge
    layers = getattr(localns, "_namespaces", None)
    if not isinstance(layers, tuple):
        return any(name in localns for name in names)
    return any(name in layer for layer in layers for name in names)


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
