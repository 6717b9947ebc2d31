from __future__ import annotations

import subprocess
import sys

import pytest

import cairn.memory


@pytest.mark.parametrize("name", cairn.memory.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(cairn.memory, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = cairn.memory.Nope


def test_importing_one_submodule_does_not_load_the_store_or_the_selector() -> None:
    heavy = ("cairn.memory.store.memory_store", "cairn.memory.recall.selector")
    code = f"import sys, cairn.memory.document; print([m for m in {heavy!r} if m in sys.modules])"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_manager_loads_forget_and_the_task_records_on_first_use() -> None:
    later = (
        "cairn.memory.forget.selection",
        "cairn.memory.forget.trash",
        "cairn.memory.background.tasks",
        "cairn.memory.background.extract",
        "regex",
        "Stemmer",
    )
    code = f"import sys, cairn.memory.manager; print([m for m in {later!r} if m in sys.modules])"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
