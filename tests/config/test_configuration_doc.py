"""docs/configuration.md lists every setting and every environment variable cairn reads."""

import re
from pathlib import Path

from cairn.config.sections import Section
from cairn.config.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "configuration.md").read_text()


def _setting_keys(model: type[Section], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for attr, info in model.model_fields.items():
        key = f"{prefix}{info.alias or attr}"
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, Section):
            keys += _setting_keys(annotation, key + ".")
        else:
            keys.append(key)
    return keys


def test_every_setting_is_documented() -> None:
    missing = [key for key in _setting_keys(Settings) if f"`{key}`" not in DOC]
    assert missing == []


def test_every_environment_variable_read_by_cairn_is_documented() -> None:
    names: set[str] = set()
    for path in (ROOT / "src" / "cairn").rglob("*.py"):
        names |= set(re.findall(r"\"((?:CAIRN|OPENAI|ANTHROPIC)_[A-Z_]+)\"", path.read_text()))
    assert names  # the scan found the variables
    missing = sorted(name for name in names if f"`{name}`" not in DOC)
    assert missing == []
