"""Read-only git: which git commands only read, and how to run them so a repository's own
configuration cannot make them run programs.

A repository's ``.git/config`` is not the user's: a downloaded project, or a model told to by a
file it read, can put anything there. Three layers keep "read-only" git read-only:

- **Exact options.** :func:`git_reads` accepts a subcommand only with options from its allow-list,
  written out in full. Git accepts unambiguous abbreviations (``--unset-up`` is
  ``--unset-upstream``), so anything not listed exactly, abbreviations included, is not read-only.
- **Neutral execution.** :func:`neutral_git_env` adds command-line-level config
  (``GIT_CONFIG_COUNT``, which beats every config file) that switches off what git runs by
  itself: ``core.fsmonitor``,
  hooks (``git status`` may write the index, which runs ``post-index-change``), the pager, gpg,
  and network transports (a partial clone fetches missing objects, over ``core.sshCommand``).
- **Inert repositories only.** What cannot be switched off that way — diff and merge drivers,
  ``textconv``, ``filter.*`` clean/smudge programs, ``diff.external``, config includes,
  ``core.worktree`` — makes :func:`repository_config_hazard` name the problem, and the command then
  needs approval. Only the repository's own config files (and its submodules') are read for this:
  the user's global and the system config are the user's own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cairn.fsutil import read_regular_file

__all__ = [
    "NEUTRAL_GIT_CONFIG",
    "GitRead",
    "git_reads",
    "neutral_git_env",
    "repository_config_hazard",
]

MAX_CONFIG_BYTES = 1 << 20  # a larger repository config is not read (and not trusted)
MAX_SUBMODULE_CONFIGS = 64  # submodule config files checked per repository
# Config that makes git run programs on its own, switched off for commands that run unasked.
NEUTRAL_GIT_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("log.showSignature", "false"),
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("protocol.allow", "never"),
    ("core.sshCommand", "false"),
    ("credential.helper", ""),
    ("core.askPass", "false"),
)
# Environment that would make git run a program or reach the network.
_UNSET_ENVIRONMENT = (
    "GIT_EXTERNAL_DIFF", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "SSH_ASKPASS",
    "GIT_PROXY_COMMAND", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR",
)  # fmt: skip


def neutral_git_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` plus the config and variables that keep git from running programs."""
    env = {k: v for k, v in environ.items() if k not in _UNSET_ENVIRONMENT}
    try:
        count = max(int(env.get("GIT_CONFIG_COUNT", "0")), 0)
    except ValueError:
        count = 0
    for key, value in NEUTRAL_GIT_CONFIG:
        env[f"GIT_CONFIG_KEY_{count}"] = key
        env[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    env["GIT_CONFIG_COUNT"] = str(count)
    env["GIT_OPTIONAL_LOCKS"] = "0"  # git status must not write the index
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_PAGER"] = "cat"
    return env


# ----- repository config -----

_SECTION = re.compile(r'\s*\[\s*([A-Za-z0-9.-]+)\s*(?:"((?:[^"\\]|\\.)*)")?\s*\]')
_KEY = re.compile(r"\s*([A-Za-z][A-Za-z0-9-]*)")
_DRIVER_KEYS = {
    "diff": frozenset({"command", "textconv"}),
    "filter": frozenset({"clean", "smudge", "process"}),
    "merge": frozenset({"driver"}),
}


def repository_config_hazard(directory: Path) -> str | None:
    """Why git in ``directory`` could run a program its config names, or ``None`` if it cannot.

    Reads the config files of the repository holding ``directory`` (and of its submodules);
    a file that is not a small regular text file counts as a hazard.
    """
    git_dir = _find_git_dir(directory)
    if git_dir is None:
        return None
    try:
        for config in _config_files(git_dir):
            hazard = _file_hazard(config)
            if hazard is not None:
                return hazard
    except OSError as exc:
        return f"the repository's config could not be checked ({exc.strerror or exc})"
    return None


def _find_git_dir(directory: Path) -> Path | None:
    current = Path(os.path.abspath(directory))
    for candidate in (current, *current.parents):
        dot_git = candidate / ".git"
        if dot_git.is_dir():
            return dot_git
        if dot_git.is_file():
            return _gitdir_from_file(dot_git)
        if dot_git.exists() or dot_git.is_symlink():
            return dot_git  # something odd: its config check will fail and say so
    return None


def _gitdir_from_file(dot_git: Path) -> Path:
    """A ``.git`` file (worktrees, submodules) says ``gitdir: <path>``."""
    try:
        text = read_regular_file(dot_git, max_bytes=4096).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return dot_git
    target = text.strip().removeprefix("gitdir:").strip()
    path = Path(target)
    return path if path.is_absolute() else dot_git.parent / path


def _config_files(git_dir: Path) -> Iterator[Path]:
    yield git_dir / "config"
    yield git_dir / "config.worktree"
    common = git_dir / "commondir"
    if common.exists():
        text = read_regular_file(common, max_bytes=4096).decode("utf-8", errors="replace").strip()
        common_dir = Path(text) if Path(text).is_absolute() else git_dir / text
        yield common_dir / "config"
        git_dir = common_dir
    modules = git_dir / "modules"
    if modules.is_dir():
        found = 0
        for root, folders, files in os.walk(modules):
            folders.sort()
            if "config" in files:
                found += 1
                if found > MAX_SUBMODULE_CONFIGS:
                    raise OSError("too many submodules to check")
                yield Path(root) / "config"


def _file_hazard(path: Path) -> str | None:
    try:
        data = read_regular_file(path, max_bytes=MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path} cannot be checked ({exc.strerror or exc})"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"{path} is not UTF-8 text"
    for section, subsection, key in _config_keys(text):
        hazard = _key_hazard(section, subsection, key)
        if hazard is not None:
            return f"{path} sets {hazard}"
    return None


def _key_hazard(section: str, subsection: str | None, key: str | None) -> str | None:
    name = ".".join(p for p in (section, subsection, key) if p is not None)
    if section in ("include", "includeif"):
        return f"{section} (it reads more config from other files)"
    if section == "?":
        return "a section header git may read differently"
    if key is None:
        return None
    if subsection is not None and key in _DRIVER_KEYS.get(section, ()):
        return f"{name} (a program git runs on file contents)"
    if (section, key) in (("diff", "external"), ("core", "worktree")):
        return name
    return None


def _config_keys(text: str) -> Iterator[tuple[str, str | None, str | None]]:
    """``(section, subsection, key)`` of every entry; section and key names lower-cased."""
    section: str = ""
    subsection: str | None = None
    for line in _logical_lines(text):
        rest = line.strip()
        if rest.startswith("["):
            match = _SECTION.match(rest)
            if match is None:
                yield "?", None, None
                continue
            section, subsection = match.group(1).lower(), match.group(2)
            if subsection is None and "." in section:  # old syntax: [section.subsection]
                section, subsection = section.split(".", 1)
            yield section, subsection, None
            rest = rest[match.end() :].strip()
        if not rest or rest[0] in "#;":
            continue
        key = _KEY.match(rest)
        yield section, subsection, key.group(1).lower() if key else "?"


def _logical_lines(text: str) -> Iterator[str]:
    """Lines with backslash continuations joined, as git reads values that span lines."""
    pending = ""
    for line in text.splitlines():
        stripped = line.rstrip()
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:
            pending += stripped[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


# ----- which git commands only read -----


@dataclass(frozen=True)
class GitRead:
    """A read-only git command: where it runs and what it names that must be checked as paths."""

    directories: tuple[str, ...] = ()  # -C arguments, in order (each relative to the previous)
    paths: tuple[str, ...] = ()  # operands and file-valued options


@dataclass(frozen=True)
class _Options:
    """A subcommand's allow-list. Names are exact; nothing else is accepted."""

    flags: frozenset[str] = frozenset()
    values: frozenset[str] = frozenset()  # take a value: --opt=V, --opt V, -xV, -x V
    optional: frozenset[str] = frozenset()  # may carry one: --opt[=V], -x[V]
    paths: frozenset[str] = frozenset()  # value options whose value is a file
    numeric: bool = False  # -<n>, as in `git log -5`
    operands: Literal["any", "listing", "none"] = "any"

    def __or__(self, other: _Options) -> _Options:
        return _Options(
            self.flags | other.flags,
            self.values | other.values,
            self.optional | other.optional,
            self.paths | other.paths,
            self.numeric or other.numeric,
            self.operands if self.operands == other.operands else "any",
        )


@dataclass
class _Parsed:
    operands: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    flags: set[str] = field(default_factory=set)


def _parse(args: Sequence[str], spec: _Options) -> _Parsed | None:
    """Read ``args`` against ``spec``; ``None`` on any option that is not allowed as written."""
    parsed = _Parsed()
    index = 0
    only_operands = False
    while index < len(args):
        arg = args[index]
        index += 1
        if only_operands or arg == "-" or not arg.startswith("-"):
            parsed.operands.append(arg)
            continue
        if arg == "--":
            only_operands = True
            continue
        if arg.startswith("--"):
            name, has_value, value = arg.partition("=")
            if name in spec.values:
                if not has_value:
                    if index >= len(args):
                        return None
                    value, index = args[index], index + 1
            elif name in spec.optional or (name in spec.flags and not has_value):
                pass
            else:
                return None
            if name in spec.paths and (has_value or name in spec.values):
                parsed.paths.append(value)
            parsed.flags.add(name)
            continue
        if spec.numeric and arg[1:].isdigit():
            continue
        letters = arg[1:]
        for position, letter in enumerate(letters):
            option, rest = "-" + letter, letters[position + 1 :]
            parsed.flags.add(option)
            if option in spec.values:
                if not rest:
                    if index >= len(args):
                        return None
                    rest, index = args[index], index + 1
                if option in spec.paths:
                    parsed.paths.append(rest)
                break
            if option in spec.optional:
                break
            if option not in spec.flags:
                return None
    return parsed


def _opts(
    flags: str = "",
    values: str = "",
    optional: str = "",
    paths: str = "",
    *,
    numeric: bool = False,
    operands: Literal["any", "listing", "none"] = "any",
) -> _Options:
    return _Options(
        frozenset(flags.split()),
        frozenset(values.split()) | frozenset(paths.split()),
        frozenset(optional.split()),
        frozenset(paths.split()),
        numeric,
        operands,
    )


_DIFF = _opts(
    "-p -u --patch -s --no-patch --raw --patch-with-raw --patch-with-stat --indent-heuristic "
    "--no-indent-heuristic --minimal --patience --histogram --compact-summary --numstat "
    "--shortstat --cumulative --summary -z --name-only --name-status --no-color "
    "--no-color-moved --no-color-moved-ws --no-renames --rename-empty --no-rename-empty "
    "--check --full-index --binary --find-copies-harder -D --irreversible-delete --pickaxe-all "
    "--pickaxe-regex -R --no-relative -a --text --ignore-cr-at-eol --ignore-space-at-eol -b "
    "--ignore-space-change -w --ignore-all-space --ignore-blank-lines -W --function-context "
    "--exit-code --quiet --no-ext-diff --no-textconv --no-prefix --default-prefix "
    "--ita-invisible-in-index --ita-visible-in-index",
    "--anchored --diff-algorithm --color-moved-ws --word-diff-regex --ws-error-highlight -l "
    "--diff-filter -S -G --find-object --skip-to --rotate-to -I --ignore-matching-lines "
    "--inter-hunk-context --src-prefix --dst-prefix --line-prefix --unified "
    "--output-indicator-new --output-indicator-old --output-indicator-context",
    "--stat --dirstat --dirstat-by-file --submodule --color --color-moved --word-diff "
    "--color-words --abbrev -B --break-rewrites -M --find-renames -C --find-copies --relative "
    "--ignore-submodules -U",
    "-O",
)
_LOG = _DIFF | _opts(
    "--all-match --invert-grep -i --regexp-ignore-case --basic-regexp -E --extended-regexp -F "
    "--fixed-strings -P --perl-regexp --remove-empty --merges --no-merges --no-min-parents "
    "--no-max-parents --first-parent --exclude-first-parent-only --not --all --reflog "
    "--single-worktree --ignore-missing --cherry-mark --cherry-pick --left-only --right-only "
    "--cherry --walk-reflogs -g --merge --boundary --simplify-by-decoration --show-pulls "
    "--full-history --dense --sparse --simplify-merges --date-order --author-date-order "
    "--topo-order --reverse --do-walk --abbrev-commit --no-abbrev-commit --oneline "
    "--no-expand-tabs --no-notes --relative-date --parents --children --left-right --graph "
    "--no-decorate --source --use-mailmap --no-use-mailmap --mailmap --no-mailmap --full-diff "
    "--log-size --follow --no-follow --cc -c --dd -m --no-diff-merges --combined-all-paths "
    "--count --objects --no-object-names",
    "-n --max-count --skip --since --after --until --before --author --committer --grep-reflog "
    "--grep --min-parents --max-parents --glob --exclude --format --encoding --date "
    "--decorate-refs --decorate-refs-exclude -L --diff-merges --since-as-filter",
    "--branches --tags --remotes --ancestry-path --no-walk --pretty --expand-tabs --notes "
    "--show-linear-break --decorate",
    numeric=True,
)
_STATUS = _opts(
    "-s --short -b --branch --show-stash --long -v --verbose -z --no-column --ahead-behind "
    "--no-ahead-behind --renames --no-renames",
    "",
    "--porcelain -u --untracked-files --ignore-submodules --ignored --column --find-renames",
)
_BLAME = _opts(
    "-b --root --show-stats -f --show-name -n --show-number -p --porcelain --line-porcelain "
    "--incremental -c -t -l -s -e --show-email -w --color-lines --color-by-age --minimal "
    "--first-parent --reverse --no-progress",
    "-L --since --date --ignore-rev",
    "--abbrev -M -C",
    "--ignore-revs-file --contents -S",
)
_LS_FILES = _opts(
    "-c --cached -d --deleted -m --modified -o --others -i --ignored -s --stage -k --killed "
    "--directory --no-empty-directory -u --unmerged -z -t -v -f --full-name "
    "--recurse-submodules --error-unmatch --exclude-standard --deduplicate --sparse --eol "
    "--debug --resolve-undo",
    "-x --exclude --exclude-per-directory --with-tree --format",
    "--abbrev",
    "-X --exclude-from",
)
_LS_TREE = _opts(
    "-d -r -t -l --long -z --name-only --name-status --object-only --full-name --full-tree",
    "--format",
    "--abbrev",
)
_DESCRIBE = _opts(
    "--tags --all --long --always --contains --exact-match --first-parent --debug",
    "--candidates --match --exclude",
    "--abbrev --dirty --broken",
)
_CAT_FILE = _opts("-t -s -e -p --allow-unknown-type --mailmap --use-mailmap --no-mailmap")
_GREP = _opts(
    "--cached --untracked --recurse-submodules -a --text -i --ignore-case -I -r --recursive "
    "--no-recursive -w --word-regexp -v --invert-match -h -H --full-name -E -G -F -P "
    "--extended-regexp --basic-regexp --fixed-strings --perl-regexp -n --line-number --column "
    "-l --files-with-matches --name-only -L --files-without-match -z --null -o "
    "--only-matching -c --count --no-color --break --heading -p --show-function -W "
    "--function-context -q --quiet --all-match --and --or --not",
    "--max-depth -e -A -B -C --context --after-context --before-context --threads -m "
    "--max-count",
    "--color",
    "-f",
    numeric=True,
)
_LISTING_VALUES = "--contains --no-contains --merged --no-merged --points-at --sort --format"
_BRANCH = _opts(
    "-a --all -r --remotes -v -vv --verbose -l --list --show-current --no-column --no-color "
    "-i --ignore-case --no-abbrev --omit-empty",
    _LISTING_VALUES,
    "--column --color --abbrev",
    operands="listing",
)
_TAG = _opts(
    "-l --list --no-column -i --ignore-case --omit-empty",
    _LISTING_VALUES,
    "-n --column --color",
    operands="listing",
)
_CONFIG_READ_FLAGS = frozenset(
    {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--get-color",
     "--get-colorbool"}
)  # fmt: skip
_CONFIG = _opts(
    " ".join(_CONFIG_READ_FLAGS) + " --name-only --show-origin --show-scope -z --null "
    "--includes --no-includes --local --global --system --worktree --bool --int --bool-or-int "
    "--path --expiry-date",
    "--type --default --blob",
    "",
    "--file -f",
)
_REV_LIST = _LOG
_GLOBAL_FLAGS = frozenset(
    {"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--glob-pathspecs",
     "--noglob-pathspecs", "--icase-pathspecs", "--no-replace-objects"}
)  # fmt: skip


def _listing(parsed: _Parsed) -> bool:
    """branch / tag list, never create: names are patterns only after -l/--list."""
    return not parsed.operands or bool(parsed.flags & {"-l", "--list"})


def _remote(args: Sequence[str]) -> _Parsed | None:
    if all(a in ("-v", "--verbose") for a in args):
        return _Parsed()
    if args[0] == "get-url":
        return _parse(args[1:], _opts("--push --all"))
    if args[0] == "show" and "-n" in args[1:]:  # -n: without asking the remote
        return _parse(args[1:], _opts("-n"))
    return None


def _config(args: Sequence[str]) -> _Parsed | None:
    if args and args[0] in ("get", "list"):
        return _parse(args[1:], _CONFIG | _opts("--all --regexp", "--value --url"))
    parsed = _parse(args, _CONFIG)
    if parsed is None or not parsed.flags & _CONFIG_READ_FLAGS:
        return None
    return parsed


_SUBCOMMANDS: dict[str, _Options] = {
    "status": _STATUS,
    "log": _LOG,
    "show": _LOG,
    "diff": _DIFF | _opts("--cached --staged --merge-base -0 -1 -2 -3 --base --ours --theirs"),
    "blame": _BLAME,
    "ls-files": _LS_FILES,
    "ls-tree": _LS_TREE,
    "describe": _DESCRIBE,
    "cat-file": _CAT_FILE,
    "grep": _GREP,
    "rev-list": _REV_LIST,
    "branch": _BRANCH,
    "tag": _TAG,
}


def git_reads(args: Sequence[str]) -> GitRead | None:
    """What a ``git`` command reads, or ``None`` when it is not known to only read."""
    directories: list[str] = []
    index = 0
    while index < len(args) and args[index].startswith("-"):
        arg = args[index]
        if arg in _GLOBAL_FLAGS:
            index += 1
        elif arg == "-C" and index + 1 < len(args):
            directories.append(args[index + 1])
            index += 2
        elif arg == "--version" and index == len(args) - 1:
            return GitRead(tuple(directories))
        else:  # -c, --config-env, --exec-path, --git-dir, --work-tree ... can run other things
            return None
    if index >= len(args):
        return None
    subcommand, rest = args[index], args[index + 1 :]
    parsed = _subcommand(subcommand, rest)
    if parsed is None:
        return None
    return GitRead(tuple(directories), (*parsed.operands, *parsed.paths))


def _subcommand(name: str, args: Sequence[str]) -> _Parsed | None:
    if name == "version":
        return _parse(args, _opts("--build-options", operands="none"))
    if name == "rev-parse":  # only prints names and paths; runs nothing
        return _Parsed(operands=[a for a in args if not a.startswith("-")])
    if name == "remote":
        return _remote(args)
    if name == "config":
        return _config(args)
    spec = _SUBCOMMANDS.get(name)
    if spec is None:
        return None
    parsed = _parse(args, spec)
    if parsed is None:
        return None
    if spec.operands == "none" and parsed.operands:
        return None
    if spec.operands == "listing" and not _listing(parsed):
        return None
    return parsed
