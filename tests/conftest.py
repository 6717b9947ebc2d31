"""How the suite runs: in parallel, with compiled bytecode kept, and hypothesis scaled to the run.

The scripted-server fixtures come from the `cairn` pytest plugin (cairn.testing.fixtures),
registered by the package entry point, as they are for users who install cairn.

- **Slow tests.** Every test in ``tests/e2e/`` (real ``cairn`` processes) is marked ``slow``, as
  is every test that uses the PostgreSQL server (``postgres_server``: a real server, started
  once a worker) and any other test that takes more than a few seconds; ``-m "not slow"`` is
  the quick loop.
  Slow tests run first (the longest, those with a ``timeout`` mark above the default, first of
  all), so that the workers end the run together on quick ones.
- **Parallel.** ``-n auto --dist loadgroup`` (pyproject.toml) runs the tests in pytest-xdist
  workers, twice as many as the machine has cores: most tests wait on the processes, shells,
  git and screens they drive. The quick loop too: with one worker a core it took 189 s on two
  cores against 121 s with two (benchmarks/README.md, issue #25), each worker's ~5 s of start
  and collection notwithstanding.
  ``PYTEST_XDIST_AUTO_NUM_WORKERS`` (or ``-n N``) sets the number; ``-n 0`` runs in one process.
  Tests marked ``xdist_group(name)`` run in one worker, one after another; every test that uses
  the PostgreSQL server is put in the group ``postgres``, so a run starts one cluster.
  ``tests/batched_xdist.py`` keeps that meaning but hands the other tests out in chunks and has
  each worker send a test's reports in one message (xdist's own ``loadgroup`` spent most of a
  cheap test's CPU on one round trip and six messages a test), and anyio's pytest plugin, which
  no test uses, is off (``-p no:anyio``: it wraps every fixture and test call).
- **Bytecode.** Where ``PYTHONDONTWRITEBYTECODE`` is set (as in some containers), every cairn
  process the tests start would compile cairn again (a third of a short ``cairn -p``'s CPU) and
  every worker would rewrite every test module; the suite writes the caches anyway
  (``__pycache__`` folders, ignored by git).
- **Garbage collection.** Once a worker has collected, what it built (every test module, cairn,
  its libraries: a quarter of a million objects) is frozen out of the collector
  (``gc.freeze``), which would otherwise walk all of it on each full collection, and Textual's
  render cache, which keeps the last 1,024 widgets' rendered lines of every app a process ran
  (an ``lru_cache`` on a method), is emptied after each test: in the terminal UI's tests the
  collector walked them for a fifth of their CPU time.
- **Hypothesis.** No per-example deadline (speed is measured in benchmarks, never asserted in
  tests: a loaded machine made deadline-bound property tests fail at random). Profile ``ci``
  runs every property test's own example count; ``dev``, the default outside CI, runs a tenth of
  it (at least 10) for a quick local loop. ``HYPOTHESIS_PROFILE`` chooses (``.ci/run`` sets
  ``ci``); without it, a ``CI`` variable selects ``ci``.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # for the processes the tests start
sys.dont_write_bytecode = False  # for this one: pytest's rewritten test modules, cairn's own

pytest_plugins = ["tests.batched_xdist"]  # how xdist hands out the tests and reports them

E2E = Path(__file__).parent / "e2e"  # real processes: every test there is slow
QUICK_LOOP = "not slow"  # the mark expression of the quick loop (README)
WORKERS_PER_CORE = 2
POSTGRES_GROUP = "postgres"
LOCAL_EXAMPLES_DIVISOR = 10  # the dev profile runs this fraction of each test's examples
LOCAL_EXAMPLES_MINIMUM = 10

MATRIX_SHARE = 10  # the dev profile runs one case in this many of a test marked `matrix`
MATRIX_TENTH_VARIABLE = "CAIRN_MATRIX_TENTH"

settings.register_profile("ci", deadline=None)
settings.register_profile("dev", deadline=None)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
settings.load_profile(PROFILE)


def _matrix_tenth() -> int:
    """Today's tenth, or the one ``CAIRN_MATRIX_TENTH`` names; chosen once by the controller
    (which imports this first) and inherited by its workers, so they collect alike."""
    today = str(datetime.now(UTC).date().toordinal() % MATRIX_SHARE)
    chosen = os.environ.setdefault(MATRIX_TENTH_VARIABLE, today)
    if chosen not in {str(tenth) for tenth in range(MATRIX_SHARE)}:
        raise pytest.UsageError(f"{MATRIX_TENTH_VARIABLE} is 0 to 9, not {chosen!r}")
    return int(chosen)


MATRIX_TENTH = _matrix_tenth()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The quick loop (``-m "not slow"``) does not even import tests/e2e, all of it slow: every
    worker would collect it only to deselect it."""
    if config.option.markexpr == QUICK_LOOP and collection_path.is_relative_to(E2E):
        return True
    return None


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two workers a core, unless ``PYTEST_XDIST_AUTO_NUM_WORKERS`` says."""
    chosen = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if chosen:
        return int(chosen)
    return WORKERS_PER_CORE * (os.cpu_count() or 1)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    scaled: set[int] = set()
    for item in items:
        if item.path.is_relative_to(E2E):
            item.add_marker(pytest.mark.slow)
        if "postgres_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.xdist_group(POSTGRES_GROUP))
        if PROFILE == "dev":
            _fewer_examples(getattr(item, "obj", None), scaled)
    if PROFILE == "dev":
        named = {arg.rsplit("::", 1)[-1] for arg in config.args if "[" in arg}
        left_out = matrix_left_out(items, MATRIX_TENTH, named)
        if left_out:  # reported as deselected
            config.hook.pytest_deselected(items=left_out)
            dropped = set(map(id, left_out))
            items[:] = [item for item in items if id(item) not in dropped]
    default = float(config.getini("timeout") or 0)
    items.sort(key=lambda item: _run_order(item, default))


def matrix_left_out(
    items: list[pytest.Item], tenth: int, named: Collection[str] = ()
) -> list[pytest.Item]:
    """The cases of the tests marked ``matrix`` that the dev profile leaves out: all but every
    ``MATRIX_SHARE``-th case of each test, counted from ``tenth``, and never one in ``named``."""
    seen: dict[tuple[str, str], int] = {}
    left_out = []
    for item in items:
        if item.get_closest_marker("matrix") is None:
            continue
        test = (str(item.path), getattr(item, "originalname", item.name))
        position = seen[test] = seen.get(test, -1) + 1
        if position % MATRIX_SHARE != tenth and item.name not in named:
            left_out.append(item)
    return left_out


def _run_order(item: pytest.Item, default_timeout: float) -> tuple[bool, float]:
    """Slow tests first, and first among them those allowed more than the default timeout (the
    longest: the README's set-up, the PostgreSQL group), so the workers end together on quick
    tests; otherwise the collection order (the sort is stable)."""
    timeout = item.get_closest_marker("timeout")
    allowed = float(timeout.args[0]) if timeout and timeout.args else default_timeout
    return item.get_closest_marker("slow") is None, -max(allowed - default_timeout, 0)


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()  # what collection built lives as long as the process: never walk it again


def pytest_runtest_teardown(item: pytest.Item) -> None:
    _forget_textual_renders()


def _forget_textual_renders() -> None:
    """Empty Textual's cache keyed by its widgets' render caches (kept after their app ended);
    nothing if Textual is not imported or no longer has it."""
    styles_cache = sys.modules.get("textual._styles_cache")
    cached = getattr(getattr(styles_cache, "StylesCache", None), "get_inner_outer", None)
    getattr(cached, "cache_clear", lambda: None)()


def local_examples(count: int) -> int:
    """How many examples a property test asking for ``count`` runs under the dev profile."""
    return min(count, max(LOCAL_EXAMPLES_MINIMUM, count // LOCAL_EXAMPLES_DIVISOR))


def _fewer_examples(test: object, scaled: set[int]) -> None:
    """Give a property test the dev profile's share of its examples (once per function: the
    parameters of a parametrized test share it). Hypothesis keeps a test's settings where its
    own ``@seed`` decorator changes them; tests/test_suite.py checks that this works."""
    function = getattr(test, "__func__", test)  # a test method's function
    chosen = getattr(function, "_hypothesis_internal_use_settings", None)
    if not isinstance(chosen, settings) or id(function) in scaled:
        return
    scaled.add(id(function))
    fewer = local_examples(chosen.max_examples)
    if fewer < chosen.max_examples:
        function._hypothesis_internal_use_settings = settings(chosen, max_examples=fewer)
