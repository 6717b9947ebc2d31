"""The system git as checkpoints run it: whether this machine's git can keep them (its version,
asked once per binary), and the configuration every command gets, so that nothing of the
user's own git setup (hooks, filters, line-ending conversion, signing) changes a snapshot."""

from __future__ import annotations

import os
import shutil
import subprocess

__all__ = [
    "GIT_CONFIG",
    "GIT_TIMEOUT_SECONDS",
    "MIN_GIT_VERSION",
    "NEUTRAL_ATTRIBUTES",
    "git_unavailable_reason",
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
