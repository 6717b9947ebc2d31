"""Import the MCP SDK by its parts: only the modules a client (or a low-level server) uses.

``mcp/__init__.py`` imports the client, the servers and FastMCP, and ``mcp/server/__init__.py``
imports FastMCP with Starlette, uvicorn, pydantic-settings and rich, whatever is used: importing
``mcp.types`` pays for all of it. :func:`import_by_parts` registers both packages as modules whose
``__init__`` has not run; the SDK's own modules import each other by full name, so each still gets
what it imports. A name only the ``__init__`` defines (``from mcp import ClientSession``) runs it
on first use, so no import fails. ``jsonschema`` (the SDK validates tool input and output with
it) and ``httpx`` (the HTTP transports; the stdio session names one of its error codes) load on
first use of one of their names. Measured on ``cairn mcp list`` with one stdio server: 1.40 ->
0.84 s of CPU in cairn's process; the test server's start 1.40 -> 0.82 s
(benchmarks/README.md, issue #25).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from importlib.machinery import ModuleSpec
from typing import Any

__all__ = ["import_by_parts"]

_PACKAGES = ("mcp", "mcp.server")
_ON_FIRST_USE = ("jsonschema", "httpx")
_lock = threading.RLock()  # the SDK is loaded in a worker thread (mcp/connection.py)


def import_by_parts() -> None:
    """Before the first ``import mcp...``: from then on each import runs only what it needs.
    Does nothing for a package already imported (or not installed)."""
    with _lock:
        for name in _PACKAGES:
            spec = importlib.util.find_spec(name) if name not in sys.modules else None
            if spec is None or spec.loader is None:
                return
            package = importlib.util.module_from_spec(spec)
            package.__dict__["__getattr__"] = _init_on_first_use(package, spec)
            sys.modules[name] = package
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, package)
        for name in _ON_FIRST_USE:
            spec = importlib.util.find_spec(name) if name not in sys.modules else None
            if spec is not None:
                sys.modules[name] = _loaded_on_first_use(name, spec)


def _init_on_first_use(package: types.ModuleType, spec: ModuleSpec) -> Any:
    def package_attribute(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        submodule = f"{package.__name__}.{name}"
        try:  # a submodule (``from mcp import types``): import it, as the __init__ would
            return importlib.import_module(submodule)
        except ModuleNotFoundError as error:
            if error.name != submodule:
                raise
        with _lock:
            if "__getattr__" in package.__dict__:
                del package.__dict__["__getattr__"]
                assert spec.loader is not None
                spec.loader.exec_module(package)  # a name the __init__ defines: run it now
        return getattr(package, name)

    return package_attribute


def _loaded_on_first_use(name: str, spec: ModuleSpec) -> types.ModuleType:
    """A stand-in for module ``name`` that imports it when one of its names is first used.

    (``importlib.util.LazyLoader`` loads at the next ``import name`` already: the import system
    reads the module's ``__spec__``, which this stand-in has without loading.)"""
    stand_in = types.ModuleType(name)
    stand_in.__spec__ = spec

    def load(attribute: str) -> Any:
        with _lock:
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]
            module = importlib.import_module(name)
            stand_in.__dict__.update(module.__dict__)  # who imported the stand-in sees it all
        return getattr(module, attribute)

    stand_in.__dict__["__getattr__"] = load
    return stand_in
