"""An SDK low-level server with no handlers at all, so no tools capability, over stdio."""

from __future__ import annotations

import anyio
from mcp.server import Server
from mcp.server.stdio import stdio_server

server: Server[None] = Server("bare")


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
