#!/usr/bin/env python3
"""Stop hook: the first time Claude wants to stop, make it write the changelog first."""

import json
import sys

event = json.load(sys.stdin)
if event["stop_hook_active"] or "CHANGELOG" in event.get("last_assistant_message", ""):
    sys.exit(0)
print(json.dumps({"decision": "block", "reason": "Add a CHANGELOG entry before you stop."}))
