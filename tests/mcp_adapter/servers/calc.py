"""A small MCP server for the adapter's tests, over stdio (default) or streamable HTTP (``--http``).

With ``--http`` it prints the port it listens on as its first line of stdout; ``--port`` reuses a
port, so a test can restart a killed server where its clients expect it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import (
    METHOD_NOT_FOUND,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

from tests.mcp_adapter.servers.growing import add_grow_tool
from tests.mcp_adapter.servers.listen import serve_http

server = MCPServer("calc")
_served = [0]
PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()


def _count() -> None:
    _served[0] += 1


@server.tool(title="Addition", annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    _count()
    return a + b


@server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
def delete_note(note_id: str) -> str:
    _count()
    return f"deleted {note_id}"


@server.tool()
def append_note(text: str) -> int:
    """Append a note: not idempotent, every call adds one."""
    _count()
    return len(text)


@server.tool(structured_output=False)
def describe(text: str) -> list[ContentBlock]:
    """Answer with a text, an image and an embedded resource block."""
    _count()
    resource = TextResourceContents(uri="note://1", mime_type="text/plain", text=text)
    return [
        TextContent(type="text", text=text.upper()),
        ImageContent(type="image", data=PIXEL, mime_type="image/png"),
        EmbeddedResource(type="resource", resource=resource),
    ]


@server.tool()
def fail(reason: str) -> str:
    """Always fails with `reason`."""
    _count()
    raise ToolError(reason)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> int:
    """The server's process id, so a test can kill it."""
    return os.getpid()


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def calls() -> int:
    """How many counted tools this process has run."""
    return _served[0]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def header(name: str, ctx: Context) -> str:
    """The value of an HTTP request header, as the server received it."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    return "" if headers is None else str(headers.get(name, ""))


@server.tool()
async def slow(seconds: float) -> str:
    _count()
    await asyncio.sleep(seconds)
    return "done"


add_grow_tool(server)


async def _handshake_only(ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
    """Answer ``server/discover`` as a server of the 2025 protocol versions only does (every MCP
    SDK 1.x server): a client in "auto" mode then falls back to the initialize handshake, and
    over HTTP to a session the server keeps, and forgets when it restarts."""
    if ctx.method == "server/discover":
        raise MCPError(METHOD_NOT_FOUND, "Method not found")
    return await call_next(ctx)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--handshake-only", action="store_true")
    options = parser.parse_args()
    if options.handshake_only:
        server.middleware.append(_handshake_only)
    if not options.http:
        server.run()
        return
    serve_http(server.streamable_http_app(), options.port)


if __name__ == "__main__":
    main()
