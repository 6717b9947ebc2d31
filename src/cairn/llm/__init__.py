"""Model providers: the wire format, streaming, retries and side queries.

Nothing else in cairn knows HTTP or OpenAI shapes. Import :class:`OpenAIProvider` from
``cairn.llm.openai`` (it imports httpx; this package does not).
"""

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

__all__ = [
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
    "side_query",
]
