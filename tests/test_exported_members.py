"""The public surface of the ``cairn`` package (httpx's test_exported_members, in spirit)."""

import subprocess
import sys

import cairn


def test_all_exports_resolve_to_public_objects() -> None:
    for name in cairn.__all__:
        assert getattr(cairn, name) is not None, name
    assert sorted(cairn.__all__) == cairn.__all__


def test_the_public_surface_is_pinned() -> None:
    assert cairn.__all__ == [
        "Endpoint",
        "PromptRequest",
        "Runtime",
        "Session",
        "Settings",
        "TurnResult",
        "__version__",
        "load_settings",
        "resolve_endpoint",
    ]


def test_importing_cairn_loads_none_of_its_subsystems() -> None:
    """Only the version module, which holds one string."""
    probe = (
        "import sys, cairn\n"
        "print(sorted(m for m in sys.modules if m.startswith(('cairn.', 'pydantic', 'httpx'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['cairn._version']"


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        cairn.not_a_thing  # noqa: B018
    except AttributeError as exc:
        assert "not_a_thing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
