"""The configuration examples in docs/mcp.md are valid as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cairn.config.settings import Settings
from cairn.mcp.config import read_mcp_json, servers_from_client

DOC = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()
JSON_BLOCKS = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", DOC, flags=re.S)]


def test_the_doc_has_the_examples_this_test_reads() -> None:
    assert len(JSON_BLOCKS) >= 3


def test_the_settings_example_validates_with_every_transport() -> None:
    settings = next(b for b in JSON_BLOCKS if "github" in b.get("mcpServers", {}))
    servers = Settings.model_validate(settings).mcp_servers
    assert servers["github"].include_tools == ["get_issue", "list_issues"]
    assert servers["events"].url and servers["docs"].http_url


def test_the_mcp_json_example_reads_as_claude_code_writes_it(tmp_path: Path) -> None:
    example = next(b for b in JSON_BLOCKS if "files" in b.get("mcpServers", {}))
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps(example))
    servers = {s.name: s for s in read_mcp_json(path, environ={})}
    assert [servers[n].transport for n in ("files", "api", "old")] == ["stdio", "http", "sse"]
    assert servers["api"].url == "http://127.0.0.1:9000/mcp"


def test_the_daemon_example_body_is_accepted() -> None:
    body = re.search(r"-d '(\{.*?\})'", DOC, flags=re.S)
    assert body is not None
    servers = servers_from_client(json.loads(body.group(1))["mcpServers"], source="doc")
    assert [s.transport for s in servers] == ["stdio", "http"]


@pytest.mark.parametrize("key", ["agent_servers", "context_servers"])
def test_the_zed_example_has_both_sections(key: str) -> None:
    assert any(key in block for block in JSON_BLOCKS)
