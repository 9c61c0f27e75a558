"""Per-call `configurable` and `context` through `reach serve`: the HTTP API, the CLI and MCP
(issue 11, item 5)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import RequestParamsMeta, TextContent

from reach_adapters.mcp import META_PREFIX
from tests.gateway.conftest import ReachServer, run_reach, write

pytestmark = pytest.mark.timeout(120)

MEMO = "kind: langchain\nagent_id: chat:memo:01\nrunnable: tests.gateway.agents:memo_graph\n"
APPROVAL = "kind: langchain\nagent_id: chat:approval:01\nrunnable: tests.gateway.agents:approval_graph\n"
LOCALISED = "kind: langchain\nagent_id: chat:say:01\nrunnable: tests.gateway.agents:localised_graph\n"
THREAD = ("--option", 'configurable={"thread_id": "t-1"}')


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


async def test_the_runs_context_reaches_the_graph_over_api_cli_and_mcp(
    serve: Callable[..., ReachServer], config_dir: Path
) -> None:
    write(config_dir, "chat:say:01.yaml", LOCALISED)
    server = serve(config_dir)
    body = {"capability": "say", "payload": said("hi"), "options": {"context": {"lang": "fr"}}}
    assert server.api("POST", "/route", json=body).json()["payload"] == "fr: hi"
    german = ("--option", 'context={"lang": "de"}')
    cli = run_reach("call", "say", json.dumps(said("hi")), "--url", server.url, "--json", *german)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["payload"] == "de: hi"
    async with Client(server.mcp_url) as client:
        meta = cast(RequestParamsMeta, {META_PREFIX + "context": {"lang": "it"}})
        answer = await client.call_tool("say", said("hi"), meta=meta)
    assert "".join(block.text for block in answer.content if isinstance(block, TextContent)) == "it: hi"
    missing = server.api("POST", "/route", json={"capability": "say", "payload": said("hi")}).json()
    assert (missing["status"], missing["fault"]) == ("invalid", "caller")
    assert missing["extra"]["fix_options"] == {"context": {"lang": "<lang>"}}


def test_the_resume_hint_says_where_an_answer_can_reach_the_thread(
    serve: Callable[..., ReachServer], config_dir: Path
) -> None:
    write(config_dir, "chat:approval:01.yaml", APPROVAL)
    # Each --config command builds the agents anew: the thread asked on is gone by the next one.
    local = run_reach("call", "approval", json.dumps(said("refund")), *THREAD, "--config", str(config_dir))
    assert local.returncode == 1, local.stderr
    assert "--option 'resume=<answer>'" in local.stdout
    assert "but not with --config" in local.stdout
    assert "--url" in local.stdout
    server = serve(config_dir)
    asked = run_reach("call", "approval", json.dumps(said("refund")), *THREAD, "--url", server.url)
    assert asked.stdout.startswith("input_required"), asked.stderr
    assert """--option 'configurable={"thread_id": "t-1"}' --option 'resume=<answer>'""" in asked.stdout
    assert "--config" not in asked.stdout
    # The hint holds against a server: the answer reaches the thread.
    done = run_reach("call", "approval", *THREAD, "--option", "resume=yes", "--url", server.url, "--json")
    assert done.returncode == 0, done.stdout
    assert json.loads(done.stdout)["payload"] == "approved: yes"


TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789"}
SECURITY = """\
principals:
  alice: {token_env: REACH_TEST_ALICE, allow: ["*"]}
  bob: {token_env: REACH_TEST_BOB, allow: ["*"]}
"""


async def test_a_principal_naming_anothers_thread_gets_a_conversation_of_its_own(
    serve: Callable[..., ReachServer], config_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thread ids are the caller's choice: over every surface, bob naming alice's thread neither
    reads her conversation nor answers her pending interrupt, and is shown his own thread id."""
    for name, token in TOKENS.items():
        monkeypatch.setenv(f"REACH_TEST_{name.upper()}", token)
    write(config_dir, "chat:memo:01.yaml", MEMO)
    write(config_dir, "chat:approval:01.yaml", APPROVAL)
    write(config_dir, "security.yaml", SECURITY)
    server = serve(config_dir)

    def api(who: str, capability: str, payload: Any, **options: Any) -> Any:
        body = {"capability": capability, "payload": payload, "options": options}
        headers = {"Authorization": f"Bearer {TOKENS[who]}"}
        return server.api("POST", "/route", json=body, headers=headers).json()

    private = {"thread_id": "alice-private"}
    assert api("alice", "memo", said("my card is 4111"), configurable=private)["payload"] == "my card is 4111"
    assert (
        api("bob", "memo", said("what did she say?"), configurable=private)["payload"] == "what did she say?"
    )
    cli = run_reach(
        "call", "memo", json.dumps(said("bob again")), "--url", server.url, "--json",
        "--token", TOKENS["bob"], "--option", 'configurable={"thread_id": "alice-private"}',
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["payload"] == "what did she say? / bob again"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['bob']}"}, timeout=30) as http,
        Client(streamable_http_client(server.mcp_url, http_client=http)) as client,
    ):
        meta = cast(RequestParamsMeta, {META_PREFIX + "configurable": private})
        answer = await client.call_tool("memo", said("bob over mcp"), meta=meta)
    text = "".join(block.text for block in answer.content if isinstance(block, TextContent))
    assert text == "what did she say? / bob again / bob over mcp"
    assert api("alice", "memo", said("and?"), configurable=private)["payload"] == "my card is 4111 / and?"

    refund = {"thread_id": "alice-refund"}
    assert api("alice", "approval", said("refund 900"), configurable=refund)["status"] == "input_required"
    intruded = api("bob", "approval", None, configurable=refund, resume="approved by bob")
    assert (intruded["status"], intruded["fault"]) == ("invalid", "caller")
    # Bob is told of the thread he named, never of the router's name for it.
    assert "thread 'alice-refund' of agent chat:approval:01 waits on no interrupt" in intruded["error"]
    done = api("alice", "approval", None, configurable=refund, resume="yes")
    assert (done["status"], done["payload"]) == ("ok", "approved: yes")


HISTORY = (
    "kind: langchain\nagent_id: chat:history:01\nrunnable: tests.gateway.agents:history_chat\n"
    "capabilities: [{name: history}]\n"
)


async def test_a_principal_naming_anothers_session_gets_a_history_of_its_own(
    serve: Callable[..., ReachServer], config_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `RunnableWithMessageHistory`'s ``session_id`` is the caller's choice too: over HTTP and
    MCP, bob naming alice's session neither reads her history nor adds to it."""
    for name, token in TOKENS.items():
        monkeypatch.setenv(f"REACH_TEST_{name.upper()}", token)
    write(config_dir, "chat:history:01.yaml", HISTORY)
    write(config_dir, "security.yaml", SECURITY)
    server = serve(config_dir)
    session = {"session_id": "alice-chat"}

    def api(who: str, text: str) -> Any:
        body = {"capability": "history", "payload": {"question": text}, "options": {"configurable": session}}
        return server.api(
            "POST", "/route", json=body, headers={"Authorization": f"Bearer {TOKENS[who]}"}
        ).json()

    assert api("alice", "my card is 4111")["payload"] == "my card is 4111"
    assert api("bob", "what did she say?")["payload"] == "what did she say?"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['bob']}"}, timeout=30) as http,
        Client(streamable_http_client(server.mcp_url, http_client=http)) as client,
    ):
        meta = cast(RequestParamsMeta, {META_PREFIX + "configurable": session})
        answer = await client.call_tool("history", {"question": "bob over mcp"}, meta=meta)
    text = "".join(block.text for block in answer.content if isinstance(block, TextContent))
    assert text == "what did she say? / bob over mcp"
    assert api("alice", "and?")["payload"] == "my card is 4111 / and?"


async def test_langgraph_internals_in_configurable_are_the_callers_mistake(
    serve: Callable[..., ReachServer], config_dir: Path
) -> None:
    """A caller's `__pregel_*` key would replace the graph's machinery and fail the run as the
    agent's: refused over HTTP and MCP, the agent stays healthy for everyone else."""
    write(config_dir, "chat:memo:01.yaml", MEMO)
    server = serve(config_dir)
    internals = {"thread_id": "x", "__pregel_checkpointer": "oops"}
    for _ in range(3):
        body = {"capability": "memo", "payload": said("hi"), "options": {"configurable": internals}}
        refused = server.api("POST", "/route", json=body)
        assert refused.status_code == 400, refused.text
        assert "'__pregel_checkpointer' is reserved" in refused.json()["error"]
    async with Client(server.mcp_url) as client:
        for configurable in (internals, {"thread_id": "m", "checkpoint_ns": "child:1"}):
            meta = cast(RequestParamsMeta, {META_PREFIX + "configurable": configurable})
            answer = await client.call_tool("memo", said("hi"), meta=meta)
            assert answer.meta is not None
            assert (answer.meta[META_PREFIX + "status"], answer.meta[META_PREFIX + "fault"]) == (
                "invalid",
                "caller",
            )
    health = server.api("GET", "/health").json()
    assert (health["status"], health.get("problems")) == ("ok", {})
    body = {"capability": "memo", "payload": said("hi"), "options": {"configurable": {"thread_id": "y"}}}
    assert server.api("POST", "/route", json=body).json()["payload"] == "hi"
