"""The ACP agent: protocol methods mapped onto the shared session runtime.

Every turn runs in :meth:`cairn.session.session.Session.prompt`; this module only translates
requests into runtime calls and session events into notifications (see :mod:`cairn.acp.channel`
and :mod:`cairn.acp.updates`). Sessions of several projects can share the process: each project
(git root of the session's ``cwd``) gets its own :class:`Runtime`.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp.exceptions import RequestError
from acp.interfaces import Client
from acp.meta import PROTOCOL_VERSION
from acp.schema import (
    AuthenticateResponse,
    ClientCapabilities,
    CloseSessionResponse,
    Implementation,
    ListSessionsResponse,
    LoadSessionResponse,
    PromptResponse,
    ResumeSessionResponse,
    SessionInfo,
    SessionModeState,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    Usage,
)
from pydantic import BaseModel

from cairn._version import __version__
from cairn.acp.channel import SessionChannel
from cairn.acp.frontend import AcpFileSystem, AcpFrontend
from cairn.acp.requests import OutgoingRequests
from cairn.acp.terminal import AcpTerminals
from cairn.acp.updates import config_options_model, mode_state_model
from cairn.config.loader import Endpoint
from cairn.config.paths import chats_dir, project_root
from cairn.config.settings import APPROVAL_MODES, Settings
from cairn.debug_log import bind_session, get_logger, set_process_session
from cairn.exit_codes import ExitCode
from cairn.recording.listing import list_sessions
from cairn.recording.reader import LoadedSession, SessionLoadError, recorded_approval_mode
from cairn.session.attachments import AttachmentError
from cairn.session.menus import (
    MODE_OPTION_ID,
    MODEL_OPTION_ID,
    commands_update,
    mode_state,
    session_config_options,
)
from cairn.session.models import ModelSwitchError
from cairn.session.runtime import Runtime, SessionNotFound
from cairn.session.session import PromptRequest
from cairn.session.startup import Startup, StartupError, load_startup
from cairn.tools.shell import TERMINAL_OUTPUT_BYTES
from cairn.vocabulary.events import TurnResult

if TYPE_CHECKING:
    from cairn.mcp.config import ServerConfig

__all__ = [
    "AUTH_METHOD_ID",
    "RATE_LIMIT_CODE",
    "SESSION_LIST_PAGE_SIZE",
    "AgentOptions",
    "CairnAgent",
]

AUTH_METHOD_ID = "cairn-openai-compatible"  # the one auth method advertised when none is set up
AUTH_REQUIRED_CODE = -32000  # ACP: authentication required
INVALID_PARAMS_CODE = -32602  # JSON-RPC: invalid params (an unknown session, a bad cwd)
INTERNAL_ERROR_CODE = -32603  # JSON-RPC: internal error (a failed turn, with data.details)
RATE_LIMIT_CODE = 429  # the reference answers a rate-limited turn with this error code
SESSION_LIST_PAGE_SIZE = 50  # sessions per session/list page
LOOP_STOPPED_MESSAGE = (
    "Tool-call loop protection stopped this turn: the model repeated itself. "
    "Try a different approach on the next turn."
)
TEXT_LOOP = "chanting_identical_sentences"  # loop protection cut an answer repeating itself
TEXT_LOOP_MESSAGE = (
    "Loop protection stopped the answer: the model kept repeating the same text. "
    "Try a different approach on the next turn."
)
_log = get_logger("ACP")


@dataclass
class AgentOptions:
    """What the process was started with (``cairn --acp`` flags and the loaded settings)."""

    cwd: Path
    settings: Settings
    endpoint: Endpoint | None
    auth_error: str | None = None  # why there is no endpoint
    model: str | None = None
    approval_mode: str | None = None


class CairnAgent:
    """Implements the SDK's ``Agent`` protocol; the SDK routes JSON-RPC calls to these methods."""

    def __init__(self, options: AgentOptions, *, requests: OutgoingRequests | None = None) -> None:
        self._options = options
        self._requests = requests  # None: requests are never withdrawn (tests' in-process use)
        self._client: Client | None = None
        self._capabilities = ClientCapabilities()
        self._runtimes: dict[Path, Runtime] = {}
        self._channels: dict[str, SessionChannel] = {}
        self._tasks: set[asyncio.Task[object]] = set()

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    # ----- initialize and authenticate -----

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **_meta: Any,
    ) -> dict[str, Any]:
        self._capabilities = client_capabilities or ClientCapabilities()
        if self._options.endpoint is not None:
            # While the client reads the answer: the provider's pool, then its first connection.
            self._after_response(_call(self._main_runtime))
        return {  # wire JSON: the start path builds none of the SDK's response models
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "mcpCapabilities": {"http": True, "sse": True},
                "promptCapabilities": {
                    "image": self._options.settings.model.supports_images,
                    "audio": False,
                    "embeddedContext": True,
                },
                "sessionCapabilities": {
                    "list": {},
                    "resume": {},
                    "close": {},
                    "additionalDirectories": {},
                },
            },
            "authMethods": self._auth_methods(),
            "agentInfo": {"name": "cairn", "title": "cairn", "version": __version__},
        }

    def _auth_methods(self) -> list[dict[str, str]]:
        if self._options.endpoint is not None:
            return []
        method = {"id": AUTH_METHOD_ID, "name": "OpenAI-compatible endpoint"}
        if self._options.auth_error is not None:
            method["description"] = self._options.auth_error
        return [method]

    async def authenticate(self, method_id: str, **_meta: Any) -> AuthenticateResponse:
        """Re-read the settings and the environment; succeeds once an endpoint is configured.
        ``method_id`` must be the one method cairn advertises (any other is invalid params)."""
        if method_id != AUTH_METHOD_ID:
            raise RequestError.invalid_params(
                {"details": f"unknown auth method {method_id!r}; cairn offers {AUTH_METHOD_ID!r}"}
            )
        if self._options.endpoint is None:
            try:
                startup = self._startup(self._options.cwd)
            except StartupError as exc:
                raise _auth_required(str(exc)) from None
            self._options.settings, self._options.endpoint = startup.settings, startup.endpoint
            self._options.auth_error = None
            self._main_runtime()
        return AuthenticateResponse()

    # ----- sessions -----

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **_meta: Any,
    ) -> dict[str, Any]:
        runtime = self._runtime_for(cwd)
        servers = _client_servers(mcp_servers, "session/new")
        roots = _extra_roots(additional_directories)
        channel = self._open(
            runtime, session_id=None, cwd=Path(cwd), mcp_servers=servers, extra_roots=roots
        )
        self._after_response(self._announce(channel))
        await runtime.models.load()  # ``model.available: "auto"``: read once per process
        return {  # wire JSON, as initialize's answer
            "sessionId": channel.id,
            "modes": mode_state(channel.session.approval_mode, APPROVAL_MODES),
            "configOptions": session_config_options(channel.session),
        }

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **_meta: Any,
    ) -> LoadSessionResponse:
        runtime = self._runtime_for(cwd)
        servers = _client_servers(mcp_servers, "session/load")
        roots = _extra_roots(additional_directories)
        earlier = self._channels.pop(session_id, None)
        if earlier is not None:
            await earlier.close()
        channel = self._open(
            runtime, session_id=session_id, cwd=Path(cwd), mcp_servers=servers, extra_roots=roots
        )
        loaded = channel.session.loaded
        if loaded is not None:
            await self._restore_mode(channel, loaded)
            await channel.replay(loaded.items)
        self._after_response(self._announce(channel))
        await runtime.models.load()
        return LoadSessionResponse(modes=self._modes(channel), config_options=_config(channel))

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **_meta: Any,
    ) -> ResumeSessionResponse:
        """Reattach to a session without replaying it (open here already: as it is)."""
        runtime = self._runtime_for(cwd)
        channel = self._channels.get(session_id)
        if channel is None:
            servers = _client_servers(mcp_servers, "session/resume")
            roots = _extra_roots(additional_directories)
            channel = self._open(
                runtime,
                session_id=session_id,
                cwd=Path(cwd),
                mcp_servers=servers,
                extra_roots=roots,
            )
            if channel.session.loaded is not None:
                await self._restore_mode(channel, channel.session.loaded)
            self._after_response(self._announce(channel))
        await runtime.models.load()
        return ResumeSessionResponse(modes=self._modes(channel), config_options=_config(channel))

    async def close_session(self, session_id: str, **_meta: Any) -> CloseSessionResponse:
        """Cancel the session's running turn and free it (it stays recorded, to load later)."""
        channel = self._channels.pop(session_id, None)
        if channel is None:
            raise _session_not_found(session_id, "it is not open in this connection")
        channel.cancel()
        await channel.close()
        return CloseSessionResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **_meta: Any
    ) -> ListSessionsResponse:
        folder = Path(cwd) if cwd else self._options.cwd
        if not folder.is_absolute():
            raise RequestError.invalid_params({"details": f"cwd must be absolute: {cwd}"})
        start = _cursor_offset(cursor)
        root = project_root(folder)
        infos = await asyncio.to_thread(
            list_sessions,
            chats_dir(root),
            limit=start + SESSION_LIST_PAGE_SIZE + 1,
            cwd=folder.resolve() if cwd else None,  # only the sessions that ran there
        )
        page = infos[start : start + SESSION_LIST_PAGE_SIZE]
        more = len(infos) > start + SESSION_LIST_PAGE_SIZE
        return ListSessionsResponse(
            sessions=[
                SessionInfo(
                    session_id=info.session_id,
                    cwd=str(info.cwd or root),
                    title=info.title or info.first_prompt or None,
                    updated_at=info.mtime.astimezone(_dt.UTC).isoformat(),
                )
                for info in page
            ],
            next_cursor=str(start + SESSION_LIST_PAGE_SIZE) if more else None,
        )

    async def set_session_mode(
        self, mode_id: str, session_id: str, **_meta: Any
    ) -> SetSessionModeResponse:
        channel = self._channel(session_id)
        if mode_id not in APPROVAL_MODES:
            raise RequestError.invalid_params(
                {"details": f"unknown mode {mode_id!r}; use one of {', '.join(APPROVAL_MODES)}"}
            )
        await channel.session.set_approval_mode(mode_id)
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **_meta: Any
    ) -> SetSessionConfigOptionResponse:
        """The editor's model and approval-mode menus (``configOptions``)."""
        channel = self._channel(session_id)
        if config_id not in (MODEL_OPTION_ID, MODE_OPTION_ID):
            raise RequestError.invalid_params({"details": f"unknown config option {config_id!r}"})
        if not isinstance(value, str):
            raise RequestError.invalid_params({"details": f"{config_id} takes a value id"})
        try:
            if config_id == MODEL_OPTION_ID:
                await channel.session.set_model(value)
            else:
                await channel.session.set_approval_mode(value)
        except (ModelSwitchError, ValueError) as exc:
            raise RequestError.invalid_params({"details": str(exc)}) from None
        return SetSessionConfigOptionResponse(config_options=_config(channel))

    # ----- turns -----

    async def prompt(self, prompt: list[Any], session_id: str, **_meta: Any) -> PromptResponse:
        channel = self._channel(session_id)
        blocks = [_block_payload(block) for block in prompt]
        try:
            attachments = await channel.session.attach(blocks)
        except AttachmentError as exc:
            raise RequestError.invalid_params({"details": str(exc)}) from None
        if attachments.empty:
            raise RequestError.invalid_params({"details": "the prompt is empty"})
        return await self._turn(channel, PromptRequest.attaching(attachments))

    async def cancel(self, session_id: str, **_meta: Any) -> None:
        channel = self._channels.get(session_id)
        if channel is not None:
            channel.cancel()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """``_cairn/retry``, ``_cairn/continue``, ``_cairn/recap`` and ``_cairn/rewind`` (the
        SDK strips the ``_``)."""
        if method == "cairn/rewind":
            return await self._rewind(params)
        if method == "cairn/recap":
            channel = self._channel(_session_id_param(params))
            with bind_session(channel.id):
                recap = await channel.session.recap_outcome()
            answer: dict[str, Any] = {"sessionId": channel.id, "recap": recap.text}
            if recap.text is None and recap.reason:
                answer["reason"] = recap.reason  # too little said, the model too slow, ...
            return answer
        if method in ("cairn/retry", "cairn/continue"):
            channel = self._channel(_session_id_param(params))
            retry = method == "cairn/retry"
            request = PromptRequest(text="", retry=retry, continue_turn=not retry)
            response = await self._turn(channel, request)
            return response.model_dump(mode="json", by_alias=True, exclude_none=True)
        raise RequestError.method_not_found(f"_{method}")

    async def _rewind(self, params: dict[str, Any]) -> dict[str, Any]:
        from cairn.session.rewind import RewindError
        from cairn.session.rewind_requests import answer_rewind_request, parse_rewind_request

        channel = self._channel(_session_id_param(params))
        try:
            request = parse_rewind_request(params)
        except ValueError as exc:
            raise RequestError.invalid_params({"details": str(exc)}) from None
        try:
            with bind_session(channel.id):
                return await answer_rewind_request(channel.session, request)
        except RewindError as exc:
            raise RequestError.invalid_request({"details": f"cannot rewind: {exc}"}) from None

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        _log.debug(f"ignored extension notification _{method}")

    async def _turn(self, channel: SessionChannel, request: PromptRequest) -> PromptResponse:
        result = await channel.run(request)
        if result is None:
            return PromptResponse(stop_reason="cancelled")
        return _prompt_response(result)

    # ----- shutdown -----

    async def aclose(self, *, memory_wait: float) -> None:
        """Close every session, then every project's runtime (memory gets ``memory_wait`` s)."""
        for task in list(self._tasks):
            task.cancel()
        for channel in list(self._channels.values()):
            await channel.close()
        self._channels.clear()
        # Concurrently: the memory wait is one bound for the process, not one per project.
        await asyncio.gather(*(r.aclose(memory_wait=memory_wait) for r in self._runtimes.values()))

    # ----- helpers -----

    def _main_runtime(self) -> Runtime:
        root = project_root(self._options.cwd)
        runtime = self._runtimes.get(root)
        if runtime is None:
            options = self._options
            runtime = Startup(options.cwd, options.settings, options.endpoint).open_runtime()
            self._runtimes[root] = runtime
            _warm_provider(runtime)
        return runtime

    def _runtime_for(self, cwd: str) -> Runtime:
        folder = Path(cwd)
        if not folder.is_absolute() or not folder.is_dir():
            raise RequestError.invalid_params(
                {"details": f"cwd must be an absolute path to a folder: {cwd}"}
            )
        if self._options.endpoint is None:
            raise _auth_required(self._options.auth_error or "No model endpoint is configured.")
        main = self._main_runtime()
        root = project_root(folder)
        if root == main.project_root:
            return main
        runtime = self._runtimes.get(root)
        if runtime is None:
            runtime = self._project_runtime(folder)
            self._runtimes[root] = runtime
        return runtime

    def _project_runtime(self, folder: Path) -> Runtime:
        """A runtime for another project, with that project's settings."""
        try:
            runtime = self._startup(folder).open_runtime()
        except StartupError as exc:
            if exc.exit_code == ExitCode.NO_AUTH:
                raise _auth_required(str(exc)) from None
            raise RequestError.invalid_params({"details": str(exc)}) from None
        _warm_provider(runtime)
        return runtime

    def _startup(self, folder: Path) -> Startup:
        """The settings and endpoint of ``folder`` (the process's telemetry is set already)."""
        return load_startup(folder, model=self._options.model, configure_telemetry=False)

    def _open(
        self,
        runtime: Runtime,
        *,
        session_id: str | None,
        cwd: Path,
        mcp_servers: Sequence[ServerConfig] = (),
        extra_roots: Sequence[Path] = (),
    ) -> SessionChannel:
        client = self._require_client()
        sid = session_id or _new_id()
        holder: list[SessionChannel] = []
        frontend = AcpFrontend(
            client,
            sid,
            self._capabilities,
            question_call_id=lambda: holder[0].question_call_id if holder else None,
            on_disconnect=lambda: holder[0].session.cancel("client_gone") if holder else None,
            requests=self._requests,
        )
        fs_caps = self._capabilities.fs
        reads, writes = (
            bool(fs_caps and fs_caps.read_text_file),
            bool(fs_caps and fs_caps.write_text_file),
        )
        fs = AcpFileSystem(client, sid, read=reads, write=writes) if reads or writes else None
        command_runner = (
            AcpTerminals(client, sid, output_bytes=TERMINAL_OUTPUT_BYTES, requests=self._requests)
            if self._capabilities.terminal
            else None
        )
        mode = self._options.approval_mode
        try:
            if session_id is None:
                session = runtime.new_session(
                    frontend=frontend,
                    session_id=sid,
                    approval_mode=mode,
                    cwd=cwd,
                    fs=fs,
                    mcp_servers=mcp_servers,
                    command_runner=command_runner,
                    extra_roots=extra_roots,
                )
            else:
                session = runtime.load_session(
                    session_id,
                    cwd=cwd,
                    frontend=frontend,
                    approval_mode=mode,
                    fs=fs,
                    mcp_servers=mcp_servers,
                    command_runner=command_runner,
                    extra_roots=extra_roots,
                )
        except SessionNotFound as exc:
            raise _session_not_found(sid, str(exc)) from None
        except SessionLoadError as exc:
            raise RequestError.invalid_params({"sessionId": sid, "details": str(exc)}) from None
        channel = SessionChannel(session, runtime, client)
        holder.append(channel)
        self._channels[sid] = channel
        set_process_session(sid)
        return channel

    def _channel(self, session_id: str) -> SessionChannel:
        channel = self._channels.get(session_id)
        if channel is None:
            raise _session_not_found(session_id, "create it with session/new or session/load")
        return channel

    async def _restore_mode(self, channel: SessionChannel, loaded: LoadedSession) -> None:
        """The approval mode the session last had, unless ``--approval-mode`` names one."""
        recorded = recorded_approval_mode(loaded)
        if self._options.approval_mode is not None or recorded not in APPROVAL_MODES:
            return
        if recorded is not None and recorded != channel.session.approval_mode:
            await channel.session.set_approval_mode(recorded)

    def _modes(self, channel: SessionChannel) -> SessionModeState:
        return mode_state_model(mode_state(channel.session.approval_mode, APPROVAL_MODES))

    def _require_client(self) -> Client:
        if self._client is None:
            raise RequestError.internal_error({"details": "no client connection"})
        return self._client

    def _after_response(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` once the current request's response has been written."""
        task: asyncio.Task[object] = asyncio.ensure_future(_after_yield(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)
        # Cancelled before it ran (the client left at once): close ``coro``, or Python warns on
        # stderr that it was never awaited. Closing a finished coroutine does nothing.
        task.add_done_callback(lambda _task: coro.close())

    async def _announce(self, channel: SessionChannel) -> None:
        await channel.send(commands_update(channel.session.command_infos()))
        resume = channel.session.resume_request()
        if resume is not None:  # a question it was asking: asked again, its answer continues
            channel.run_in_background(resume, name="restored-question")


async def _call(function: Callable[[], object]) -> None:
    function()


async def _after_yield(coro: Coroutine[Any, Any, None]) -> None:
    await asyncio.sleep(0)
    await coro


def _log_failure(task: asyncio.Task[object]) -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.warning(f"{task.get_name()} failed: {task.exception()!r}")


def _config(channel: SessionChannel) -> Any:
    return config_options_model(session_config_options(channel.session))


def _warm_provider(runtime: Runtime) -> None:
    runtime.spawn(runtime.provider.warm_up(), name="provider-warm-up")


def _prompt_response(result: TurnResult) -> PromptResponse:
    if result.stop_reason == "error":
        raise _turn_error(result)
    meta: dict[str, Any] | None = None
    if result.loop_type == TEXT_LOOP:  # the answer was cut, not a call refused: say so, no error
        meta = {"cairn": {"loopType": result.loop_type, "message": TEXT_LOOP_MESSAGE}}
    elif result.loop_stopped:
        raise RequestError(
            -32603,
            LOOP_STOPPED_MESSAGE,
            {"code": "LOOP_DETECTED", "errorKind": "loop_detected", "loopType": result.loop_type},
        )
    elif result.finish_reason is not None:
        meta = {"cairn": {"finishReason": result.finish_reason}}
    usage = result.usage
    return PromptResponse(
        field_meta=meta,
        stop_reason=result.stop_reason,
        usage=Usage(
            total_tokens=max(usage.total_tokens, 0),
            input_tokens=max(usage.input_tokens, 0),
            output_tokens=max(usage.output_tokens, 0),
            thought_tokens=usage.reasoning_tokens or None,
            cached_read_tokens=usage.cached_tokens or None,
        )
        if result.requests
        else None,
    )


def _turn_error(result: TurnResult) -> RequestError:
    """A failed turn's error: the provider's message and HTTP status in ``data``, so an
    editor can say what went wrong (a rate limit keeps the reference's code 429)."""
    details = result.error or "The model request failed."
    data: dict[str, Any] = {"details": details, "status": result.error_status}
    if result.error_status == RATE_LIMIT_CODE:
        data["errorKind"] = "rate_limit"
        return RequestError(RATE_LIMIT_CODE, f"Rate limit exceeded: {details}", data)
    data["errorKind"] = "api_error"
    return RequestError(INTERNAL_ERROR_CODE, f"The model request failed: {details}", data)


def _auth_required(details: str) -> RequestError:
    message = f"Authentication required: {details}"
    return RequestError(AUTH_REQUIRED_CODE, message, {"details": details})


def _session_not_found(session_id: str, details: str) -> RequestError:
    return RequestError(
        INVALID_PARAMS_CODE, "Session not found", {"sessionId": session_id, "details": details}
    )


def _session_id_param(params: Mapping[str, Any]) -> str:
    value = params.get("sessionId")
    if not isinstance(value, str) or not value:
        raise RequestError.invalid_params({"details": "`sessionId` (a string) is required"})
    return value


def _cursor_offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise RequestError.invalid_params({"details": f"invalid cursor {cursor!r}"})
    return int(cursor)


def _block_payload(block: Any) -> Any:
    """A content block in its wire shape (the SDK hands the agent models)."""
    if isinstance(block, BaseModel):
        return block.model_dump(mode="json", by_alias=True, exclude_none=True)
    return block


def _extra_roots(directories: list[str] | None) -> list[Path]:
    """``additionalDirectories``: absolute paths of existing folders, else invalid params."""
    roots: list[Path] = []
    for raw in directories or []:
        path = Path(raw)
        if not path.is_absolute() or not path.is_dir():
            raise RequestError.invalid_params(
                {"details": f"additionalDirectories: not an absolute path to a folder: {raw}"}
            )
        roots.append(path)
    return roots


def _client_servers(servers: list[Any] | None, method: str) -> list[ServerConfig]:
    """The editor's MCP servers; a malformed entry is an invalid-params error naming it."""
    if not servers:
        return []  # most editors send none: the MCP configuration code is not imported
    from cairn.mcp.config import McpConfigError, servers_from_client

    try:
        return servers_from_client(servers, source=f"ACP {method}")
    except McpConfigError as exc:
        raise RequestError.invalid_params({"mcpServers": str(exc)}) from None


def _new_id() -> str:
    import uuid

    return str(uuid.uuid4())
