"""A stdio server that tells where it runs: its interpreter, working directory and environment."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("where")


@server.tool()
def where(variable: str) -> dict[str, str | None]:
    """The interpreter, the working directory, and one environment variable."""
    return {"python": sys.executable, "cwd": os.getcwd(), "value": os.environ.get(variable)}


if __name__ == "__main__":
    pid_file = os.environ.get("REACH_PID_FILE")
    if pid_file:
        with open(pid_file, "w") as out:
            out.write(str(os.getpid()))
    server.run("stdio")
