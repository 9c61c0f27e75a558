"""The router served over stdio, with the calc server (in process) and a function agent behind it.

Run as ``python -m tests.mcp_adapter.servers.gateway [--instructions TEXT]`` from the repository
root.
"""

from __future__ import annotations

import argparse
import asyncio

from reach_adapters import FunctionAgent, Router
from reach_adapters.mcp import MCPServerAgent, serve_mcp
from tests.mcp_adapter.servers.calc import server as calc


def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


async def main(instructions: str | None) -> None:
    async with Router() as router:
        router.register(await MCPServerAgent.connect("calc", server=calc))
        router.register(FunctionAgent(shout, agent_id="util:shout:0"))
        await serve_mcp(router, transport="stdio", instructions=instructions)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--instructions")
    asyncio.run(main(parser.parse_args().instructions))
