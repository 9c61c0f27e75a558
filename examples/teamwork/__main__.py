"""Run the three scenes of the teamwork demo, each on a router of its own."""

from __future__ import annotations

# ruff: noqa: E402
# What the demo needs is checked before it is imported: a missing package is one line saying what to run.
from examples.needs import require

require("examples.teamwork", "langchain_core", "mcp")

import asyncio
import logging
import sys

from examples.teamwork.later import deferred_call
from examples.teamwork.saga import saga
from examples.teamwork.vote import consensus


async def main() -> None:
    # Warnings (the failing courier) interleave with the demo's lines. `force`: constructing the
    # in-process MCP server gave the root logger a handler of the MCP SDK's own.
    logging.basicConfig(level=logging.WARNING, format="  [log] %(message)s", stream=sys.stdout, force=True)
    for title, scene in (
        ("1. consensus: three kinds of agent vote", consensus),
        ("2. a chain that fails, and what it did undone", saga),
        ("3. a deferred call waits for its agent", deferred_call),
    ):
        print(f"\n== {title}")
        await scene()


if __name__ == "__main__":
    asyncio.run(main())
