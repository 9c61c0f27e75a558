"""Per-call `configurable` through `reach serve`: the HTTP API, the CLI and MCP (issue 11, item 5)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from mcp import Client
from mcp.types import RequestParamsMeta, TextContent

from reach_adapters.mcp import META_PREFIX
from tests.gateway.conftest import ReachServer, run_reach, write

pytestmark = pytest.mark.timeout(120)

MEMO = "kind: langchain\nagent_id: chat:memo:01\nrunnable: tests.gateway.agents:memo_graph\n"


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def test_each_thread_keeps_its_conversation_over_api_cli_and_mcp(
    serve: Callable[..., ReachServer], config_dir: Path
) -> None:
    write(config_dir, "chat:memo:01.yaml", MEMO)
    server = serve(config_dir)

    def api(thread: str, text: str) -> Any:
        body = {
            "capability": "memo",
            "payload": said(text),
            "options": {"configurable": {"thread_id": thread}},
        }
        return server.api("POST", "/route", json=body).json()

    assert api("alice", "a1")["payload"] == "a1"
    assert api("bob", "b1")["payload"] == "b1"
    cli = run_reach(
        "call", "memo", json.dumps(said("a2")), "--url", server.url, "--json",
        "--option", 'configurable={"thread_id": "alice"}',
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["payload"] == "a1 / a2"
    async with Client(server.mcp_url) as client:
        meta = cast(RequestParamsMeta, {META_PREFIX + "configurable": {"thread_id": "bob"}})
        answer = await client.call_tool("memo", said("b2"), meta=meta)
    text = "".join(block.text for block in answer.content if isinstance(block, TextContent))
    assert text == "b1 / b2"
    missing = server.api("POST", "/route", json={"capability": "memo", "payload": said("x")}).json()
    assert (missing["status"], missing["fault"]) == ("invalid", "caller")
