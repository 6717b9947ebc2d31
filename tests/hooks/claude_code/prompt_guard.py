#!/usr/bin/env python3
"""UserPromptSubmit hook: a prompt that looks like it holds a secret is not sent."""

import json
import re
import sys

event = json.load(sys.stdin)
if re.search(r"(?i)\b(password|secret|api[_-]?key)\s*[:=]", event["prompt"]):
    print(
        json.dumps(
            {"decision": "block", "reason": "Your prompt seems to hold a secret; remove it."}
        )
    )
