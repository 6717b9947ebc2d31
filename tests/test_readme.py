"""The README's two set-up commands are the ones that work: CI runs the test command verbatim."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _shell_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", text, re.DOTALL)]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [b for b in _shell_blocks(readme) if "pytest" in b]
    assert len(commands) == 1
    assert commands[0] in ci.splitlines()


def test_the_readme_runs_the_demo_with_one_command() -> None:
    readme = (ROOT / "README.md").read_text()
    demo = [b for b in _shell_blocks(readme) if b.endswith("cairn demo")]
    install = "python3 -m venv .venv && .venv/bin/pip install -q -e ."
    assert demo == [f"{install} && .venv/bin/cairn demo"]


def test_every_doc_the_readme_links_exists() -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(((?:docs|benchmarks)/[^)#]+)\)", readme)
    assert links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert missing == []
