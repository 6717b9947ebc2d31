"""The catalog: every command, skill and agent definition one project can use, kept current.

One catalog per project and process (the runtime keeps it), shared by the project's sessions.
:meth:`Catalog.refresh` reads the folders again when a file in them was added, changed or
removed (a session checks before each prompt), so an edited command works without a restart.
A name defined twice keeps the definition from the folder that comes first
(:mod:`cairn.config.extension_folders`); the one hidden is noted in the debug log.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from cairn.config import Inputs
from cairn.config.extension_folders import MAX_DEPTH, Folder, Kind, Origin, folders
from cairn.debug_log import get_logger
from cairn.extensions.agent_definition import GENERAL_PURPOSE, AgentDefinition
from cairn.values import Value

if TYPE_CHECKING:
    from cairn.config.settings import Settings
    from cairn.extensions.commands import CommandFile
    from cairn.extensions.skills import Skill

__all__ = ["Catalog", "CatalogState"]

_log = get_logger("EXTENSIONS")
_Named = TypeVar("_Named", "CommandFile", "Skill", AgentDefinition)
MAX_FINGERPRINT_ENTRIES = 5000  # entries stat-ed to notice a change; beyond, changes wait


class CatalogState(Value):
    """What the folders held at one reading."""

    commands: tuple[CommandFile, ...] = ()
    skills: tuple[Skill, ...] = ()
    agents: tuple[AgentDefinition, ...] = (GENERAL_PURPOSE,)
    warnings: tuple[str, ...] = ()  # one per file skipped

    def skill(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name or s.title == name), None)

    def agent(self, name: str) -> AgentDefinition | None:
        return next((a for a in self.agents if a.name == name), None)


class Catalog(Value, frozen=False):
    project_root: Path
    cairn_home: Path
    home: Path | None
    command_imports: Sequence[Origin] = ("claude", "qwen")
    skill_imports: Sequence[Origin] = ("claude", "agents")
    agent_imports: Sequence[Origin] = ("claude", "qwen")
    state: CatalogState = field(default_factory=CatalogState)
    generation: int = 0  # grows each time the state changes
    _fingerprint: tuple[object, ...] | None = None
    _paths: tuple[str, ...] | None = None  # the folders' (their settings do not change)
    _warned: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def for_project(
        cls, project_root: Path, settings: Settings, *, cairn_home: Path, home: Path | None
    ) -> Catalog:
        return cls(
            project_root=project_root,
            cairn_home=cairn_home,
            home=home,
            command_imports=tuple(settings.commands.import_from),
            skill_imports=tuple(settings.skills.import_from),
            agent_imports=tuple(settings.agents.import_from),
        )

    def folders(self, kind: Kind) -> list[Folder]:
        imports = {
            "commands": self.command_imports,
            "skills": self.skill_imports,
            "agents": self.agent_imports,
        }[kind]
        return folders(
            kind,
            project_root=self.project_root,
            cairn_home=self.cairn_home,
            home=self.home,
            import_from=imports,
        )

    def refresh(self) -> bool:
        """Read the folders again if anything in them changed; True when the state did.
        Safe to call from several threads."""
        with self._lock:
            started = time.time_ns()
            inputs = self._fingerprint_now()
            fingerprint = inputs.stamps()
            if fingerprint == self._fingerprint:
                return False
            # A file changed within a timestamp's granularity may change again unseen: read
            # the folders again next time (cairn.config.file_stamps).
            self._fingerprint = fingerprint if inputs.settled(started) else None
            state = self._read()
            if state == self.state:
                return False
            self.state = state
            self.generation += 1
            return True

    def take_warnings(self) -> list[str]:
        """Warnings not given before (each skipped file is reported once per process)."""
        with self._lock:
            fresh = [w for w in self.state.warnings if w not in self._warned]
            self._warned.update(fresh)
            return fresh

    def first_time(self, warning: str) -> bool:
        """Whether ``warning`` is new to this process (and note it): say it only once."""
        with self._lock:
            if warning in self._warned:
                return False
            self._warned.add(warning)
            return True

    def _all_folders(self) -> list[Folder]:
        return [*self.folders("commands"), *self.folders("skills"), *self.folders("agents")]

    def _read(self) -> CatalogState:
        warnings: list[str] = []
        commands: list[CommandFile] = []
        skills: list[Skill] = []
        command_folders = _existing(self.folders("commands"))
        skill_folders = _existing(self.folders("skills"))
        if command_folders or skill_folders:  # their parsers are imported when there is a folder
            from cairn.extensions.commands import load_commands
            from cairn.extensions.skills import load_skills

            commands = _first_wins(command_folders, load_commands, warnings, "command")
            skills = _first_wins(skill_folders, load_skills, warnings, "skill")
        agents: list[AgentDefinition] = []
        agent_folders = _existing(self.folders("agents"))
        if agent_folders:
            from cairn.extensions.agents import load_agents

            agents = _first_wins(agent_folders, load_agents, warnings, "agent")
        if all(a.name != GENERAL_PURPOSE.name for a in agents):
            agents.append(GENERAL_PURPOSE)
        return CatalogState(tuple(commands), tuple(skills), tuple(agents), tuple(warnings))

    def _fingerprint_now(self) -> Inputs:
        """Everything under the folders, stamped (the folders are found once)."""
        if self._paths is None:
            self._paths = tuple(str(folder.path.absolute()) for folder in self._all_folders())
        inputs = Inputs(MAX_FINGERPRINT_ENTRIES, parents=False)
        for path in self._paths:
            inputs.tree(path, MAX_DEPTH)
        return inputs


def _existing(found: Iterable[Folder]) -> list[Folder]:
    """The folders that exist (a missing one holds nothing)."""
    return [folder for folder in found if folder.path.is_dir()]


def _first_wins(
    found_in: Iterable[Folder],
    load: Callable[[Folder], tuple[list[_Named], list[str]]],
    warnings: list[str],
    what: str,
) -> list[_Named]:
    kept: dict[str, _Named] = {}
    for folder in found_in:
        items, problems = load(folder)
        warnings.extend(problems)
        for item in items:
            first = kept.get(item.name.lower())
            if first is not None:
                _log.info(f"{what} {item.name} in {item.where} is hidden by {first.where}")
                continue
            kept[item.name.lower()] = item
    return list(kept.values())
