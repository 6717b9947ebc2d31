"""What running a hook under the subreaper costs (issue 24): ``true`` as a hook, both ways, and
as an unsandboxed ``run_shell_command`` (which runs under it too since a timed-out command's
``setsid`` children were found running on).

Usage: python benchmarks/hook_process_bench.py [--runs 40]

- reaped: :func:`cairn.hooks.process.run_command` as hooks run now, ``bash -c true`` under
  ``python -I -S reaper.py`` (which keeps ``setsid`` children in reach);
- direct: ``bash -c true`` started the way hooks were before, as the leader of its own group;
- shell: :class:`cairn.tools.shell.ShellTool` running ``true`` outside the sandbox, as now.

Interleaved, ``--runs`` of each; medians of the wall time and of the CPU time of the children
(user + system of the processes waited for).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from cairn.hooks.process import run_command

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


async def _reaped() -> None:
    result = await run_command("true", stdin=b"{}", cwd=Path.cwd(), env=ENV, timeout=30)
    assert result.exit_code == 0, result


async def _direct() -> None:
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", "true", env=ENV, start_new_session=True,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    await process.communicate(b"{}")
    assert process.returncode == 0


async def _shell() -> None:
    from cairn.abort import AbortController
    from cairn.tools.base import ToolContext
    from cairn.tools.shell import ShellTool

    ctx = ToolContext(workspace=Path.cwd(), abort=AbortController().signal, environment=ENV)
    result = await ShellTool().execute({"command": "true"}, ctx)
    assert result.error is None, result


async def _measure(run: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    await run()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall * 1000, cpu * 1000


async def main(runs: int) -> None:
    timings: dict[str, list[tuple[float, float]]] = {"direct": [], "reaped": [], "shell": []}
    for _ in range(runs):
        timings["direct"].append(await _measure(_direct))
        timings["reaped"].append(await _measure(_reaped))
        timings["shell"].append(await _measure(_shell))
    print(f"hook `true`, {runs} runs each, interleaved (medians); load {os.getloadavg()[0]:.1f}")
    print("| how | wall time | CPU time |")
    print("|---|---|---|")
    for name, values in timings.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        print(f"| {name} | {wall:.1f} ms | {cpu:.1f} ms |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    asyncio.run(main(parser.parse_args().runs))
