"""The runtime: what the sessions of one process and workspace share.

A front end creates one :class:`Runtime` (settings, the model provider with its connection pool,
the memory manager of each project) and asks it for sessions. The daemon and the ACP agent run
many sessions on one runtime; headless and the terminal UI run one. Front ends build it with
:mod:`cairn.session.startup` and end it with :meth:`Runtime.aclose`.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from cairn._version import __version__
from cairn.config.loader import Endpoint
from cairn.config.paths import cairn_home, project_root
from cairn.config.settings import Settings
from cairn.debug_log import get_logger
from cairn.ids import new_uuid
from cairn.llm import UsageLedger
from cairn.llm.types import Provider
from cairn.mcp.sources import may_configure_servers
from cairn.session.gate import OPEN_GATE, PermissionGate
from cairn.vocabulary.interaction import Frontend, NonInteractive

if TYPE_CHECKING:
    from cairn.extensions.catalog import Catalog
    from cairn.mcp.config import ServerConfig
    from cairn.mcp.manager import McpManager, SessionMcp
    from cairn.memory.manager import MemoryManager
    from cairn.recording.listing import SessionInfo
    from cairn.recording.reader import LoadedSession
    from cairn.recording.recorder import ChatRecorder
    from cairn.recording.store import SessionStore, SessionStores
    from cairn.session.models import ModelCatalog
    from cairn.session.session import Session
    from cairn.tools.base import CommandRunner, FileSystem
    from cairn.tools.sandbox import RunLater, SandboxPolicy

__all__ = ["Runtime", "SessionNotFound", "SessionOptions", "SessionUnreadable"]

_log = get_logger("SESSION")


class SessionNotFound(LookupError):
    """No recording of the session exists in this project."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f'No session found with ID "{session_id}".')
        self.session_id = session_id


class SessionUnreadable(SessionNotFound):
    """A recording exists but cannot be read; front ends answer it as they answer a missing one."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(session_id)
        self.args = (f'Session "{session_id}" cannot be resumed: {reason}',)


class SessionOptions(TypedDict, total=False):
    """How a front end opens a session (:meth:`Runtime.new_session`, :meth:`Runtime.load_session`).

    ``frontend`` answers its questions (default: nobody, :class:`NonInteractive`); ``cwd`` is
    where it runs (default: the runtime's); ``mcp_servers`` are its client's servers (ACP,
    daemon), which join the configured ones and win a name clash; ``extra_roots`` more folders
    its file tools may use; ``gate`` (open by default) says whether its permissions may be
    widened (:mod:`cairn.session.gate`): a closed one refuses an ``approval_mode`` wider than
    the settings' with :class:`~cairn.session.gate.WideningRefused`.
    """

    frontend: Frontend | None
    approval_mode: str | None
    cwd: Path | None
    fs: FileSystem | None
    mcp_servers: Sequence[ServerConfig]
    command_runner: CommandRunner | None
    extra_roots: Sequence[Path]
    gate: PermissionGate | None


class Runtime:
    def __init__(
        self,
        cwd: Path,
        settings: Settings,
        provider: Provider,
        *,
        endpoint: Endpoint | None = None,
        version: str = __version__,
        record_chats: bool = True,
        clock: Callable[[], float] = time.time,
        tenant: str | None = None,
        owns_provider: bool = True,
        session_stores: SessionStores | None = None,
        secrets: Sequence[str] = (),
        usage: UsageLedger | None = None,
    ) -> None:
        """``secrets``: values the commands cairn starts must not see, whatever variable
        holds them (see :meth:`hide_from_commands`)."""
        self.cwd = cwd.resolve()
        self.project_root = project_root(self.cwd)
        self.settings = settings
        self.provider = provider
        self.endpoint = endpoint
        self.version = version
        self.record_chats = record_chats
        self.clock = clock
        # A daemon tenant (`cairn serve --tenant-header`): its own memory and recordings.
        self.tenant = tenant
        self.mcp_warnings: list[str] = []
        # `cairn -p`: a turn's extraction is left to a worker process (session/extract_worker.py)
        self.extract_in_worker = False
        self._owns_provider = owns_provider  # a tenant's runtime shares its parent's
        if usage is None:  # usage by purpose, per session and per day (cairn.llm.ledger)
            usage = UsageLedger(cairn_home() / "usage" if record_chats else None, clock=clock)
            usage.watch(provider)
        self.usage = usage
        self._memory: dict[Path, MemoryManager] = {}
        self._background: set[asyncio.Task[object]] = set()
        self._sessions: weakref.WeakSet[Session] = weakref.WeakSet()
        self._warming: dict[Path, asyncio.Future[Any]] = {}
        self._mcp: McpManager | None = None
        self._mcp_servers: list[ServerConfig] | None = None
        self._catalogs: dict[Path, Catalog] = {}
        self._tenants: dict[str, Runtime] = {}
        self._models: ModelCatalog | None = None
        # Where sessions live (cairn.recording.store): files unless a daemon says otherwise.
        self._session_stores = session_stores
        self._store: SessionStore | None = None
        self._secrets = tuple(secrets)

    @classmethod
    def from_endpoint(
        cls,
        *,
        cwd: Path,
        settings: Settings,
        endpoint: Endpoint,
        record_chats: bool = True,
        connection_pools: int = 1,
    ) -> Runtime:
        """A runtime talking to ``endpoint``; ``connection_pools`` > 1 spreads the sessions'
        requests over that many HTTP connection pools (for many concurrent sessions)."""
        from cairn.llm.factory import create_provider

        provider = create_provider(endpoint, settings, pools=connection_pools)
        return cls(
            cwd=cwd,
            settings=settings,
            provider=provider,
            endpoint=endpoint,
            record_chats=record_chats,
        )

    # ----- memory -----

    @property
    def memory_enabled(self) -> bool:
        return self.settings.memory.enable_managed_auto_memory

    def memory_manager(self, root: Path | None = None) -> MemoryManager:
        """The memory manager of a project (one per project per process, shared by sessions)."""
        from cairn.memory.manager import MemoryManager

        # project_root is resolved already; resolving it again (a system call per path part)
        # on every call cost the daemon ~0.5 ms a turn with memory on.
        key = self.project_root if root is None else root.resolve()
        manager = self._memory.get(key)
        if manager is None:
            manager = MemoryManager(key, settings=self.settings, tenant=self.tenant)
            self._memory[key] = manager
        return manager

    def warm_memory(self) -> None:
        """Index the project's memory files in a thread while the user types (once a process).

        The memory store is not thread-safe: until the warm-up is over, every use of it waits
        in :meth:`memory_ready` (every turn does, but a user's prompt when the backend serves
        Recall meanwhile: see :mod:`cairn.memory.store.warm_up`).
        """
        if not self.memory_enabled or self.project_root in self._warming:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a synchronous caller): the first turn indexes
            return
        manager = self.memory_manager()
        task: asyncio.Future[Any] = manager.warm_up.start(search=manager.enabled)
        task.add_done_callback(_warm_up_done)
        self._warming[self.project_root] = task

    @property
    def memory_warming(self) -> bool:
        """The memory store is being indexed in another thread: do not touch it now."""
        task = self._warming.get(self.project_root)
        return task is not None and not task.done()

    async def memory_ready(self) -> None:
        """Wait for a running warm-up (never cancelled: a running thread cannot be stopped)."""
        task = self._warming.get(self.project_root)
        if task is not None and not task.done():
            await self.memory_manager().ready()  # starts indexing if it waits for a search

    # ----- models (the picker: cairn.session.models) -----

    @property
    def models(self) -> ModelCatalog:
        """The models sessions may switch to, and the provider serving each."""
        if self._models is None:
            from cairn.session.models import ModelCatalog

            catalog = ModelCatalog(self.settings, self.endpoint, self.provider, self.usage.watch)
            self._models = catalog
        return self._models

    # ----- MCP servers -----

    @property
    def mcp_servers(self) -> list[ServerConfig]:
        """The configured servers (settings and ``.mcp.json``), read once per runtime."""
        if self._mcp_servers is None:
            if not may_configure_servers(self.cwd, self.settings):
                self._mcp_servers = []  # nothing to read: cairn.mcp.config stays unimported
                return self._mcp_servers
            from cairn.mcp.config import collect_servers

            self._mcp_servers = collect_servers(self.cwd, self.settings, warnings=self.mcp_warnings)
        return self._mcp_servers

    def session_mcp(self, extra: Sequence[ServerConfig] = ()) -> SessionMcp | None:
        """A session's view of the servers: the shared configured ones plus ``extra`` (from
        its client). ``None`` when there are none: then the MCP SDK is never imported."""
        if not self.mcp_servers and not extra:
            return None
        from cairn.mcp.config import ProxySettings
        from cairn.mcp.manager import McpManager, SessionMcp

        environ = self.command_environment()  # a repository's server never sees the key
        # the model endpoint's proxy (the settings already lack an untrusted project's)
        proxy = ProxySettings(self.settings.proxy, dict(self.settings.env))
        if self._mcp is None and self.mcp_servers:
            self._mcp = McpManager(
                self.mcp_servers, cwd=self.cwd, environ=environ, proxy_settings=proxy
            )
        return SessionMcp(self._mcp, extra, cwd=self.cwd, environ=environ, proxy_settings=proxy)

    def command_environment(self) -> dict[str, str]:
        """What the commands cairn starts (shell commands, hooks, stdio MCP servers) run with:
        cairn's environment without its secrets (the keys in use found by value too)."""
        from cairn.tools.environment import settings_command_environment

        key = self.endpoint.api_key if self.endpoint is not None else None
        return settings_command_environment(self.settings, key, secrets=self._secrets)

    def hide_from_commands(self, *values: str | None) -> None:
        """Leave ``values`` (a daemon's token or database address, given by flag) out of the
        environment of the commands this runtime and its tenants start, whatever variable
        holds them: before the first session."""
        self._secrets += tuple(value for value in values if value)

    def sandbox_policy(
        self, workspace: Path, run_later: Callable[[], Sequence[RunLater]] = tuple
    ) -> SandboxPolicy | None:
        """How shell commands run in ``workspace`` are fenced (:mod:`cairn.tools.sandbox`): as
        the settings say, and for a daemon tenant always, with every tenant's folders hidden
        and no network (:mod:`cairn.session.tenancy`). ``run_later``: what cairn runs outside
        the sandbox (hooks, stdio MCP servers), asked only when there is a sandbox."""
        if self.tenant is not None:
            from cairn.session.tenancy import tenant_sandbox_policy

            return tenant_sandbox_policy(self.settings, workspace, run_later=run_later())
        from cairn.tools.sandbox import sandbox_policy, sandbox_requested

        if not sandbox_requested(self.settings.tools.sandbox):
            return None
        return sandbox_policy(
            self.settings.tools.sandbox, workspace=workspace, run_later=run_later()
        )

    # ----- commands, skills and agents from files (cairn.extensions) -----

    def extensions(self) -> Catalog:
        """The project's command, skill and agent files (one catalog per project and process,
        read again by :meth:`Catalog.refresh` when they change)."""
        catalog = self._catalogs.get(self.project_root)
        if catalog is None:
            from cairn.config.paths import cairn_home
            from cairn.extensions.catalog import Catalog

            catalog = Catalog.for_project(
                self.project_root, self.settings, cairn_home=cairn_home(), home=_home()
            )
            self._catalogs[self.project_root] = catalog
        return catalog

    # ----- tenants (#15): one runtime per daemon tenant, sharing the provider -----

    def for_tenant(self, tenant: str, *, cwd: Path | None = None) -> Runtime:
        """The runtime of a daemon tenant (made on first use, closed with this one): the same
        settings and provider (one connection pool), its own memory and recordings; ``cwd``:
        its own workspace (``cairn serve --workspace-root``), created if missing. A name that
        is not a tenant's (:func:`cairn.memory.store.backend.tenant_problem`: lower-case, one
        folder name) is a :class:`ValueError`."""
        runtime = self._tenants.get(tenant)
        if runtime is None:
            from cairn.memory.store.backend import tenant_problem

            problem = tenant_problem(tenant)
            if problem is not None:
                raise ValueError(problem)
            if cwd is not None:
                cwd.mkdir(mode=0o700, exist_ok=True)
            runtime = Runtime(
                cwd=cwd or self.cwd,
                settings=self.settings,
                provider=self.provider,
                endpoint=self.endpoint,
                version=self.version,
                record_chats=self.record_chats,
                clock=self.clock,
                tenant=tenant,
                owns_provider=False,
                session_stores=self._session_stores,
                secrets=self._secrets,
                usage=self.usage,  # the provider's answers are counted once
            )
            self._tenants[tenant] = runtime
        return runtime

    # ----- sessions -----

    def use_session_stores(self, stores: SessionStores) -> None:
        """Keep sessions in ``stores`` (a daemon's database) instead of files: before any
        session is opened (tenants' runtimes made later get it too)."""
        if self._store is not None or self._tenants:
            raise RuntimeError("the session store is chosen before the first session opens")
        self._session_stores = stores

    @property
    def sessions(self) -> SessionStore:
        """Where this runtime's sessions are recorded (:mod:`cairn.recording.store`)."""
        if self._store is None:
            if self._session_stores is None:
                from cairn.recording.store.files import file_stores

                self._store = file_stores(self.project_root, self.tenant)
            else:
                self._store = self._session_stores(self.project_root, self.tenant)
        return self._store

    @property
    def chats_dir(self) -> Path:
        """The folder of this runtime's recordings on this machine (the files store's)."""
        from cairn.recording.store.files import tenant_chats_dir

        return tenant_chats_dir(self.project_root, self.tenant)

    def chat_recorder(
        self, session_id: str, cwd: Path, loaded: LoadedSession | None
    ) -> ChatRecorder | None:
        """Where a session's conversation is recorded (``None`` when chats are not recorded);
        ``cwd``: the session's own folder, which ``session/list`` filters by."""
        if not self.record_chats:
            return None
        return self.sessions.recorder(
            session_id,
            cwd=cwd,
            version=self.version,
            parent_uuid=loaded.last_uuid if loaded else None,
        )

    def new_session(
        self, *, session_id: str | None = None, **options: Unpack[SessionOptions]
    ) -> Session:
        """A new session (:class:`SessionOptions` says how it opens)."""
        return self._open(session_id or new_uuid(), None, options)

    def load_session(self, session_id: str, **options: Unpack[SessionOptions]) -> Session:
        """Resume a recorded session; its model history is rebuilt from the recording."""
        return self.open_loaded(self.read_session(session_id), **options)

    def read_session(self, session_id: str) -> LoadedSession:
        """A recorded session's conversation (blocking: the store reads it);
        :class:`SessionNotFound` or :class:`SessionUnreadable` when it cannot be."""
        from cairn.recording.reader import SessionLoadError

        if not self.session_exists(session_id):
            raise SessionNotFound(session_id)
        try:
            loaded = self.sessions.load(session_id)
        except SessionLoadError as exc:
            raise SessionUnreadable(session_id, str(exc)) from None
        for warning in loaded.warnings:
            _log.warning(f"session {session_id}: {warning}")
        return loaded

    def open_loaded(self, loaded: LoadedSession, **options: Unpack[SessionOptions]) -> Session:
        """Resume a session from its conversation as :meth:`read_session` returned it."""
        return self._open(loaded.session_id, loaded, options)

    def _open(
        self, session_id: str, loaded: LoadedSession | None, options: SessionOptions
    ) -> Session:
        from cairn.session.session import Session

        if unknown := options.keys() - SessionOptions.__optional_keys__:
            raise TypeError(f"unknown session options: {', '.join(sorted(unknown))}")
        session = Session(
            self,
            session_id=session_id,
            frontend=options.get("frontend") or NonInteractive(),
            approval_mode=options.get("approval_mode"),
            cwd=options.get("cwd") or self.cwd,
            fs=options.get("fs"),
            loaded=loaded,
            mcp_servers=options.get("mcp_servers", ()),
            command_runner=options.get("command_runner"),
            extra_roots=options.get("extra_roots", ()),
            gate=options.get("gate") or OPEN_GATE,
        )
        self._sessions.add(session)
        self.warm_memory()
        return session

    def session_exists(self, session_id: str) -> bool:
        """A recording of ``session_id`` exists in this project."""
        return self.sessions.exists(session_id)

    def list_sessions(self, limit: int = 50) -> Sequence[SessionInfo]:
        return self.sessions.list(limit=limit)

    def latest_session_id(self) -> str | None:
        latest = self.sessions.list(limit=1)
        return latest[0].session_id if latest else None

    # ----- background work -----

    def spawn(self, coro: Coroutine[Any, Any, object], *, name: str) -> asyncio.Task[object]:
        """Run best-effort background work that must never fail or block a turn."""
        task: asyncio.Task[object] = asyncio.ensure_future(coro)
        task.set_name(name)
        self._background.add(task)

        def done(t: asyncio.Task[object]) -> None:
            self._background.discard(t)
            if not t.cancelled() and t.exception() is not None:
                _log.warning(f"background task {name} failed: {t.exception()!r}")

        task.add_done_callback(done)
        return task

    async def drain_memory(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds in all for the memory work the turns scheduled
        (Extract, not Dream: see :meth:`aclose`); True when none is left. Never raises."""
        waits = [m.drain(timeout, extract_only=True) for m in self._memory.values()]
        results = await asyncio.gather(*waits, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):  # memory is best-effort: never fail a shutdown
                _log.warning(f"waiting for memory work failed: {result!r}")
        return all(result is True for result in results)

    async def aclose(self, *, memory_wait: float = 0.0) -> None:
        """Shut down: what every front end does on its way out, in this order.

        Close the sessions still open (their turns cancelled, recordings flushed); stop each
        project's memory warm-up, waiting only for a pull under way (one still getting ready,
        connecting or waiting for another writer's lock never begins, and an indexing under
        way is given up, nothing of it saved: :mod:`cairn.memory.store.warm_up`); give the
        extractions their turns scheduled ``memory_wait`` seconds to finish (one cut short
        moves no cursor, and the memory manager leaves it to the project's next session);
        cancel all other background work (a Dream, which runs again next time); persist each
        project's memory index once, after any warm-up finished, so the next process starts
        warm; close the provider's connections.
        """
        tenants = [t.aclose(memory_wait=memory_wait) for t in self._tenants.values()]
        for failure in await asyncio.gather(*tenants, return_exceptions=True):  # waits overlap
            if isinstance(failure, Exception):
                _log.warning(f"closing a tenant's runtime failed: {failure!r}")
        for session in list(self._sessions):
            try:
                await session.close()
            except Exception as exc:  # one broken session must not keep the others open
                _log.warning(f"closing session {session.id} failed: {exc!r}")
        for manager in self._memory.values():
            manager.warm_up.stop()  # not begun: never will; indexing: gives up
        for warming in list(self._warming.values()):
            await asyncio.wait({warming})  # the index is saved below: not while it is built
        if self._mcp is not None:  # before the memory wait: Extract and Dream use no MCP tools
            await self._mcp.aclose()  # stdio servers: stdin closed, then SIGTERM, then SIGKILL
        if memory_wait > 0:
            await self.drain_memory(memory_wait)
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        for manager in self._memory.values():
            try:
                manager.close()  # persists the Recall index so the next process starts warm
            except Exception as exc:
                _log.warning(f"closing the memory manager failed: {exc!r}")
        if self._models is not None:
            await self._models.aclose()
        if self._owns_provider:
            await self.provider.aclose()


def _home() -> Path | None:
    try:
        return Path.home()
    except RuntimeError:  # no home directory (some containers): no ~/.claude to import
        return None


def _warm_up_done(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.warning(f"indexing memory in the background failed: {task.exception()!r}")
