"""Real git repositories in temp folders, and fingerprints of a tree and of a repository's state."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "git",
    "git_killing_its_caller",
    "git_under_strace",
    "make_repository",
    "repository_state",
    "tree_state",
]

_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """Run the user's git in ``repo`` (as the user would) and return its output."""
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        env={**os.environ, **_GIT_ENV, **(env or {})},
        capture_output=True,
        check=True,
    )
    return done.stdout.decode()


def make_repository(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """A git repository at ``root`` with ``files`` committed on ``main``."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


def tree_state(root: Path, *, skip: tuple[str, ...] = (".git",)) -> dict[str, object]:
    """Every file, symlink and folder under ``root``: bytes, exec bit, link target."""
    state: dict[str, object] = {}
    for folder, dirs, files in os.walk(root):
        relative_folder = Path(folder).relative_to(root)
        dirs[:] = sorted(d for d in dirs if (relative_folder / d).as_posix() not in skip)
        for name in dirs:
            path = Path(folder) / name
            if path.is_symlink():
                state[(relative_folder / name).as_posix()] = ("link", os.readlink(path))
            else:
                state[(relative_folder / name).as_posix() + "/"] = "dir"
        for name in sorted(files):
            path = Path(folder) / name
            key = (relative_folder / name).as_posix()
            if path.is_symlink():
                state[key] = ("link", os.readlink(path))
            else:
                executable = bool(path.stat().st_mode & stat.S_IXUSR)
                state[key] = (path.read_bytes(), executable)
    return state


def repository_state(repo: Path) -> dict[str, str]:
    """HEAD, refs, stash, index and a digest of every file under ``.git``."""
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(repo / ".git")):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            digest.update(str(path.relative_to(repo)).encode())
            digest.update(path.read_bytes())
    quiet = {"GIT_OPTIONAL_LOCKS": "0"}  # reading must not refresh the index it checks
    return {
        "head": git(repo, "rev-parse", "HEAD"),
        "refs": git(repo, "for-each-ref"),
        "stash": git(repo, "stash", "list"),
        "staged": git(repo, "diff", "--cached", "--name-status", env=quiet),
        "git_dir": digest.hexdigest(),
    }


def _strace() -> str | None:
    found = shutil.which("strace")
    if found is None:
        return None
    probe = subprocess.run([found, "-qq", "-o", os.devnull, "true"], capture_output=True)
    return found if probe.returncode == 0 else None  # ptrace may be forbidden in a container


def git_under_strace(
    bin_dir: Path,
    command: str,
    inject: str,
    *,
    syscall: str = "/^rename",
    path: Path | None = None,
) -> None:
    """Put in ``bin_dir`` a ``git`` that runs the real one, under strace for ``git <command>``
    with ``inject`` applied to its ``syscall`` calls. git writes each file of a repository as
    ``<name>.lock`` and renames it into place, so its nth rename is an exact point in its work;
    with ``path`` (absolute), only its calls on that file count: ``checkout-index`` writes the
    file it puts back with one ``write``. ``signal=KILL:when=N`` kills it there, as a stop or
    the timeout kills it; ``delay_enter=...`` holds it there. Skips the test without strace."""
    import pytest

    strace, real_git = _strace(), shutil.which("git")
    if strace is None or real_git is None:
        pytest.skip("needs strace (and ptrace allowed) to stop git at an exact point")
    only = f"-P {shlex.quote(str(path))}" if path is not None else ""
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do\n'
        f'  if [ "$arg" = "{command}" ]; then\n'
        f"    exec {strace} -qq -o /dev/null {only} -e trace={syscall}"
        f" -e inject={syscall}:{inject}"
        f' {real_git} "$@"\n'
        "  fi\n"
        "done\n"
        f'exec {real_git} "$@"\n'
    )
    wrapper.chmod(0o755)


def git_killing_its_caller(bin_dir: Path, command: str) -> None:
    """Put in ``bin_dir`` a ``git`` that, asked to run ``git <command>``, kills the process that
    started it (a cairn crashing at that exact point) instead; any other command runs."""
    real_git = shutil.which("git")
    assert real_git is not None
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do\n'
        f'  if [ "$arg" = "{command}" ]; then\n'
        '    kill -KILL "$PPID"\n'
        "    exit 1\n"
        "  fi\n"
        "done\n"
        f'exec {real_git} "$@"\n'
    )
    wrapper.chmod(0o755)
