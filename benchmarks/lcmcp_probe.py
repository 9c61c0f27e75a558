"""langchain-mcp-adapters calling the benchmark's stdio server; run by bench_mcp in its own venv.

That venv has mcp 1.x (langchain-mcp-adapters pins mcp<2), so this script is never imported by
the project. It prints the per-call latencies of both ways the package offers tools, as JSON.

Run: ``<venv>/bin/python -m benchmarks.lcmcp_probe --server-python P --calls N --fresh-calls M``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from langchain_mcp_adapters.client import MultiServerMCPClient  # type: ignore[import-not-found]
from langchain_mcp_adapters.tools import load_mcp_tools  # type: ignore[import-not-found]

from benchmarks.stats import measure

SERVER = str(Path(__file__).with_name("mcp_bench_server.py"))


async def probe(server_python: str, calls: int, fresh_calls: int) -> dict[str, list[float]]:
    client = MultiServerMCPClient(
        {"bench": {"command": server_python, "args": [SERVER], "transport": "stdio"}}
    )
    arguments = {"a": 1, "b": 2}
    # The default tools open a new session, and so start a new server process, for every call.
    default = next(tool for tool in await client.get_tools() if tool.name == "add")
    fresh = await measure(lambda: default.ainvoke(arguments), fresh_calls, warmup=2)
    async with client.session("bench") as session:
        persistent = next(tool for tool in await load_mcp_tools(session) if tool.name == "add")
        kept = await measure(lambda: persistent.ainvoke(arguments), calls)
    return {"default": fresh, "persistent": kept}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server-python", required=True)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--fresh-calls", type=int, default=20)
    options = parser.parse_args()
    result = asyncio.run(probe(options.server_python, options.calls, options.fresh_calls))
    print(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
