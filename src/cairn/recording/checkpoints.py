"""Checkpoints: snapshots of a workspace in a shadow git repository of cairn's own.

``$CAIRN_HOME/projects/<key>/checkpoints/`` holds ``git/`` (the shadow repository: its own
``GIT_DIR``, the workspace as work tree), ``meta/<commit>.json`` (what a snapshot skipped) and a
lock shared by every process of the project. The user's repository is never read or written: git
runs with our ``GIT_DIR`` and index, no system or global config, repository attributes
neutralised (no filters, no line-ending conversion: a snapshot holds the bytes on disk) and
inherited ``GIT_*`` variables removed, so a hostile checkout cannot make git run anything.

What a snapshot captures: every file git would see as not ignored (the workspace's
``.gitignore`` files, the user repository's ``info/exclude``, ``.cairnignore``), except files
over the per-file size cap, nested repositories and cairn's own memory folder; those are listed
as skipped. A workspace over the per-snapshot caps (file count, total size) gets no snapshot at
all, with the reason: a restore from a partial snapshot would be a partial restore.

Restoring a snapshot first snapshots the current state (so the restore can be undone), then puts
every captured file back as it was (created files removed, deleted files back); a file that is
not captured on either side (skipped, or ignored now) is left as it is and reported. A restore
cut short once it began changing files (its git killed or timed out, a file it cannot remove)
raises :class:`RestoreCutShort`, which carries that undo snapshot.

Everything here blocks (it runs git); the session calls it in a worker thread.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cairn.config.paths import project_dir
from cairn.debug_log import get_logger
from cairn.fsutil import atomic_write_json, atomic_write_text
from cairn.recording.shadow_git import (
    CHECKPOINTS_README,
    GIT_CONFIG,
    GIT_TIMEOUT_SECONDS,
    MAKING_PREFIX,
    NEUTRAL_ATTRIBUTES,
    RESTORE_PREFIX,
    clear_stale_locks,
    ensure_neutral_attributes,
    git_environment,
    git_unavailable_reason,
    holds_objects,
    keep_private,
    literal_pattern,
    nul_join,
    remove_leftovers,
    remove_path,
    repository_problem,
    user_repo_excludes,
)
from cairn.values import Value

if TYPE_CHECKING:
    from cairn.config.settings import CheckpointingSettings

__all__ = [
    "CHECKPOINT_REF",
    "Checkpoint",
    "CheckpointError",
    "CheckpointLimits",
    "CheckpointsUnavailable",
    "FileChange",
    "RestoreCutShort",
    "RestoreReport",
    "ShadowRepository",
    "SkippedFile",
    "SnapshotTooLarge",
    "checkpoints_dir",
    "git_unavailable_reason",
    "shadow_repository",
]

CHECKPOINT_REF = "refs/heads/checkpoints"  # every snapshot is a commit on this branch
# Memories are the user's, and their lock is in use: a rewind never touches either.
CAIRN_EXCLUDES = ("/.cairn/memory/", "/.cairn/.memory.lock")
GITLINK_MODE = "160000"
_log = get_logger("CHECKPOINTS")

ChangeStatus = Literal["added", "modified", "deleted"]
_STATUS: Mapping[str, ChangeStatus] = {
    "A": "added",
    "M": "modified",
    "T": "modified",  # a file became a link or the other way round
    "D": "deleted",
}


class CheckpointError(Exception):
    """A snapshot or a restore failed; the message says why."""


class CheckpointsUnavailable(CheckpointError):
    """Checkpoints cannot work here at all (no git, or a workspace they must not cover)."""


class SnapshotTooLarge(CheckpointError):
    """The workspace is over the per-snapshot caps: no snapshot was taken."""


class RestoreCutShort(CheckpointError):
    """A restore stopped after it began changing files: the ones it reached are restored (the
    one being written may be cut off), the others are as they were. ``undo``, taken before
    anything was written, puts every one back as it was before the restore."""

    def __init__(self, reason: str, undo: Checkpoint, report: RestoreReport) -> None:
        super().__init__(reason)
        self.undo = undo
        self.report = report  # what it set out to do: ``restored`` are the files it was writing


class CheckpointLimits(Value):
    max_file_bytes: int = 4 << 20
    max_files: int = 20_000
    max_total_bytes: int = 256 << 20


class SkippedFile(Value):
    path: str  # relative to the work tree, POSIX
    reason: str  # "larger than 4 MB", "nested git repository", ...

    def to_json(self) -> list[str]:
        return [self.path, self.reason]


class Checkpoint(Value):
    commit: str
    files: int  # files captured
    bytes: int  # their total size
    skipped: tuple[SkippedFile, ...] = ()
    reused: bool = False  # nothing changed since the previous snapshot: its commit is reused
    folders: tuple[str, ...] = ()  # folders holding no captured file ("a/b/"): git has none


class _Staged(Value):
    tree: str
    files: int
    bytes: int
    skipped: tuple[SkippedFile, ...]
    folders: tuple[str, ...]


class FileChange(Value):
    path: str
    status: ChangeStatus  # from the older snapshot to the newer one


class RestoreReport(Value, frozen=False):
    target: str  # the commit restored
    undo: Checkpoint  # the state just before the restore
    restored: list[str] = field(default_factory=list)  # written back (changed or deleted since)
    removed: list[str] = field(default_factory=list)  # created since: deleted
    kept: list[SkippedFile] = field(default_factory=list)  # not captured on one side: untouched

    @property
    def changed(self) -> int:
        return len(self.restored) + len(self.removed)


def checkpoints_dir(project_root: Path) -> Path:
    """``$CAIRN_HOME/projects/<key>/checkpoints``."""
    return project_dir(project_root) / "checkpoints"


def shadow_repository(
    project_root: Path, settings: CheckpointingSettings
) -> tuple[ShadowRepository | None, str | None]:
    """The project's shadow repository, or ``None`` and why checkpoints are off."""
    if not settings.enabled:
        return None, "checkpoints are turned off (general.checkpointing.enabled)"
    reason = git_unavailable_reason()
    if reason is not None:
        return None, reason
    root = project_root.resolve()
    if root == Path(root.anchor) or root == _home():
        return None, f"checkpoints are off in {root} (a whole home or root folder is too big)"
    limits = CheckpointLimits(
        max_file_bytes=int(settings.max_file_size_mb * (1 << 20)),
        max_files=settings.max_files,
        max_total_bytes=int(settings.max_snapshot_size_mb * (1 << 20)),
    )
    return ShadowRepository(root, checkpoints_dir(root), limits), None


def _home() -> Path | None:
    try:
        return Path.home().resolve()
    except RuntimeError:
        return None


class ShadowRepository:
    """The checkpoints of one work tree (a project root)."""

    def __init__(
        self, work_tree: Path, store: Path, limits: CheckpointLimits | None = None
    ) -> None:
        self.work_tree = work_tree.resolve()
        self.store = store
        self.git_dir = store / "git"
        self.meta_dir = store / "meta"
        self.limits = limits or CheckpointLimits()
        self._git_path: str | None = None
        self._guard = threading.Lock()  # for the two below: stop() comes from another thread
        self._running: subprocess.Popen[bytes] | None = None
        self._stopped = False

    def twin(self) -> ShadowRepository:
        """The same repository with git runs of its own, so :meth:`stop` ends only its work."""
        return ShadowRepository(self.work_tree, self.store, self.limits)

    def stop(self) -> None:
        """End the work under way from another thread: the running git is killed (with any
        process it started) and every later git call fails with :class:`CheckpointError`; the
        operation then ends and releases the lock. What the killed git leaves never breaks a
        later operation: its lock files are cleared by the next one (it holds the project's
        lock), a repository being made is made in a folder of its own and renamed into place
        whole, and a snapshot is recorded before the branch moves to it. A restore stopped
        while writing files leaves the work tree part restored and raises
        :class:`RestoreCutShort` with its undo snapshot, taken before anything is written."""
        with self._guard:
            self._stopped = True
            running = self._running
        if running is not None and running.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(running.pid, signal.SIGKILL)

    # ----- public operations -----

    def snapshot(self, message: str) -> Checkpoint:
        """Capture the work tree now (see the module docstring for what is captured)."""
        with self._locked():
            return self._snapshot(message)

    def prepare(self) -> bool:
        """Bring the shadow index up to the work tree without taking a snapshot: the next
        snapshot then only hashes what changed since (the first one of a project hashes
        everything). :class:`SnapshotTooLarge` when the work tree is over the caps.

        False, with nothing done, when another process holds the lock: it is preparing or
        taking a snapshot, either of which builds the index.
        """
        with self._locked(wait=False) as held:
            if held:
                self._stage()
            return held

    def is_prepared(self) -> bool:
        """Whether the shadow index exists (a snapshot or :meth:`prepare` ran before)."""
        return (self.git_dir / "index").is_file()

    def changes(self, older: str, newer: str | None = None) -> list[FileChange]:
        """Files that differ from snapshot ``older`` to ``newer`` (default: the work tree now)."""
        with self._locked():
            if newer is None:
                newer = self._stage().tree
            else:
                self._ensure_repository()
            return [FileChange(path, _STATUS[status]) for status, path in self._diff(older, newer)]

    def restore(
        self,
        target: str,
        *,
        message: str = "before restore",
        before_writing: Callable[[Checkpoint], None] | None = None,
    ) -> RestoreReport:
        """Put the work tree back as snapshot ``target`` holds it; returns what changed.

        The current state is snapshotted first (``report.undo``): restoring that commit undoes
        this restore; ``before_writing`` gets it when there is something to change, before the
        first file is (to record where it is; if it raises, nothing is changed). A failure
        before that is a :class:`CheckpointError` (:class:`SnapshotTooLarge` when the current
        state cannot be snapshotted) and nothing was changed; one after is
        :class:`RestoreCutShort`, which carries the undo snapshot.
        """
        with self._locked():
            self._ensure_repository()  # a damaged one says so, not "not in" it
            self._require_commit(target)
            self._require_own(target)
            undo = self._snapshot(message)
            report = RestoreReport(target=target, undo=undo)
            skipped_then, folders_then = self._meta(target)
            protected = {s.path: s for s in (*undo.skipped, *skipped_then)}
            report.kept = list(protected.values())  # not captured on one side: left as they are
            removals: list[str] = []
            for status, path, mode in self._raw_diff(undo.commit, target):
                if path in protected:
                    continue
                if status == "D":
                    removals.append(path)
                elif mode == GITLINK_MODE:
                    report.kept.append(SkippedFile(path, "nested git repository"))
                elif status == "A" and os.path.lexists(self.work_tree / path):
                    # On disk but not captured now (ignored): its content could not be undone.
                    report.kept.append(SkippedFile(path, "ignored now; left as it is"))
                else:
                    report.restored.append(path)
            with tempfile.TemporaryDirectory(prefix=RESTORE_PREFIX, dir=self.store) as temp:
                index = {"GIT_INDEX_FILE": str(Path(temp) / "index")}
                if report.restored:
                    self._git("read-tree", target, env=index)
                if before_writing is not None and (report.restored or removals):
                    before_writing(undo)
                try:  # from here on the work tree changes
                    for path in removals:
                        self._remove(path)
                        report.removed.append(path)
                    self._prune_empty_dirs(report.removed, keep=set(folders_then))
                    if report.restored:
                        paths = nul_join(report.restored)
                        self._git("checkout-index", "-f", "-z", "--stdin", input=paths, env=index)
                except (CheckpointError, OSError) as exc:
                    raise RestoreCutShort(str(exc), undo, report) from None
            self._make_folders(folders_then)
            return report

    def exists(self, commit: str) -> bool:
        try:
            self._git("cat-file", "-e", f"{commit}^{{commit}}")
        except CheckpointError:
            return False
        return True

    # ----- snapshot -----

    def _snapshot(self, message: str) -> Checkpoint:
        staged = self._stage()
        head, head_tree = self._head()
        if (
            head is not None
            and head_tree == staged.tree
            and self._meta(head) == (list(staged.skipped), list(staged.folders))
            and self._meta_field(head, "workTree") in (None, str(self.work_tree))
        ):
            return Checkpoint(
                head, staged.files, staged.bytes, staged.skipped, True, staged.folders
            )
        args = ["commit-tree", "--no-gpg-sign", staged.tree, "-m", message]
        if head is not None:
            args += ["-p", head]
        commit = self._git(*args).decode().strip()
        # What it skipped first: a snapshot on the branch always has it (a stop between the two
        # leaves, at worst, the record of a commit nothing refers to).
        self._write_meta(commit, staged)
        self._git("update-ref", CHECKPOINT_REF, commit, *([head] if head else []))
        return Checkpoint(commit, staged.files, staged.bytes, staged.skipped, False, staged.folders)

    def _stage(self) -> _Staged:
        """Bring the shadow index to the work tree's state."""
        self._ensure_repository()
        base = self._base_excludes()
        self._write_excludes(base, ())
        # One listing, tagged: "? " untracked and not ignored, any other letter tracked.
        tagged = self._paths("ls-files", "-z", "-t", "--cached", "--others", "--exclude-standard")
        tracked = {entry[2:] for entry in tagged if not entry.startswith("? ")}
        untracked = [entry[2:] for entry in tagged if entry.startswith("? ")]
        ignored = set(self._paths("ls-files", "-z", "--cached", "--ignored", "--exclude-standard"))
        candidates = sorted((tracked - ignored).union(untracked))
        files, size, skipped = self._measure(candidates)
        if files > self.limits.max_files:
            raise SnapshotTooLarge(
                f"the workspace has {files:,} files to capture, more than "
                f"general.checkpointing.maxFiles ({self.limits.max_files:,}); no checkpoint was "
                "taken (raise the limit, or list big folders in .gitignore or .cairnignore)"
            )
        if size > self.limits.max_total_bytes:
            raise SnapshotTooLarge(
                f"the workspace holds {_mb(size)} to capture, more than "
                f"general.checkpointing.maxSnapshotSizeMb ({_mb(self.limits.max_total_bytes)}); "
                "no checkpoint was taken"
            )
        self._write_excludes(base, [s.path for s in skipped])
        drop = sorted((ignored | {s.path.rstrip("/") for s in skipped}) & tracked)
        if drop:
            self._git(
                "rm", "--cached", "-q", "-r", "--ignore-unmatch", "--pathspec-from-file=-",
                "--pathspec-file-nul", input=nul_join(drop),
            )  # fmt: skip
        self._git("add", "-A")
        tree = self._git("write-tree").decode().strip()
        # Everything not ignored is in the index now: what is still untracked is a folder
        # holding no captured file, which git cannot store but a restore should bring back.
        folders = self._paths("ls-files", "-z", "--others", "--directory", "--exclude-standard")
        nested = {s.path for s in skipped}
        kept = tuple(f for f in folders if f.endswith("/") and f not in nested)
        return _Staged(tree, files, size, tuple(skipped), kept)

    def _measure(self, candidates: Iterable[str]) -> tuple[int, int, list[SkippedFile]]:
        files = size = 0
        skipped: list[SkippedFile] = []
        cap = self.limits.max_file_bytes
        for path in candidates:
            if path.endswith("/"):  # ls-files shows a repository inside the work tree so
                skipped.append(SkippedFile(path, "nested git repository"))
                continue
            try:
                info = os.lstat(self.work_tree / path)
            except OSError:
                continue  # deleted since the last snapshot: `add -A` records that
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
                continue  # git does not store sockets or FIFOs either
            if info.st_size > cap:
                skipped.append(SkippedFile(path, f"larger than {_mb(cap)} ({_mb(info.st_size)})"))
                continue
            files += 1
            size += info.st_size
        return files, size, skipped

    def _base_excludes(self) -> list[str]:
        lines = [*CAIRN_EXCLUDES]
        for source in (*user_repo_excludes(self.work_tree), self.work_tree / ".cairnignore"):
            with contextlib.suppress(OSError, UnicodeDecodeError):
                lines += source.read_text(encoding="utf-8").splitlines()
        return lines

    def _write_excludes(self, base: Sequence[str], skipped: Sequence[str]) -> None:
        text = "\n".join([*base, *(literal_pattern(p) for p in skipped)]) + "\n"
        target = self.git_dir / "info" / "exclude"
        with contextlib.suppress(OSError):
            if target.read_text(encoding="utf-8") == text:
                return
        atomic_write_text(target, text, durable=False)

    # ----- restore -----

    def _raw_diff(self, older: str, newer: str) -> Iterator[tuple[str, str, str]]:
        """(status, path, mode in ``newer``) of each file that differs."""
        out = self._git(
            "diff-tree", "-r", "-z", "--no-renames", "--raw", "--no-abbrev", older, newer
        )
        fields = out.split(b"\0")
        for index in range(0, len(fields) - 1, 2):
            meta = fields[index].decode()
            path = fields[index + 1].decode("utf-8", "surrogateescape")
            if not meta.startswith(":"):
                continue
            _old_mode, new_mode, _old, _new, status = meta[1:].split(" ")
            yield status[0], path, new_mode

    def _diff(self, older: str, newer: str) -> list[tuple[str, str]]:
        return [(status, path) for status, path, _ in self._raw_diff(older, newer)]

    def _remove(self, path: str) -> None:
        target = self.work_tree / path
        if not self._inside(target.parent):
            return  # a folder on the way became a link out of the workspace: leave it
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)

    def _prune_empty_dirs(self, removed: Iterable[str], *, keep: set[str]) -> None:
        """Folders the removed files leave empty, unless the snapshot had them."""
        folders = {Path(path).parent for path in removed}
        for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
            current = folder
            while current.parts and f"{current.as_posix()}/" not in keep:
                try:
                    os.rmdir(self.work_tree / current)
                except OSError:
                    break  # not empty, or not ours to remove
                current = current.parent

    def _make_folders(self, folders: Sequence[str]) -> None:
        for folder in folders:
            target = self.work_tree / folder
            if not os.path.lexists(target) and self._inside(target.parent):
                with contextlib.suppress(OSError):
                    target.mkdir(parents=True)

    # ----- metadata -----

    def _write_meta(self, commit: str, staged: _Staged) -> None:
        data = {
            "commit": commit,
            "workTree": str(self.work_tree),
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "files": staged.files,
            "bytes": staged.bytes,
            "skipped": [s.to_json() for s in staged.skipped],
            "folders": list(staged.folders),
        }
        atomic_write_json(self.meta_dir / f"{commit}.json", data, durable=False)

    def _meta_data(self, commit: str) -> dict[str, object]:
        try:
            data = json.loads((self.meta_dir / f"{commit}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _meta_field(self, commit: str, name: str) -> object:
        return self._meta_data(commit).get(name)

    def _meta(self, commit: str) -> tuple[list[SkippedFile], list[str]]:
        """What snapshot ``commit`` skipped and its file-less folders (empty if unreadable)."""
        data = self._meta_data(commit)
        entries, folders = data.get("skipped"), data.get("folders")
        skipped = [
            SkippedFile(entry[0], entry[1])
            for entry in (entries if isinstance(entries, list) else [])
            if isinstance(entry, list)
            and len(entry) == 2
            and all(isinstance(v, str) for v in entry)
        ]
        kept = [f for f in (folders if isinstance(folders, list) else []) if isinstance(f, str)]
        return skipped, kept

    # ----- git -----

    def _ensure_repository(self) -> None:
        """Make the shadow repository usable; we hold the project's checkpoint lock. It is made
        whole or not at all, and what a git killed half-way (by :meth:`stop`, or with its
        process) leaves behind never breaks the operations after it."""
        try:
            remove_leftovers(self.store)  # we hold the project's checkpoint lock: none in use
            problem = repository_problem(self.git_dir)
            if problem is not None:
                self._make_repository(problem)
            clear_stale_locks(self.git_dir)
            ensure_neutral_attributes(self.git_dir)
            keep_private(self.git_dir)
        except OSError as exc:
            raise CheckpointError(f"the checkpoint repository {self.git_dir}: {exc}") from None

    def _make_repository(self, problem: str) -> None:
        self.store.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(self.git_dir):
            if holds_objects(self.git_dir):
                self._repair(problem)
                return
            # No object, so no snapshot: what a `git init` killed after writing HEAD and
            # before objects/ leaves (or an empty folder). Made again.
            _log.warning(f"making the checkpoint repository {self.git_dir} again: {problem}")
            discarded = Path(tempfile.mkdtemp(prefix=MAKING_PREFIX, dir=self.store))
            os.rename(self.git_dir, discarded / "git")
            remove_path(discarded)
        made = Path(tempfile.mkdtemp(prefix=MAKING_PREFIX, dir=self.store))
        try:
            self._git("init", "-q", "--bare", str(made), bare_init=True)
            (made / "info").mkdir(exist_ok=True)
            (made / "info" / "attributes").write_text(NEUTRAL_ATTRIBUTES, encoding="utf-8")
            os.rename(made, self.git_dir)  # whole, or not there
        except BaseException:
            remove_path(made)
            raise
        readme = self.store / "README"
        if not readme.exists():
            atomic_write_text(readme, CHECKPOINTS_README, durable=False)

    def _repair(self, problem: str) -> None:
        """A repository holding objects is never deleted: ``git init`` puts back what is
        missing and removes nothing; a repository it cannot mend is left to the user."""
        failed = ""
        try:
            self._git("init", "-q", "--bare", str(self.git_dir), bare_init=True)
        except CheckpointError as exc:
            if self._stopped:
                raise
            failed = f"; {exc}"
        still = repository_problem(self.git_dir)
        if still is not None:
            raise CheckpointError(
                f"the checkpoint repository {self.git_dir} is damaged ({still}{failed}); it was "
                "left as it is, and no checkpoint can be taken or restored until it is moved "
                "away or deleted (deleting it deletes this project's checkpoints)"
            )
        _log.warning(f"repaired the checkpoint repository {self.git_dir}: {problem}")

    def _head(self) -> tuple[str | None, str | None]:
        """The newest snapshot's commit and tree (``None`` before the first one)."""
        try:
            out = self._git(
                "rev-parse", f"{CHECKPOINT_REF}^{{commit}}", f"{CHECKPOINT_REF}^{{tree}}"
            )
        except CheckpointError:
            return None, None
        words = out.decode().split()
        return (words[0], words[1]) if len(words) == 2 else (None, None)

    def _require_commit(self, commit: str) -> None:
        if not self.exists(commit):
            raise CheckpointError(f"checkpoint {commit[:12]} is not in {self.git_dir}")

    def _require_own(self, commit: str) -> None:
        """A snapshot goes back only onto the work tree it was taken of (a snapshot of an
        earlier cairn, which did not record it, is trusted to be this one's)."""
        taken_of = self._meta_field(commit, "workTree")
        if isinstance(taken_of, str) and taken_of != str(self.work_tree):
            raise CheckpointError(
                f"checkpoint {commit[:12]} was taken of {taken_of}, not of {self.work_tree}; "
                "nothing was restored"
            )

    def _paths(self, *args: str) -> list[str]:
        out = self._git(*args)
        return [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]

    def _git(
        self,
        *args: str,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        bare_init: bool = False,
    ) -> bytes:
        git = self._git_path or shutil.which("git")
        if git is None:
            raise CheckpointsUnavailable("git is not installed, so checkpoints are off")
        self._git_path = git
        command = [git, *(arg for item in GIT_CONFIG for arg in ("-c", item)), *args]
        if bare_init:
            command = [git, "-c", "init.defaultBranch=checkpoints", *args]
        environment = git_environment(
            self.store, None if bare_init else (self.git_dir, self.work_tree), env
        )
        with self._guard:
            if self._stopped:
                raise CheckpointError("stopped")
            try:
                process = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=self.work_tree,
                    env=environment,
                    start_new_session=True,  # stop() kills it with whatever it starts
                )
            except OSError as exc:
                raise CheckpointError(f"git {args[0]} could not run: {exc}") from None
            self._running = process
        try:
            stdout, stderr = process.communicate(input, timeout=GIT_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            limit = f"{GIT_TIMEOUT_SECONDS:g} s"
            raise CheckpointError(f"git {args[0]} took more than {limit}") from None
        finally:
            with self._guard:
                self._running = None
        if self._stopped:
            raise CheckpointError("stopped")
        if process.returncode != 0:
            if process.returncode < 0:  # its warnings (a deprecated setting) are not why
                raise CheckpointError(f"git {args[0]} was killed (signal {-process.returncode})")
            lines = stderr.decode("utf-8", "replace").strip().splitlines()
            detail = " ".join(lines[-3:]) or f"exit code {process.returncode}"
            raise CheckpointError(f"git {args[0]} failed: {detail}")
        return stdout

    @contextlib.contextmanager
    def _locked(self, *, wait: bool = True) -> Iterator[bool]:
        """The project's checkpoint lock (True), or, with ``wait=False`` and the lock held by
        another process, False at once."""
        from filelock import FileLock, Timeout

        try:
            self.store.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(self.store / "lock"))
            lock.acquire(timeout=GIT_TIMEOUT_SECONDS if wait else 0)
        except Timeout:
            if not wait:
                yield False
                return
            raise CheckpointError("another cairn process holds the checkpoint lock") from None
        except OSError as exc:  # after Timeout, which is one
            raise CheckpointError(f"the checkpoint lock in {self.store}: {exc}") from None
        try:
            yield True
        finally:
            lock.release()

    def _inside(self, folder: Path) -> bool:
        real = Path(os.path.realpath(folder))
        return real == self.work_tree or self.work_tree in real.parents


def _mb(size: int) -> str:
    return f"{size / (1 << 20):.1f} MB" if size >= 1 << 20 else f"{size / 1024:.0f} KB"
