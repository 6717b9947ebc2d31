"""A plain ``cairn -p`` defines its value classes as :class:`cairn.values.Value`, not dataclasses.

A frozen dataclass compiles its methods when its class is created, about 3.4 M instructions each
in Python 3.11: the hundred that ``cairn -p`` used to define were a seventh of its start-up
(benchmarks/README.md). Only *which* classes are dataclasses is checked, never a time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.testing import ScriptedServer, reply

from .conftest import run_probed

pytestmark = pytest.mark.slow

# Dataclasses a plain run still defines (none: issue 32 made the last two a Value and a plain
# class).
STILL_DATACLASSES: set[str] = set()

PROBE = (
    "import atexit, dataclasses, json, sys\n"
    "def dataclasses_defined():\n"
    "    found = []\n"
    "    for name, module in list(sys.modules.items()):\n"
    "        if name.split('.')[0] != 'cairn':\n"
    "            continue\n"
    "        for value in list(vars(module).values()):\n"
    "            if isinstance(value, type) and dataclasses.is_dataclass(value) and \\\n"
    "                    value.__module__ == name:\n"
    "                found.append(f'{name}.{value.__qualname__}')\n"
    "    return sorted(set(found))\n"
    "atexit.register(lambda: sys.stderr.write("
    "'DATACLASSES ' + json.dumps(dataclasses_defined()) + '\\n'))\n"
    "from cairn.cli.main import main\n"
    "sys.argv = ['cairn', '-p', 'hi']\n"
    "main()\n"
)


def test_a_plain_run_defines_no_dataclass(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    scripted_server.enqueue(reply("plain"))

    done = run_probed(PROBE, project, cairn_env)

    assert done.stdout == "plain\n"
    line = next(x for x in done.stderr.splitlines() if x.startswith("DATACLASSES "))
    defined = set(json.loads(line.removeprefix("DATACLASSES ")))
    assert defined == STILL_DATACLASSES, (
        "a class on the start path became (or stopped being) a dataclass: make it a "
        "cairn.values.Value (see docs/architecture.md), or update STILL_DATACLASSES with why"
    )
