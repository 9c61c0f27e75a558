"""An MCP server of resources and prompts and no tools, over stdio, as many such servers are."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("library")


@server.resource("library://catalog", mime_type="application/json")
def catalog() -> str:
    """What the library holds."""
    return '{"books": 2}'


@server.resource("library://books/{isbn}")
def book(isbn: str) -> str:
    """One book, by ISBN."""
    return f"book {isbn}"


@server.prompt()
def summarise(isbn: str) -> str:
    """Ask for a summary of a book."""
    return f"Summarise the book {isbn}."


if __name__ == "__main__":
    server.run()
