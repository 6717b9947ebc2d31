"""Model providers: the wire format, streaming, retries and side queries.

Nothing else in cairn knows HTTP or OpenAI shapes. Import :class:`OpenAIProvider` from
``cairn.llm.openai`` (it imports httpx; this package does not). The HTTP parts other packages
reuse (the connections, the proxy choice, the trusted certificates: MCP's HTTP servers) load on
first use.
"""

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports
from cairn.llm.errors import InvalidStreamError, ProviderError
from cairn.llm.ledger import UsageLedger, UsageReports, by_purpose_dict
from cairn.llm.retry import RetryPolicy
from cairn.llm.side_query import SideQueryResult, side_query
from cairn.llm.types import (
    Finished,
    ModelRequest,
    Provider,
    StreamEvent,
    StreamRetry,
    TextDelta,
    ThoughtDelta,
    ToolCallDelta,
    ToolDeclaration,
    Usage,
)

if TYPE_CHECKING:
    from cairn.llm.certificates import extra_ca_warning, verifying_context
    from cairn.llm.connections import ConnectionPool
    from cairn.llm.proxies import proxy_routes
    from cairn.llm.transport import untrusted_advice

__all__ = [
    "ConnectionPool",
    "Finished",
    "InvalidStreamError",
    "ModelRequest",
    "Provider",
    "ProviderError",
    "RetryPolicy",
    "SideQueryResult",
    "StreamEvent",
    "StreamRetry",
    "TextDelta",
    "ThoughtDelta",
    "ToolCallDelta",
    "ToolDeclaration",
    "Usage",
    "UsageLedger",
    "UsageReports",
    "by_purpose_dict",
    "extra_ca_warning",
    "proxy_routes",
    "side_query",
    "untrusted_advice",
    "verifying_context",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ConnectionPool": "connections",
        "extra_ca_warning": "certificates",
        "proxy_routes": "proxies",
        "untrusted_advice": "transport",
        "verifying_context": "certificates",
    },
    __all__,
)
