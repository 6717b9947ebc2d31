"""The system git as checkpoints run it: whether this machine's git can keep them (its version,
asked once per binary), the configuration every command gets, so that nothing of the user's own
git setup (hooks, filters, line-ending conversion, signing) changes a snapshot, and the checks
of the shadow repository's folder itself: whether git would take it for a repository, whether
it holds objects, and what a git killed half-way left in it (its lock files, lost attributes), and
the temporary folders a process killed while making it or restoring from it leaves beside it."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from cairn.fsutil import atomic_write_text

__all__ = [
    "CHECKPOINTS_README",
    "GIT_CONFIG",
    "GIT_LOCK_FILES",
    "GIT_TIMEOUT_SECONDS",
    "MAKING_PREFIX",
    "MIN_GIT_VERSION",
    "NEUTRAL_ATTRIBUTES",
    "RESTORE_PREFIX",
    "clear_stale_locks",
    "ensure_neutral_attributes",
    "git_environment",
    "git_unavailable_reason",
    "holds_objects",
    "keep_private",
    "literal_pattern",
    "nul_join",
    "remove_leftovers",
    "remove_path",
    "repository_problem",
    "user_repo_excludes",
]

GIT_TIMEOUT_SECONDS = 60.0  # one git command; a hung git must not hang a turn forever
MIN_GIT_VERSION = (2, 25)  # --pathspec-from-file
# Repository attributes could ask git to convert line endings or run a filter: neither may
# change what a snapshot holds.
NEUTRAL_ATTRIBUTES = (
    "* -text -eol -crlf -filter -ident -working-tree-encoding -diff -merge -export-subst\n"
)
# Command-line config wins over every file; the shadow repository's own config is ours too.
GIT_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.symlinks=true",
    "core.fileMode=true",
    "core.ignoreCase=false",
    "core.precomposeUnicode=false",
    "core.attributesFile=/dev/null",
    "core.excludesFile=/dev/null",
    "core.looseCompression=1",
    # Not synced to disk one by one: an OS crash may cost the checkpoint being written, and the
    # first snapshot of a big project takes a third of the time (figures: benchmarks/README.md).
    "core.fsync=none",
    "core.fsyncObjectFiles=false",
    "core.bare=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "commit.gpgSign=false",
    "advice.addEmbeddedRepo=false",
    "safe.directory=*",
    "user.name=cairn",
    "user.email=cairn@localhost",
)


# Lock files a git killed half-way may leave in the shadow repository (git writes each file as
# <name>.lock and renames it into place).
GIT_LOCK_FILES = (
    "index.lock",
    "HEAD.lock",
    "config.lock",
    "packed-refs.lock",
    "refs/heads/checkpoints.lock",  # CHECKPOINT_REF's
)
MAKING_PREFIX = "git.new-"  # a shadow repository being made (or an unusable one being removed)
RESTORE_PREFIX = "restore-"  # a restore's temporary folder (the index of the snapshot it restores)
CHECKPOINTS_README = (
    "cairn's checkpoints of one project (a shadow git repository; the project's own "
    "repository is never touched). Deleting this folder deletes the checkpoints.\n"
)


def git_unavailable_reason() -> str | None:
    """Why checkpoints cannot use git on this machine, or ``None`` when they can (asked once
    per git binary: a daemon's sessions do not each run ``git --version``)."""
    git = shutil.which("git")
    if git is None:
        return "git is not installed, so checkpoints are off (install git to use /rewind)"
    try:
        info = os.stat(git)
    except OSError as exc:
        return f"git cannot be run ({exc}), so checkpoints are off"
    key = (git, info.st_ino, info.st_mtime_ns)
    if key not in _GIT_CHECKED:
        _GIT_CHECKED[key] = _check_git(git)
    return _GIT_CHECKED[key]


_GIT_CHECKED: dict[tuple[str, int, int], str | None] = {}


def _check_git(git: str) -> str | None:
    try:
        done = subprocess.run(
            [git, "--version"], capture_output=True, timeout=GIT_TIMEOUT_SECONDS, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"git cannot be run ({exc}), so checkpoints are off"
    version = _parse_version(done.stdout.decode("ascii", "replace"))
    if version is None or version < MIN_GIT_VERSION:
        wanted = ".".join(map(str, MIN_GIT_VERSION))
        return f"checkpoints need git {wanted} or newer ({done.stdout.decode().strip()})"
    return None


def _parse_version(text: str) -> tuple[int, int] | None:
    # "git version 2.39.5" (Apple's adds " (Apple Git-143)")
    words = text.split()
    if len(words) < 3:
        return None
    numbers = words[2].split(".")
    try:
        return int(numbers[0]), int(numbers[1])
    except (ValueError, IndexError):
        return None


def repository_problem(git_dir: Path) -> str | None:
    """Why git would not take ``git_dir`` for a repository (its own check: a valid HEAD,
    ``objects/`` and ``refs/``), or ``None``."""
    if not git_dir.is_dir():
        return "missing" if not os.path.lexists(git_dir) else "not a folder"
    try:
        head = (git_dir / "HEAD").read_bytes()[:256]
    except FileNotFoundError:
        return "no HEAD"
    except OSError as exc:
        return f"HEAD cannot be read: {exc.strerror}"
    if not (head.startswith(b"ref: refs/") or _is_object_name(head.strip())):
        return "HEAD is not a ref"
    for folder in ("objects", "refs"):
        if not (git_dir / folder).is_dir():
            return f"no {folder}/"
    return None


def _is_object_name(text: bytes) -> bool:
    return len(text) in (40, 64) and all(c in b"0123456789abcdef" for c in text)


def holds_objects(git_dir: Path) -> bool:
    """Whether ``git_dir`` has any file under ``objects/`` (a snapshot may be in it)."""
    return any(files for _folder, _dirs, files in os.walk(git_dir / "objects"))


def remove_path(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def nul_join(paths: Iterable[str]) -> bytes:
    return b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)


def literal_pattern(path: str) -> str:
    """An exclude line matching exactly ``path`` from the work tree root."""
    escaped = "".join("\\" + c if c in "\\*?[!# " else c for c in path)
    return "/" + escaped


def clear_stale_locks(git_dir: Path) -> None:
    """Remove the lock files a git killed half-way left (``add`` leaves index.lock,
    ``update-ref`` the branch's lock and HEAD.lock); call with the project's checkpoint lock
    held, when no git of ours can be running."""
    for name in GIT_LOCK_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(git_dir / name)


def ensure_neutral_attributes(git_dir: Path) -> None:
    """Put back the neutral attributes (a repository made before they were written with it, or
    whose file was lost): without them the project's .gitattributes could change what a
    snapshot holds."""
    target = git_dir / "info" / "attributes"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if target.read_text(encoding="utf-8") == NEUTRAL_ATTRIBUTES:
            return
    atomic_write_text(target, NEUTRAL_ATTRIBUTES, durable=False)


def remove_leftovers(store: Path) -> None:
    """Remove the temporary folders a process killed while it made the shadow repository or
    restored a snapshot left in ``store``; call with the project's checkpoint lock held, when
    no operation of any process is using one."""
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(store):
            if entry.name.startswith((MAKING_PREFIX, RESTORE_PREFIX)):
                remove_path(Path(entry.path))


def keep_private(git_dir: Path) -> None:
    """The shadow repository is its owner's alone (0700: it holds a copy of every captured
    file, some of which only their owner may read); one made by an earlier cairn with the
    umask's mode is narrowed (if it can be: a folder its user cannot change still works)."""
    with contextlib.suppress(OSError):
        if stat.S_IMODE(os.stat(git_dir).st_mode) & 0o077:
            os.chmod(git_dir, 0o700)


def user_repo_excludes(work_tree: Path) -> list[Path]:
    """The user repository's ``info/exclude`` (read as a text file, never through git)."""
    dot_git = work_tree / ".git"
    git_dir = dot_git
    if dot_git.is_file():  # a linked worktree or submodule: "gitdir: <path>"
        try:
            line = dot_git.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return []
        if not line.startswith("gitdir:"):
            return []
        git_dir = (work_tree / line.removeprefix("gitdir:").strip()).resolve()
    found = [git_dir / "info" / "exclude"]
    with contextlib.suppress(OSError, UnicodeDecodeError):
        common = (git_dir / "commondir").read_text(encoding="utf-8").strip()
        found.append((git_dir / common / "info" / "exclude").resolve())
    return found


def git_environment(
    store: Path, repository: tuple[Path, Path] | None, extra: Mapping[str, str] | None
) -> dict[str, str]:
    """The environment of a checkpoint git: none of the user's ``GIT_*`` variables or config,
    ``repository`` (the shadow ``GIT_DIR`` and its work tree; ``None`` for ``git init``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        HOME=str(store),  # git older than 2.32 reads ~/.gitconfig: make it ours
        XDG_CONFIG_HOME=str(store),
        GIT_TERMINAL_PROMPT="0",
        GIT_LITERAL_PATHSPECS="1",
        GIT_AUTHOR_NAME="cairn",
        GIT_AUTHOR_EMAIL="cairn@localhost",
        GIT_COMMITTER_NAME="cairn",
        GIT_COMMITTER_EMAIL="cairn@localhost",
        LC_ALL="C",
    )
    if repository is not None:
        env.update(GIT_DIR=str(repository[0]), GIT_WORK_TREE=str(repository[1]))
    env.update(extra or {})
    return env
