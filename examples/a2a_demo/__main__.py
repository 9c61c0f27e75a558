"""A2A demo: ``python -m examples.a2a_demo`` (from the repository root).

1. Starts the demo's A2A agent, a parcel service written with the a2a-sdk (its own
   ``AgentExecutor``, two skills: ``track_parcel`` in JSON, ``apology_note`` in text), as a
   subprocess on 127.0.0.1.
2. Connects it to a router in this process (``A2AAgent.connect``): each skill is a capability. A
   LangChain agent (``create_agent``, its chat model a scripted fake) calls both through its
   reach tools.
3. Starts ``reach serve`` on a config directory holding one ``kind: a2a`` file for the same agent
   and calls the skills with the MCP SDK's client.
4. Calls ``reach serve`` as an A2A agent with the a2a-sdk's client: the card lists the skills; one
   message names its skill, the other is matched from its text.
5. Stops both servers and shows what the parcel service received: one message per call, each
   under the task id the router gave the call.
"""

from __future__ import annotations

# ruff: noqa: E402
# What the demo needs is checked before it is imported: a missing package is one line saying what to run.
from examples.needs import require

require("examples.a2a_demo", "a2a", "httpx", "starlette", "uvicorn", "mcp", "langchain", "langgraph")

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_message, new_text_part
from a2a.types.a2a_pb2 import Part, SendMessageRequest, Task, TaskState
from google.protobuf import json_format
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph
from mcp import Client
from mcp.types import RequestParamsMeta, TextContent

from examples.a2a_demo.agent import READY_PREFIX as AGENT_READY
from examples.langchain_demo.agents import scripted
from examples.processes import ready_fields, running
from middleware import ReachResult, new_task_id
from reach_adapters import Router
from reach_adapters.a2a import A2AAgent
from reach_adapters.cli.serve import READY_PREFIX as REACH_READY
from reach_adapters.langchain import ReachToolkit
from reach_adapters.mcp.converter import META_PREFIX

ROOT = Path(__file__).resolve().parents[2]
COMPLAINT = "My parcel PX-7 is three days late. Nobody answers the phone."


def _section(title: str) -> None:
    print(f"\n== {title}")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _served(call: str, path: str, agent_id: str | None, status: str, task_id: str, answer: Any) -> None:
    """One call: who made it, the way it went to the A2A agent, and what came back."""
    print(f"  {call}")
    print(f"    {path} -> {agent_id} over A2A [{status}], task {task_id}")
    print(f"    answer: {answer if isinstance(answer, str) else _json(answer)}")


def helpdesk(tools: list[BaseTool]) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A `create_agent` agent whose tools are the router's reach tools; its model is scripted to
    call both of the parcel service's skills, then answer."""
    model = scripted(
        AIMessage(
            "",
            tool_calls=[
                {"name": "track_parcel", "args": {"parcel_id": "PX-7"}, "id": "call-track"},
                {"name": "apology_note", "args": {"text": COMPLAINT}, "id": "call-note"},
            ],
        ),
        AIMessage("PX-7 is in transit, two days out; the customer has an apology and a voucher."),
    )
    return create_agent(model, tools=tools, name="helpdesk", system_prompt="Answer parcel complaints.")


async def _from_langchain(url: str) -> None:
    _section("2. a LangChain agent reaches the A2A agent through the router (in this process)")
    async with Router() as router:  # closing the router closes the A2A agent's HTTP client
        router.register(await A2AAgent.connect(url, name="shipping"))
        for info in router.catalog():
            for cap in info.capabilities:
                print(
                    f"  {info.agent_id} [{info.state}] skill {cap.name}: keywords {', '.join(cap.keywords)}"
                )
        tools = ReachToolkit(router).get_tools()
        print(f"  the LangChain agent's tools: {', '.join(tool.name for tool in tools)}")
        state = await helpdesk(tools).ainvoke({"messages": [{"role": "user", "content": COMPLAINT}]})
        for message in state["messages"]:
            if isinstance(message, ToolMessage) and message.artifact is not None:
                result = ReachResult.model_validate(message.artifact)
                call = f"LangChain tool call {message.name}"
                _served(call, "router", result.agent_id, result.status, result.task_id, result.payload)
        print(f"  the LangChain agent answered: {state['messages'][-1].content}")


async def _over_mcp(mcp_url: str, http: httpx.AsyncClient) -> None:
    _section("3. an MCP client reaches it through reach serve (streamable HTTP)")
    async with Client(mcp_url) as client:
        print(f"  MCP tools: {', '.join(sorted(tool.name for tool in (await client.list_tools()).tools))}")
        for name, arguments in (
            ("track_parcel", {"parcel_id": "PX-9"}),
            ("apology_note", {"text": "The box was left in the rain. The shoes are ruined."}),
        ):
            # The caller names the task in _meta, so the server's decision record can be fetched.
            task_id = new_task_id()
            meta = cast("RequestParamsMeta", {f"{META_PREFIX}task_id": task_id})
            answer = await client.call_tool(name, arguments, meta=meta)
            text = "".join(block.text for block in answer.content if isinstance(block, TextContent))
            record = (await http.get(f"/api/explain/{task_id}")).json()
            call = f"MCP tools/call {name} {_json(arguments)}"
            # A bare value (the apology) comes as text and boxed, {"result": value}: the text says it.
            boxed = (answer.meta or {}).get(f"{META_PREFIX}boxed")
            shown = text if boxed else answer.structured_content or text
            _served(call, "reach serve", record["chosen"], record["status"], task_id, shown)


def _answer(task: Task) -> str:
    """The task's artifacts, as the A2A client sees them: text parts, then data parts."""
    parts: list[Part] = [part for artifact in task.artifacts for part in artifact.parts]
    return " ".join([*get_text_parts(parts), *(_json(data) for data in get_data_parts(parts))])


async def _over_a2a(base_url: str) -> None:
    _section("4. an A2A client reaches it through reach serve (the router served as an A2A agent)")
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
        print(f"  card {base_url}/.well-known/agent-card.json: {card.name!r}, JSON-RPC at {base_url}/a2a")
        print(f"  skills: {', '.join(skill.id for skill in card.skills)}")
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        try:
            named = new_message([new_data_part({"parcel_id": "PX-7"})])
            named.metadata.update({"skill": "track_parcel"})
            matched = new_message([new_text_part("The courier was rude and I want an apology.")])
            for how, message in (
                ("naming skill track_parcel", named),
                ("no skill, matched by its text", matched),
            ):
                task: Task | None = None
                async for event in client.send_message(SendMessageRequest(message=message)):
                    task = event.task if event.HasField("task") else task
                assert task is not None, "reach serve answers every message with a task"
                meta = json_format.MessageToDict(task.metadata)
                state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower()
                path = f"reach serve -> {meta.get('agent-reach/capability')}"
                agent_id, task_id = meta.get("agent-reach/agent_id"), str(meta.get("agent-reach/task_id"))
                _served(f"A2A SendMessage, {how}", path, agent_id, state, task_id, _answer(task))
        finally:
            await client.close()


async def _through_reach_serve(agent_url: str, scratch: Path) -> None:
    config = scratch / "config"
    config.mkdir()
    # The same agent as a config file: what `reach scan --a2a URL` would print, less the overrides.
    (config / "a2a:shipping:0.yaml").write_text(f"kind: a2a\nname: shipping\nurl: {agent_url}\n")
    log = scratch / "reach.log"
    serve = ("-m", "reach_adapters.cli", "serve", str(config), "--port", "0")
    async with running(sys.executable, *serve, cwd=ROOT, log=log) as process:
        urls = await ready_fields(process, REACH_READY, log, "reach serve")
        print(f"\n  reach serve {config.name}/ (one kind: a2a file) listens at {urls['url']}")
        async with httpx.AsyncClient(base_url=urls["url"], timeout=30) as http:
            await _over_mcp(urls["mcp"], http)
        await _over_a2a(urls["url"])
    print(f"\n  reach serve stopped (exit code {process.returncode})")


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        scratch = Path(directory)
        _section("1. the A2A agent: python -m examples.a2a_demo.agent (a2a-sdk, its own executor)")
        agent_log = scratch / "agent.log"
        command = (sys.executable, "-m", "examples.a2a_demo.agent", "--port", "0")
        async with running(*command, cwd=ROOT, log=agent_log) as agent:
            url = (await ready_fields(agent, AGENT_READY, agent_log, "the shipping agent"))["url"]
            print(f"  listening at {url}: card at /.well-known/agent-card.json, JSON-RPC at /a2a")
            await _from_langchain(url)
            await _through_reach_serve(url, scratch)
        assert agent.stdout is not None
        seen = (await agent.stdout.read()).decode().strip().splitlines()
    _section(f"5. what the A2A agent received ({len(seen)} messages, each under the router's task id)")
    for line in seen:
        print(f"  {line}")
    print("\nboth servers stopped; no process left behind")


if __name__ == "__main__":
    asyncio.run(main())
