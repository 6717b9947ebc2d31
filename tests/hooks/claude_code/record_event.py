#!/usr/bin/env python3
"""Any event: append the hook's input to $HOOK_LOG, and say nothing."""

import json
import os
import sys

event = json.load(sys.stdin)
event["env"] = {k: os.environ.get(k) for k in ("CLAUDE_PROJECT_DIR", "CLAUDE_ENV_FILE")}
with open(os.environ["HOOK_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps(event) + "\n")
