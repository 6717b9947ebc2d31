"""Tombstones: what Forget leaves behind so a forgotten fact is never learned again."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from cairn.memory.forget.tombstones import (
    SESSION_REFUSAL,
    TOMBSTONES_FILE_NAME,
    ForgottenFacts,
    Statement,
    Tombstone,
    add_tombstones,
    lift_matching,
    read_tombstones,
    remove_tombstones,
    statement_terms,
    statements_of,
)
from cairn.memory.manager import MemoryManager

from ..memory_helpers import NOW, ScriptedModel, write_memory
from .forget_helpers import manager, root, selected_ids, write_legacy

__all__ = ["manager", "root"]  # fixtures

TABS = Statement(
    "Indent with tabs", "The user always indents code with tabs", "Indent with tabs, never spaces."
)


def memory_text(title: str, description: str, body: str) -> str:
    return f"---\nname: {title}\ndescription: {description}\ntype: feedback\n---\n\n{body}\n"


def tombstone(statement: Statement = TABS, *, id: str = "t1", trash: str = "") -> Tombstone:
    return Tombstone.of(
        statement, id=id, forgotten_at=NOW, scope="user", relative_path="feedback/tabs.md",
        query="the tabs rule", trash_id=trash,
    )  # fmt: skip


# --- comparing statements ---------------------------------------------------------------------


def test_terms_fold_case_plurals_and_common_words() -> None:
    assert statement_terms("The user INDENTS with Tabs") == {"user", "indent", "tab"}
    assert statement_terms("indentation") == statement_terms("indenting") == {"indent"}


def test_cjk_text_is_compared_by_character_pairs() -> None:
    assert {"缩进", "制表"} <= statement_terms("总是用制表符缩进")


def test_a_reworded_statement_of_the_same_fact_matches() -> None:
    again = Statement(
        "Tabs for indentation", "The user indents with tabs", "Always indent with tabs."
    )
    assert tombstone().matches(again)


def test_a_different_fact_on_the_same_subject_does_not_match() -> None:
    spaces = Statement("Indent with 2 spaces", "The user indents with two spaces", "Use 2 spaces.")
    unrelated = Statement("Deploy with make", "How billing is deployed", "Run make release.")
    assert not tombstone().matches(spaces)
    assert not tombstone().matches(unrelated)


def test_a_statement_by_the_user_restates_it_and_a_question_does_not() -> None:
    forgotten = tombstone()
    assert forgotten.restated_by("Actually, I do always indent with tabs. Keep that.")
    assert not forgotten.restated_by("Should I indent with tabs or spaces here?")
    assert not forgotten.restated_by("Now let's look at the parser.")


def test_the_fingerprint_ignores_word_order_and_case() -> None:
    shuffled = Statement("tabs WITH indent", "code user tabs indents always the", "never spaces")
    assert tombstone().fingerprint == tombstone(shuffled).fingerprint
    assert tombstone().fingerprint.startswith("v1:")


def test_a_tombstone_of_another_rule_version_never_matches() -> None:
    data = {**tombstone().to_json(), "termsVersion": 99}
    old = Tombstone.from_json(data)
    assert old is not None and not old.matches(TABS)


def test_each_entry_of_a_multi_entry_memory_is_a_statement() -> None:
    text = memory_text("Feedback", "collected", "# Feedback\n\n- Use uv\n- Indent with tabs\n")
    assert [s.summary for s in statements_of(text)] == ["Use uv", "Indent with tabs"]
    assert statements_of("not a memory") == []


@given(st.text(max_size=400))
def test_any_text_compares_without_an_exception(text: str) -> None:
    statement_terms(text)
    tombstone().restated_by(text)
    for statement in statements_of(text):
        tombstone().matches(statement)


# --- the file --------------------------------------------------------------------------------


def test_tombstones_round_trip_through_their_file(tmp_path: Path) -> None:
    add_tombstones(tmp_path, [tombstone(id="a"), tombstone(id="b")])
    assert [t.id for t in read_tombstones(tmp_path)] == ["a", "b"]
    [line, _] = (tmp_path / TOMBSTONES_FILE_NAME).read_text().splitlines()
    assert json.loads(line)["title"] == "Indent with tabs"
    assert read_tombstones(tmp_path)[0] == tombstone(id="a")

    assert [t.id for t in remove_tombstones(tmp_path, ["a", "missing"])] == ["a"]
    assert [t.id for t in read_tombstones(tmp_path)] == ["b"]
    remove_tombstones(tmp_path, ["b"])
    assert not (tmp_path / TOMBSTONES_FILE_NAME).exists()


def test_a_damaged_line_is_skipped_and_the_rest_is_read(tmp_path: Path) -> None:
    add_tombstones(tmp_path, [tombstone(id="a")])
    with (tmp_path / TOMBSTONES_FILE_NAME).open("ab") as handle:
        handle.write(b"{not json\n\xff\xfe\n[]\n")
    add_tombstones(tmp_path, [tombstone(id="b")])
    assert [t.id for t in read_tombstones(tmp_path)] == ["a", "b"]


def test_a_tombstone_file_that_is_not_a_regular_file_is_never_opened(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / TOMBSTONES_FILE_NAME)
    assert read_tombstones(tmp_path) == []  # a FIFO would block the read forever


# --- one memory-agent run ----------------------------------------------------------------------


def test_a_write_stating_a_forgotten_fact_is_refused(tmp_path: Path) -> None:
    add_tombstones(tmp_path, [tombstone()])
    facts = ForgottenFacts.load([tmp_path])
    again = memory_text("Tabs please", "The user indents with tabs", "Always indent with tabs.")
    refusal = facts.refusal(again, None)
    assert refusal is not None and "forget" in refusal and "Indent with tabs" in refusal
    assert facts.refusal(memory_text("Use uv", "uv not pip", "Install with uv."), None) is None


def test_an_edit_of_a_memory_that_already_stated_the_fact_is_not_refused(tmp_path: Path) -> None:
    """A user who wrote the fact back by hand keeps it: editing that file is not re-learning."""
    add_tombstones(tmp_path, [tombstone()])
    facts = ForgottenFacts.load([tmp_path])
    before = memory_text("Indent with tabs", "The user indents with tabs", "Indent with tabs.")
    after = before.replace("Indent with tabs.", "Indent with tabs.\n\nWhy: house style.")
    assert facts.refusal(after, before) is None


def test_a_fact_restated_in_a_new_message_may_be_saved_and_its_tombstone_goes(
    tmp_path: Path,
) -> None:
    add_tombstones(tmp_path, [tombstone(id="a")])
    facts = ForgottenFacts.load([tmp_path], new_messages=["I really do always indent with tabs."])
    again = memory_text("Tabs", "The user indents with tabs", "Always indent with tabs.")

    assert facts.refusal(again, None) is None
    assert facts.prompt_block() == ""  # nothing is forbidden any more in this run
    assert [t.id for t in facts.release()] == ["a"]
    assert read_tombstones(tmp_path) == []


def test_a_restated_fact_that_was_not_saved_keeps_its_tombstone(tmp_path: Path) -> None:
    add_tombstones(tmp_path, [tombstone(id="a")])
    facts = ForgottenFacts.load([tmp_path], new_messages=["I always indent with tabs."])
    assert facts.refusal(memory_text("Use uv", "uv not pip", "Install with uv."), None) is None
    assert facts.release() == []
    assert [t.id for t in read_tombstones(tmp_path)] == ["a"]


def test_only_a_message_written_after_the_forget_restates_its_fact(tmp_path: Path) -> None:
    """The session's own agent: what the user said before the forget (still in the model's
    window) does not bring the fact back; the same words after it do."""
    add_tombstones(tmp_path, [tombstone(id="a")])
    again = memory_text("Tabs", "The user indents with tabs", "Always indent with tabs.")
    before = [(NOW - 60, "I always indent with tabs."), (NOW + 60, "Now the parser.")]

    refused = ForgottenFacts.load([tmp_path], said=before, refusal_text=SESSION_REFUSAL)
    assert refused.refusal(again, None) == (
        "the user asked to forget this on 2025-06-15 ('Indent with tabs'); ask them first. It "
        "may be saved once the user states it again in a message, or asks for it with /remember."
    )
    assert refused.release() == []

    after = ForgottenFacts.load([tmp_path], said=[(NOW + 60, "I always indent with tabs.")])
    assert after.refusal(again, None) is None
    assert [t.id for t in after.release()] == ["a"]


def test_the_prompt_lists_the_forgotten_facts(tmp_path: Path) -> None:
    add_tombstones(tmp_path, [tombstone()])
    block = ForgottenFacts.load([tmp_path]).prompt_block()
    assert block.startswith("## Forgotten at the user's request")
    assert "- Indent with tabs: Indent with tabs, never spaces. (forgotten 2025-06-15)" in block


def test_the_users_own_word_lifts_a_matching_tombstone(tmp_path: Path) -> None:
    add_tombstones(tmp_path, [tombstone(id="a"), tombstone(Statement("Use uv", "", "uv"), id="b")])
    text = memory_text("Indent with tabs", "The user indents with tabs", "Always use tabs.")
    assert [t.id for t in lift_matching([tmp_path], text)] == ["a"]
    assert [t.id for t in read_tombstones(tmp_path)] == ["b"]


# --- Forget and restore --------------------------------------------------------------------------


async def test_forget_leaves_a_tombstone_per_entry_and_restore_removes_them(
    manager: MemoryManager, root: Path
) -> None:
    write_memory(root, "tabs", title="Indent with tabs", description="The user indents with tabs")
    write_legacy(root)
    plan = await manager.select_forget(
        "x",
        provider=ScriptedModel(selected_ids(["project:project/tabs.md", "project:feedback.md:1"])),
    )
    report = manager.apply_forget(plan, session_id="s1")
    assert report.ok

    found = read_tombstones(root)
    assert [(t.title, t.summary, t.relative_path) for t in found] == [
        ("Indent with tabs", "The user indents with tabs", "project/tabs.md"),
        ("Feedback", "Prefer pytest over unittest", "feedback.md"),
    ]
    assert {t.query for t in found} == {"x"} and {t.session_id for t in found} == {"s1"}
    assert {t.trash_id for t in found} == {report.trash[0].name}

    assert manager.restore_last_forget().ok
    assert read_tombstones(root) == []


async def test_a_dream_deletion_leaves_no_tombstone(manager: MemoryManager, root: Path) -> None:
    from cairn.memory.forget.trash import trash_files

    write_memory(root, "dupe", title="Duplicate")
    assert trash_files(root, "project", ["project/dupe.md"], operation="dream", now=NOW)
    assert read_tombstones(root) == []
