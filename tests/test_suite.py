"""How the suite itself runs (tests/conftest.py): property tests scaled to the run, PostgreSQL
tests in one xdist group, and CI running every property test's full example count."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .conftest import (
    POSTGRES_GROUP,
    QUICK_LOOP,
    _fewer_examples,
    local_examples,
    pytest_xdist_auto_num_workers,
)

ROOT = Path(__file__).resolve().parents[1]


def test_the_dev_profile_runs_a_tenth_of_a_property_tests_examples() -> None:
    seen: list[int] = []

    @settings(max_examples=200, database=None)
    @given(st.integers())
    def property_test(number: int) -> None:
        seen.append(number)

    _fewer_examples(property_test, set())
    property_test()

    assert local_examples(200) == 20
    assert 0 < len(seen) <= 20  # 200 if Hypothesis ignored the scaled settings


def test_a_property_test_with_few_examples_keeps_a_minimum() -> None:
    assert local_examples(30) == 10
    assert local_examples(150) == 15
    assert local_examples(5) == 5


def test_ci_runs_every_property_test_with_its_own_example_count() -> None:
    """`.ci/run` chooses the ci profile before the README's test command, its last line."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line.split("#")[0].strip() for line in lines]
    assert "export HYPOTHESIS_PROFILE=ci" in commands[:-1]


def test_every_test_of_the_postgresql_server_is_in_its_xdist_group(
    request: pytest.FixtureRequest,
) -> None:
    users = [i for i in request.session.items if "postgres_server" in i.fixturenames]
    if not users:
        pytest.skip("no test of the PostgreSQL server was collected in this run")
    groups = {i.nodeid: [m.args for m in i.iter_markers("xdist_group")] for i in users}
    assert all(found == [(POSTGRES_GROUP,)] for found in groups.values()), groups


def test_the_quick_loop_and_the_whole_suite_run_two_workers_a_core(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    cores = os.cpu_count() or 1
    for expression in (QUICK_LOOP, ""):
        monkeypatch.setattr(request.config.option, "markexpr", expression)
        assert pytest_xdist_auto_num_workers(request.config) == 2 * cores
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "3")
    assert pytest_xdist_auto_num_workers(request.config) == 3
