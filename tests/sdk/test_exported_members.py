"""The public surface of cairn.sdk (users import these names)."""

from __future__ import annotations

import pytest

import cairn.sdk

PUBLIC = {
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
}


def test_all_lists_exactly_the_public_names() -> None:
    assert set(cairn.sdk.__all__) == PUBLIC


def test_every_public_name_resolves_inside_the_sdk() -> None:
    for name in cairn.sdk.__all__:
        member = getattr(cairn.sdk, name)
        if isinstance(member, type):
            assert member.__module__.startswith("cairn.sdk."), name


def test_every_error_is_a_daemon_error() -> None:
    for name in cairn.sdk.__all__:
        member = getattr(cairn.sdk, name)
        if isinstance(member, type) and issubclass(member, Exception):
            assert issubclass(member, cairn.sdk.DaemonError), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = cairn.sdk.NotAThing  # type: ignore[attr-defined]


def test_importing_the_sdk_does_not_import_the_daemon_or_the_runtime() -> None:
    import subprocess
    import sys

    code = (
        "import sys, cairn.sdk; "
        "bad = [m for m in ('starlette', 'uvicorn', 'cairn.session', 'cairn.daemon', 'acp', "
        "'textual') if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "[]"
