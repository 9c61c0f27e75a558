"""The demo's own MCP server: small text tools, plus `whoami` so the demo can kill a replica.

Run over stdio: ``python -m examples.mcp_demo.server``; ``REPLICA`` names the copy.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("text-tools", instructions="Small text utilities.")
READ_ONLY = ToolAnnotations(read_only_hint=True)


class Counts(BaseModel):
    words: int
    characters: int


class Identity(BaseModel):
    replica: str
    pid: int


@server.tool(annotations=READ_ONLY)
def word_count(text: str) -> Counts:
    """Count the words and characters of a text."""
    return Counts(words=len(text.split()), characters=len(text))


@server.tool(annotations=READ_ONLY)
def reverse_words(text: str) -> str:
    """Reverse the order of the words of a text."""
    return " ".join(reversed(text.split()))


@server.tool(annotations=READ_ONLY)
def whoami() -> Identity:
    """Which replica answered, and its process id."""
    return Identity(replica=os.environ.get("REPLICA", "?"), pid=os.getpid())


if __name__ == "__main__":
    server.run()
