"""An MCP server of resources and prompts and no tools, as many such servers are: over stdio, or
over streamable HTTP with ``--http`` (printing the port it listens on as its first line of
stdout; ``--port`` reuses a port)."""

from __future__ import annotations

import argparse
import asyncio
import os

from mcp.server.mcpserver import MCPServer

from tests.mcp_adapter.servers.listen import serve_http

server = MCPServer("library")


@server.resource("library://catalog", mime_type="application/json")
def catalog() -> str:
    """What the library holds."""
    return '{"books": 2}'


@server.resource("library://pid")
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.resource("library://slow")
async def slow() -> str:
    """A resource that takes a second to read, from this process."""
    await asyncio.sleep(1.0)
    return f"slow from {os.getpid()}"


@server.resource("library://books/{isbn}")
def book(isbn: str) -> str:
    """One book, by ISBN."""
    return f"book {isbn}"


@server.prompt()
def summarise(isbn: str) -> str:
    """Ask for a summary of a book."""
    return f"Summarise the book {isbn}."


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    if not options.http:
        server.run()
        return
    serve_http(server.streamable_http_app(), options.port)


if __name__ == "__main__":
    main()
