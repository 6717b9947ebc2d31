#!/usr/bin/env python3
"""PreToolUse hook for Read, Edit and Write: keep Claude out of the project's .env files."""

import json
import os
import sys

event = json.load(sys.stdin)
if event["tool_name"] not in ("Read", "Edit", "Write"):
    sys.exit(0)
path = event["tool_input"].get("file_path", "")
if not os.path.isabs(path):
    print(f"expected an absolute file_path, got {path!r}", file=sys.stderr)
    sys.exit(1)
project = os.environ["CLAUDE_PROJECT_DIR"]
if os.path.basename(path).startswith(".env") and path.startswith(project + os.sep):
    print(f"{os.path.relpath(path, project)} holds secrets: do not touch it", file=sys.stderr)
    sys.exit(2)
