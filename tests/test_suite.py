"""How the suite itself runs (tests/conftest.py): property tests scaled to the run, PostgreSQL
tests in one xdist group, and CI running every property test's full example count."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .conftest import (
    MATRIX_SHARE,
    POSTGRES_GROUP,
    QUICK_LOOP,
    _fewer_examples,
    local_examples,
    matrix_left_out,
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


class _Case:
    """What ``matrix_left_out`` reads of a collected test case."""

    def __init__(self, test: str, index: int, *, matrix: bool = True) -> None:
        self.path = ROOT / "tests" / "test_x.py"
        self.originalname, self.name = test, f"{test}[{index}]"
        self.matrix = matrix

    def get_closest_marker(self, name: str) -> object:
        return pytest.mark.matrix if name == "matrix" and self.matrix else None


def test_the_dev_profile_runs_every_tenth_case_of_a_matrix_a_different_tenth_each_day() -> None:
    cases = [_Case(test, index) for test in ("test_a", "test_b") for index in range(25)]
    plain = [_Case("test_plain", index, matrix=False) for index in range(25)]

    runs = {}
    for tenth in range(MATRIX_SHARE):
        left_out = matrix_left_out([*cases, *plain], tenth)  # type: ignore[list-item]
        runs[tenth] = [case.name for case in cases if case not in left_out]
        assert not set(left_out) & set(plain)
    assert runs[3] == [
        "test_a[3]",
        "test_a[13]",
        "test_a[23]",
        "test_b[3]",
        "test_b[13]",
        "test_b[23]",
    ]
    every = [name for run in runs.values() for name in run]
    assert sorted(every) == sorted(case.name for case in cases)  # each case once in ten days


def test_a_matrix_case_named_on_the_command_line_always_runs() -> None:
    cases = [_Case("test_a", index) for index in range(20)]
    left_out = matrix_left_out(cases, 0, {"test_a[7]"})  # type: ignore[arg-type]
    assert {case.name for case in cases} - {case.name for case in left_out} == {
        "test_a[0]",
        "test_a[7]",
        "test_a[10]",
    }


def test_the_large_generated_matrices_are_marked_and_ci_runs_them_whole(
    request: pytest.FixtureRequest,
) -> None:
    """The settings files recorded from the pydantic models, every spelling of every key."""
    from .config import test_sections, test_trust_spellings

    for test in (
        test_sections.test_a_settings_file_reads_as_the_pydantic_models_read_it,
        test_trust_spellings.test_every_spelling_of_a_key_is_allowlisted_or_needs_trust,
        test_trust_spellings.test_a_section_written_in_short_is_decided_like_its_keys,
    ):
        assert "matrix" in {mark.name for mark in test.pytestmark}, test.__name__
    if os.environ.get("HYPOTHESIS_PROFILE") == "ci":
        matrix = [i for i in request.session.items if i.get_closest_marker("matrix")]
        assert len(matrix) >= 2_400 or not matrix  # all of them when collected
