"""A bare JSON-RPC MCP server over stdio (2025-11-25) whose listings are malformed, as a buggy
server's may be: a resource whose URI is a number, a prompt with no name."""

from __future__ import annotations

import json
import sys
from typing import Any

_ANSWERS: dict[str, dict[str, Any]] = {
    "initialize": {
        "protocolVersion": "2025-11-25",
        "serverInfo": {"name": "malformed", "version": "1"},
        "capabilities": {"resources": {}, "prompts": {}},
    },
    "resources/list": {"resources": [{"uri": 123}]},
    "resources/templates/list": {"resourceTemplates": []},
    "prompts/list": {"prompts": [{"description": "no name"}]},
    "ping": {},
}


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request:
            continue
        answer = _ANSWERS.get(request.get("method", ""))
        if answer is None:
            reply: dict[str, Any] = {"error": {"code": -32601, "message": "Method not found"}}
        else:
            reply = {"result": answer}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], **reply}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
