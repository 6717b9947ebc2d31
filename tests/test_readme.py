"""The README's two set-up commands are the ones that work: CI runs the test command verbatim,
and the demo command, run in a fresh shell on a copy of the tree, leaves a runnable `cairn`."""

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from cairn import __version__

ROOT = Path(__file__).resolve().parents[1]


def _shell_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", text, re.DOTALL)]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [b for b in _shell_blocks(readme) if "pytest" in b]
    assert len(commands) == 1
    assert commands[0] in ci.splitlines()


def _demo_command() -> str:
    readme = (ROOT / "README.md").read_text()
    [demo] = [b for b in _shell_blocks(readme) if b.endswith("cairn demo")]
    return demo


def test_ci_installs_every_postgresql_program_the_test_server_runs() -> None:
    """`.ci/system-packages` checked only `initdb` and `postgres`, not the client programs the test
    server runs too (`createuser`, `createdb`); both now use one list."""
    from cairn.testing.postgres import PROGRAMS

    script = (ROOT / ".ci" / "system-packages").read_text()
    listed = re.search(r"^PG_PROGRAMS=\((.*)\)$", script, re.MULTILINE)
    assert listed is not None
    assert tuple(listed.group(1).split()) == PROGRAMS


def test_ci_installs_the_load_balancer_the_replica_tests_run() -> None:
    """The several-replica tests run Debian's haproxy where cairn.testing.haproxy finds it."""
    script = (ROOT / ".ci" / "system-packages").read_text()
    checked = re.search(r"^has_haproxy\(\) \{\n(.*?)\n\}", script, re.MULTILINE | re.DOTALL)

    assert checked is not None
    assert "/usr/sbin/haproxy" in checked.group(1)
    assert "has_haproxy || missing+=(haproxy)" in script


def test_ci_installs_the_forward_proxy_and_openssl_the_model_proxy_tests_run() -> None:
    """tests/e2e/test_model_proxy.py runs Debian's tinyproxy where cairn.testing.tinyproxy finds
    it, and makes its test CA with openssl."""
    script = (ROOT / ".ci" / "system-packages").read_text()
    checked = re.search(r"^has_tinyproxy\(\) \{\n(.*?)\n\}", script, re.MULTILINE | re.DOTALL)

    assert checked is not None
    assert "/usr/sbin/tinyproxy" in checked.group(1)
    assert "has_tinyproxy || missing+=(tinyproxy-bin)" in script
    assert "command -v openssl >/dev/null 2>&1 || missing+=(openssl)" in script


def test_the_readme_runs_the_demo_with_one_command() -> None:
    install = "python3 -m venv .venv && .venv/bin/pip install -q -e ."
    assert _demo_command() == f"{install} && . .venv/bin/activate && cairn demo"


def test_the_distribution_name_is_free_on_pypi_and_the_command_is_cairn() -> None:
    """Regression: the distribution was `cairn`, a name an unrelated PyPI project holds."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    readme = (ROOT / "README.md").read_text()

    assert project["name"] == "cairn-agent"
    assert project["scripts"] == {"cairn": "cairn.cli.main:run"}
    assert "distribution is named `cairn-agent`" in readme


def _copy_of_the_tree(target: Path) -> Path:
    """The files a fresh clone has (tracked, or new and not ignored), without any venv."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def _fresh_shell_env(home: Path) -> dict[str, str]:
    """A login-free shell's environment: no virtualenv active, none on PATH."""
    venvs = {Path(sys.prefix) / "bin", Path(os.environ.get("VIRTUAL_ENV", sys.prefix)) / "bin"}
    path = [p for p in os.environ.get("PATH", os.defpath).split(os.pathsep) if Path(p) not in venvs]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CAIRN_"))}
    env.pop("VIRTUAL_ENV", None)
    env.update(PATH=os.pathsep.join(path), HOME=str(home), CAIRN_HOME=str(home / ".cairn"))
    return env


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_readme_demo_command_leaves_cairn_runnable_from_any_folder(tmp_path: Path) -> None:
    """Regression: after the set-up the tour's bare `cairn` was "command not found"."""
    clone = _copy_of_the_tree(tmp_path / "cairn")
    elsewhere = tmp_path / "some-other-project"
    elsewhere.mkdir()
    script = f'{_demo_command()} && cd "{elsewhere}" && command -v cairn && cairn --version'

    result = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", script],
        cwd=clone, env=_fresh_shell_env(tmp_path), capture_output=True, text=True, timeout=540,
    )

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "What next" in result.stdout
    lines = result.stdout.strip().splitlines()
    assert lines[-2] == str(clone / ".venv" / "bin" / "cairn")
    assert lines[-1] == __version__


def test_every_doc_the_readme_links_exists() -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(((?:docs|benchmarks)/[^)#]+)\)", readme)
    assert links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert missing == []
