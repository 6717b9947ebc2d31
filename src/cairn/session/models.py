"""The model picker: the models a session may switch to, and the provider serving each.

``model.available`` lists them (names, or entries naming another endpoint), or is ``"auto"``:
the main endpoint's ``GET /models``, read once per process. Every front end offers the same
list (``/model``, the ACP model menu, the daemon's model route) through
:meth:`cairn.session.session.Session.model_options`, and switches through
:meth:`~cairn.session.session.Session.set_model`. A switch is the session's own: the other
sessions of a runtime keep their model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace

from cairn.config.endpoint import Endpoint, NoAuthError, choice_endpoint
from cairn.config.settings import ModelChoice, Settings
from cairn.debug_log import get_logger
from cairn.llm.types import Provider

__all__ = ["LIST_TIMEOUT", "ModelCatalog", "ModelOption", "ModelSwitchError"]

LIST_TIMEOUT = 10.0  # seconds ``"auto"`` waits for the endpoint's model list
_log = get_logger("MODELS")


class ModelSwitchError(ValueError):
    """The session cannot switch to the model (a blank name, an endpoint without its key)."""


@dataclass(frozen=True)
class ModelOption:
    """One model a menu offers. ``choice`` is its ``model.available`` entry when that entry
    names its own endpoint (``None``: the main endpoint serves it)."""

    id: str
    name: str
    description: str = ""
    choice: ModelChoice | None = None
    listed: bool = True  # False: named by hand (``/model x``), not in the configured list
    unavailable: str | None = None  # why it cannot be chosen (its endpoint's key is not set)

    @property
    def shown_name(self) -> str:
        """The name a menu shows: marked when it cannot be chosen."""
        return f"{self.name} (not available)" if self.unavailable else self.name

    @property
    def shown_description(self) -> str:
        """The description a menu shows: why it cannot be chosen, when it cannot."""
        if self.unavailable:
            return f"Cannot be chosen: {self.unavailable}"
        return self.description


class ModelCatalog:
    """The models of one runtime, and one provider per endpoint they are served from."""

    def __init__(
        self,
        settings: Settings,
        endpoint: Endpoint | None,
        provider: Provider,
        watch: Callable[[Provider], None] = lambda provider: None,
    ) -> None:
        self._settings = settings
        self._watch = watch  # the usage ledger counts every endpoint's answers
        self._endpoint = endpoint
        self._provider = provider
        self._listed: list[ModelOption] | None = None  # ``"auto"``: what the endpoint listed
        self._loading: asyncio.Task[None] | None = None
        self._providers: dict[tuple[str, str, str, bool], Provider] = {}

    @property
    def auto(self) -> bool:
        return self._settings.model.available == "auto"

    async def load(self) -> None:
        """Read the endpoint's model list once (``"auto"`` only; bounded, never raises).

        A failure is logged and not retried: the menus then offer the main model only."""
        if not self.auto or self._listed is not None:
            return
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load())
        await asyncio.shield(self._loading)

    async def _load(self) -> None:
        try:
            async with asyncio.timeout(LIST_TIMEOUT):
                listed = await self._provider.list_models()
        except Exception as exc:  # the picker is a convenience: never fail a session for it
            _log.warning(f"model.available is auto but the model list could not be read: {exc}")
            listed = []
        self._listed = [ModelOption(m.id, m.name or m.id) for m in listed]

    def options(self, current: str | None = None) -> list[ModelOption]:
        """The configured models in order, then the main model and ``current`` if missing."""
        available = self._settings.model.available
        if available == "auto":
            options = list(self._listed or [])
        else:
            options = [
                self._checked(_option(e)) for e in available if not isinstance(e, str) or e.strip()
            ]
        seen = {option.id for option in options}
        for extra in (self._provider.model, current):
            if extra and extra not in seen:
                options.append(ModelOption(extra, extra, listed=False))
                seen.add(extra)
        return options

    def _checked(self, option: ModelOption) -> ModelOption:
        """``option`` with why it cannot be chosen, when its endpoint is not set up (its key's
        variable is empty): menus mark it instead of offering what a switch refuses."""
        if option.choice is None:
            return option
        main = self._endpoint or Endpoint("", "", self._provider.model)
        try:
            choice_endpoint(main, option.choice, self._settings)
        except NoAuthError as exc:
            return replace(option, unavailable=str(exc))
        return option

    def find(self, model: str) -> ModelOption | None:
        """The listed option named ``model`` (by id), if any."""
        return next((o for o in self.options() if o.id == model and o.listed), None)

    def choose(self, model: str) -> tuple[ModelOption, Provider]:
        """The option named ``model`` (listed or not) and the provider serving it;
        :class:`ModelSwitchError` for a blank name or an endpoint that is not set up."""
        name = model.strip()
        if not name:
            raise ModelSwitchError("the model name is empty")
        option = self.find(name)
        provider = self.provider_for(option)
        return option or ModelOption(name, name, listed=False), provider

    def provider_for(self, option: ModelOption | None) -> Provider:
        """The provider serving ``option`` (the main one unless its entry names an endpoint)."""
        if option is None or option.choice is None:
            return self._provider
        main = self._endpoint or Endpoint("", "", self._provider.model)
        try:
            endpoint = choice_endpoint(main, option.choice, self._settings)
        except NoAuthError as exc:
            raise ModelSwitchError(str(exc)) from None
        key = (endpoint.wire, endpoint.base_url, endpoint.api_key, endpoint.bearer)
        if self._endpoint is not None and key == (
            main.wire,
            main.base_url,
            main.api_key,
            main.bearer,
        ):
            return self._provider
        provider = self._providers.get(key)
        if provider is None:
            from cairn.llm.factory import create_provider

            provider = create_provider(endpoint, self._settings)
            self._watch(provider)
            self._providers[key] = provider
        return provider

    async def aclose(self) -> None:
        """Close the providers of the other endpoints (the main one is the runtime's)."""
        if self._loading is not None and not self._loading.done():
            self._loading.cancel()
        for provider in self._providers.values():
            try:
                await provider.aclose()
            except Exception as exc:  # closing one must not keep the others open
                _log.warning(f"closing a model provider failed: {exc!r}")
        self._providers.clear()


def _option(entry: str | ModelChoice) -> ModelOption:
    if isinstance(entry, str):
        return ModelOption(entry, entry)
    elsewhere = entry.auth_type is not None or entry.base_url is not None or bool(entry.env_key)
    return ModelOption(
        entry.id,
        entry.name or entry.id,
        entry.description or "",
        choice=entry if elsewhere else None,
    )
