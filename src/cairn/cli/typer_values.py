"""typer's value checks, built only for a value they could change.

typer checks each parameter's value with a pydantic ``TypeAdapter`` that it builds the first time
the parameter is processed: every option of the root command and of the command run, given or
not (an option not given has the value ``None``, which typer then passes on as it is without
consulting the adapter). Importing pydantic and building those adapters was about half the CPU of
a ``cairn memory path`` or ``cairn trust --list`` (benchmarks/README.md, issue #25).

:func:`check_values_on_use` has typer build each check when a value needs it. Until then the
values that typer's checks pass unchanged pass as they are: ``None``, a ``str`` for a plain ``str``
parameter, a member of the ``Enum`` a parameter is typed with (such as an option's default).
Any other value is checked by typer's own adapter, built then, so a bad value gets typer's usual
error. If typer's internals are not as expected, nothing is changed (typer runs as it is).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = ["check_values_on_use"]


def check_values_on_use() -> None:
    """Make typer build a parameter's value check only when a value needs it (module docstring).
    Idempotent."""
    try:
        from typer import core
        from typer._coercion import RuntimeParam
    except ImportError:
        return
    found = getattr(core, "build_runtime_param", None)
    if not callable(found) or getattr(found, "cairn_on_use", False):
        return
    build: Callable[[Any], Any] = found

    @dataclass(frozen=True)
    class CheckedOnUse(RuntimeParam):
        """Passes the values typer's check would pass unchanged; builds the check for others."""

        descriptor: Any = None

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if _unchanged(self.descriptor, value):
                return value
            real = self.__dict__.get("_real")
            if real is None:
                real = build(self.descriptor)
                object.__setattr__(self, "_real", real)
            return real._coerce_value(value, param=param, ctx=ctx)

    def on_use(descriptor: Any) -> Any:
        return CheckedOnUse(
            parameter_info=descriptor.parameter_info,
            annotation=descriptor.annotation,
            descriptor=descriptor,
        )

    on_use.cairn_on_use = True  # type: ignore[attr-defined]
    core.build_runtime_param = on_use


def _unchanged(descriptor: Any, value: Any) -> bool:
    """Whether typer's check of ``descriptor``'s parameter returns ``value`` itself: a plain
    ``str`` parameter given a ``str``, an ``Enum`` parameter given one of its members (typer's
    choice check returns a member as it is)."""
    if getattr(descriptor, "file_annotation", None) is not None:
        return False
    if getattr(descriptor.parameter_info, "parser", None) is not None:
        return False
    annotation = descriptor.annotation
    if annotation is str:
        return type(value) is str
    return (
        isinstance(annotation, type) and issubclass(annotation, Enum) and type(value) is annotation
    )
