"""The Python client of ``cairn serve``.

```python
from cairn.sdk import DaemonClient, DaemonSessionClient

async with DaemonClient("http://127.0.0.1:4170") as client:
    session = await DaemonSessionClient.create(client)
    print(await session.prompt_and_wait("What does this project do?"))
    print(await session.recap())
```

:class:`SyncDaemonClient` offers the same calls without an event loop.
"""

from cairn.sdk.client import DEFAULT_TIMEOUT, DaemonClient
from cairn.sdk.errors import (
    DaemonConnectionError,
    DaemonError,
    DaemonHTTPError,
    FeatureNotSupported,
    ForbiddenError,
    NotFoundError,
    PayloadTooLargeError,
    PromptQueueFullError,
    SessionLimitError,
    TurnError,
    UnauthorizedError,
    UnavailableError,
)
from cairn.sdk.session import DaemonSessionClient
from cairn.sdk.sync import SyncDaemonClient, SyncDaemonSessionClient
from cairn.sdk.types import (
    AvailableModel,
    Capabilities,
    DaemonEvent,
    ModelList,
    PromptAdmission,
    SessionInfo,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "AvailableModel",
    "Capabilities",
    "DaemonClient",
    "DaemonConnectionError",
    "DaemonError",
    "DaemonEvent",
    "DaemonHTTPError",
    "DaemonSessionClient",
    "FeatureNotSupported",
    "ForbiddenError",
    "ModelList",
    "NotFoundError",
    "PayloadTooLargeError",
    "PromptAdmission",
    "PromptQueueFullError",
    "SessionInfo",
    "SessionLimitError",
    "SyncDaemonClient",
    "SyncDaemonSessionClient",
    "TurnError",
    "UnauthorizedError",
    "UnavailableError",
]
