"""``cairn demo``: the scripted tour runs end to end, memory included, and ends with next steps."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from cairn.demo import run_demo

# The demo waits 30 s for Extract, a user's bound; here Extract must finish, however loaded the
# machine (the wait still ends as soon as it has), and the module's one demo run has its time.
LOADED_EXTRACT_WAIT = 120.0
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def demo_output(tmp_path_factory: pytest.TempPathFactory) -> str:
    home = tmp_path_factory.mktemp("cairn-home")
    cwd = tmp_path_factory.mktemp("somewhere")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CAIRN_HOME", str(home))
        # the scripted model on 127.0.0.1 is reached direct whatever proxy the user has set
        for variable in ("HTTP_PROXY", "http_proxy", "CAIRN_PROXY"):
            patch.setenv(variable, "http://127.0.0.1:1")  # nothing listens there
        for variable in ("NO_PROXY", "no_proxy"):
            patch.delenv(variable, raising=False)
        patch.chdir(cwd)
        out = io.StringIO()
        console = Console(file=out, width=200, color_system=None)
        assert run_demo(console=console, extract_wait=LOADED_EXTRACT_WAIT) == 0
    return out.getvalue()


def test_the_demo_extracts_a_memory_in_one_session_and_recalls_it_in_the_next(
    demo_output: str,
) -> None:
    """Memory at work is shown as the terminal UI shows it, when it happens: Recall before the
    turn's first tool call (it printed a line after the answer, from the requests it read)."""
    saved = demo_output.index("◆ Saved to memory (Extract): Tests use pytest")
    assert "feedback/testing-with-pytest.md" in demo_output[saved:].splitlines()[0]
    step_4 = demo_output.index("4. A new session remembers")
    recalled = demo_output.index("◆ Recalled 1 memory: Tests use pytest")
    write = demo_output.index("⚙ Write test_greet.py")
    answer = demo_output.index("Wrote `test_greet.py` with two pytest tests")
    assert saved < step_4 < recalled < write < answer
    assert "(nothing)" not in demo_output


def test_the_demo_asks_before_an_edit_and_a_command_as_the_ui_does(demo_output: str) -> None:
    """Regression: the demo ran in yolo mode, so a newcomer never saw an approval."""
    edit = demo_output.index("Allow this edit?")
    command = demo_output.index("Allow this command?")
    assert edit < command
    dialog = demo_output[edit:command]
    assert "Edit greet.py" in dialog
    assert "+def farewell(name: str) -> str:" in dialog  # the diff, as in the UI's dialog
    for choice in ("1. Allow once", "2. Allow always (this session)", "3. Reject"):
        assert choice in dialog
    assert "you › 1 (Allow once)" in dialog
    assert "print(greet.farewell" in demo_output[command:]


def test_the_demo_ends_with_what_to_do_next(demo_output: str) -> None:
    """Regression: it ended with model-request counts by purpose and no next step."""
    ending = demo_output[demo_output.index("What next") :]
    assert "X-Cairn-Purpose" not in demo_output
    assert "requests" not in ending
    assert "export OPENAI_BASE_URL=" in ending
    assert "OPENAI_API_KEY=" in ending and "OPENAI_MODEL=" in ending
    assert "cd your-project && cairn\n" in ending  # the terminal UI
    assert 'cairn "what does this project do?"' in ending  # the UI with a first prompt
    assert "`cairn memory list` shows them" in ending


def test_the_ending_names_the_real_memory_folders_not_the_demos(demo_output: str) -> None:
    ending = demo_output[demo_output.index("What next") :]
    home = Path(ending.split("yours, in every project:", 1)[1].split()[0])
    project = Path(ending.split("each project's:", 1)[1].split()[0])

    assert home.name == "memories" and home.parent.name.startswith("cairn-home")
    assert project.parts[-3:] == ("projects", "<project>", "memory")
    assert project.parents[2] == home.parent
    assert f"{home.parent}/settings.json" in ending
    assert "temporary folder, now removed" in ending
