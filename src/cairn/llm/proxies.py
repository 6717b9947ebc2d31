"""The HTTP proxy between cairn and the model endpoint: which one, if any, for each origin.

Where it comes from, the first one set wins (Qwen Code's order, so its settings carry over):

1. ``--proxy URL`` (the command line puts it in ``CAIRN_PROXY``, which the cairn processes of
   the run inherit; setting the variable directly works too);
2. the ``proxy`` setting (the user's settings, or a trusted project's: a project that is not
   trusted cannot route the user's key through a proxy of its choosing);
3. the environment, as curl and httpx read it: ``https_proxy``/``HTTPS_PROXY`` for an
   ``https://`` endpoint, ``http_proxy``/``HTTP_PROXY`` for ``http://``, then
   ``all_proxy``/``ALL_PROXY``; the lowercase name first, and the settings' ``env`` as the
   fallback for each. ``HTTP_PROXY`` is ignored when ``REQUEST_METHOD`` is set (a CGI
   program's request could set it: "httpoxy").

``no_proxy``/``NO_PROXY`` exempts origins from whichever proxy applies, by curl's rules
(:func:`bypasses`). An ``https://`` endpoint is reached through a ``CONNECT`` tunnel, then TLS
with the endpoint itself; an ``http://`` one by requests in absolute form to the proxy. Only
``http://`` proxies are spoken (a URL without a scheme is one); credentials in the URL
(``http://user:pass@host:port``) are sent as ``Proxy-Authorization: Basic``, and no message
ever shows them (:attr:`Proxy.shown`).

Nothing is parsed before the first request: :func:`proxy_routes` only looks whether any source
is set, so a start-up without a proxy pays a few dictionary lookups.
"""

from __future__ import annotations

import base64
import ipaddress
import os
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from cairn.llm.errors import ProxyError
from cairn.values import Value

__all__ = [
    "FLAG_VARIABLE",
    "Proxy",
    "ProxyRoutes",
    "bypasses",
    "parse_proxy",
    "proxy_routes",
]

FLAG_VARIABLE = "CAIRN_PROXY"  # what --proxy sets for the run and the cairn processes it starts
DEFAULT_PROXY_PORT = 80  # of an http:// proxy URL that names none (URL rules, as httpx reads it)
_SCHEME_VARIABLES = {
    "https": ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"),
    "http": ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"),
}
_NO_PROXY = ("no_proxy", "NO_PROXY")
_EVERY_VARIABLE = (FLAG_VARIABLE, *_SCHEME_VARIABLES["https"], "http_proxy", "HTTP_PROXY")


class Proxy(Value):
    """An HTTP proxy: where it listens, the ``Proxy-Authorization`` it needs, where it was set."""

    host: str
    port: int
    authorization: bytes | None  # the header's value, from the URL's credentials
    source: str  # "--proxy", "the proxy setting", "HTTPS_PROXY"...

    @property
    def shown(self) -> str:
        """The proxy's URL without its credentials, for messages."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def named(self) -> str:
        """``the proxy http://host:port (HTTPS_PROXY)``."""
        return f"the proxy {self.shown} ({self.source})"


def parse_proxy(raw: str, source: str) -> Proxy:
    """``raw`` (``http://[user[:password]@]host[:port]``, or ``host:port``) as a :class:`Proxy`;
    :class:`ProxyError` for anything else, naming ``source`` and never the password."""
    text = raw.strip()
    if "://" not in text:
        text = "http://" + text  # curl's reading of a proxy without a scheme
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise _bad(raw, source, str(exc)) from None
    if parts.scheme.lower() != "http":
        raise _bad(
            raw,
            source,
            f"cairn speaks to http:// proxies only, not {parts.scheme}://"
            " (a proxy for https:// endpoints is still an http:// URL: the CONNECT tunnel"
            " carries TLS)",
        )
    if not parts.hostname:
        raise _bad(raw, source, "it names no host")
    authorization = None
    if parts.username is not None or parts.password is not None:
        user = unquote(parts.username or "")
        password = unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode())
        authorization = b"Basic " + token
    return Proxy(parts.hostname, port or DEFAULT_PROXY_PORT, authorization, source)


def _bad(raw: str, source: str, why: str) -> ProxyError:
    return ProxyError(f"the proxy {_redacted(raw)!r} ({source}) cannot be used: {why}.")


def _redacted(raw: str) -> str:
    """``raw`` with anything before an ``@`` (a user and password) hidden."""
    head, at, tail = raw.strip().rpartition("@")
    if not at:
        return raw.strip()
    scheme, sep, _ = head.partition("://")
    return f"{scheme}://***@{tail}" if sep else f"***@{tail}"


def bypasses(host: str, port: int, no_proxy: str) -> bool:
    """Whether ``no_proxy`` (``NO_PROXY``'s value) exempts ``host:port`` from the proxy.

    curl's rules: entries are separated by commas (or spaces); ``*`` exempts every host; a
    name matches itself and its subdomains (``example.com`` covers ``api.example.com``; a
    leading dot is ignored); an IP address matches that address and a CIDR block
    (``10.0.0.0/8``) the addresses in it; ``:port`` (``[::1]:8080`` for IPv6) narrows an entry
    to one port. Names are never resolved: ``localhost`` does not cover ``127.0.0.1``.
    """
    host = host.strip("[]").rstrip(".").lower()
    address = _address(host)
    for entry in no_proxy.replace(" ", ",").lower().split(","):
        entry = entry.strip()
        if not entry:
            continue
        if entry == "*":
            return True
        pattern, entry_port = _split_port(entry)
        if entry_port is not None and entry_port != port:
            continue
        if "/" in pattern or _address(pattern) is not None:
            if address is not None and _in_block(address, pattern):
                return True
            continue
        pattern = pattern.lstrip(".").rstrip(".")
        if pattern and (host == pattern or host.endswith("." + pattern)):
            return True
    return False


def _split_port(entry: str) -> tuple[str, int | None]:
    """``host:port``, ``[v6]:port``, ``[v6]`` or a bare IPv6 address as (pattern, port)."""
    if entry.startswith("["):
        inside, _, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        return inside, int(port) if port.isdigit() else None
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        return name, int(port) if port.isdigit() else None
    return entry, None  # a name, or an IPv6 address (with or without a /prefix)


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _in_block(address: ipaddress.IPv4Address | ipaddress.IPv6Address, pattern: str) -> bool:
    try:
        return address in ipaddress.ip_network(pattern, strict=False)
    except (ValueError, TypeError):
        return False


class ProxyRoutes:
    """The proxy (or none) for each origin of one provider, decided on its first request.

    ``setting`` is the ``proxy`` setting; ``variables`` the environment over the settings'
    ``env``. A misconfigured proxy raises :class:`ProxyError` from :meth:`for_origin`, at each
    request (never at start-up).
    """

    def __init__(self, setting: str | None, variables: Mapping[str, str]) -> None:
        self._setting = setting
        self._variables = variables
        self._decided: dict[tuple[str, str, int], Proxy | None] = {}

    def for_origin(self, scheme: str, host: str, port: int) -> Proxy | None:
        key = (scheme, host, port)
        if key not in self._decided:
            self._decided[key] = self._decide(scheme, host, port)
        return self._decided[key]

    def _decide(self, scheme: str, host: str, port: int) -> Proxy | None:
        found = self._configured(scheme)
        if found is None:
            return None
        raw, source = found
        no_proxy = next((self._variables[n] for n in _NO_PROXY if self._variables.get(n)), "")
        if no_proxy and bypasses(host, port, no_proxy):
            return None
        return parse_proxy(raw, source)

    def _configured(self, scheme: str) -> tuple[str, str] | None:
        """The proxy URL for ``scheme`` and where it was set, or None."""
        flag = self._variables.get(FLAG_VARIABLE, "").strip()
        if flag:
            return flag, "--proxy"
        if self._setting and self._setting.strip():
            return self._setting, "the proxy setting"
        cgi = "REQUEST_METHOD" in self._variables
        for name in _SCHEME_VARIABLES.get(scheme, ()):
            if name == "HTTP_PROXY" and cgi:
                continue
            value = self._variables.get(name, "").strip()
            if value:
                return value, name
        return None


def proxy_routes(
    setting: str | None, fallback: Mapping[str, str] | None = None
) -> ProxyRoutes | None:
    """The routes for a provider, or None when no proxy is set anywhere (the common case,
    which costs a few lookups). ``fallback`` is the settings' ``env``: the process environment
    wins over it, as for the endpoint's own variables."""
    variables: Mapping[str, str] = os.environ
    if fallback:  # the flag's variable is the command line's: a settings file cannot set it
        kept = {k: v for k, v in fallback.items() if k != FLAG_VARIABLE}
        variables = {**kept, **os.environ}
    if (setting and setting.strip()) or any(variables.get(n) for n in _EVERY_VARIABLE):
        return ProxyRoutes(setting, variables)
    return None
