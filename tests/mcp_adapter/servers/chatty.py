"""A server that talks back during a call: progress, log messages, elicitation and sampling
(through the SDK's resolvers, which ask mid-call on 2025 sessions and with an input-required
result on 2026 ones), and a call that waits until it is cancelled. Runs in process or over stdio."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from mcp.shared.exceptions import MCPError
from mcp.types import CreateMessageResult, SamplingMessage, TextContent
from pydantic import BaseModel

server = MCPServer("chatty")
cancelled: list[str] = []


class Name(BaseModel):
    name: str


@server.tool()
async def steps(n: int, ctx: Context) -> str:
    """Report progress n times, logging each step."""
    for step in range(1, n + 1):
        await ctx.info(f"step {step} of {n}")
        await ctx.report_progress(step, n, f"step {step}")
    return "done"


def _ask_name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@server.tool()
async def greet(name: Annotated[Name, Resolve(_ask_name)]) -> str:
    """Greet whoever answers."""
    return f"hello {name.name}"


def _ask_model(text: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))
    return Sample([message], max_tokens=50)


@server.tool()
async def summarize(text: str, summary: Annotated[CreateMessageResult, Resolve(_ask_model)]) -> str:
    """Summarize the text with the client's model."""
    content = summary.content
    return content.text if isinstance(content, TextContent) else "?"


@server.tool()
async def ask_mid_call(ctx: Context) -> str:
    """Greet whoever answers, asked the 2025 way: a request to the client during the call."""
    answer = await ctx.elicit("Your name?", Name)
    return f"hello {answer.data.name}" if answer.action == "accept" else answer.action


@server.tool()
async def ask_then_give_up(ctx: Context) -> str:
    """Ask the 2025 way, and withdraw the question (cancel the request) when it is not answered at once."""
    with anyio.move_on_after(0.2):
        answer = await ctx.elicit("Your name?", Name)
        return answer.action
    return "gave up"


@server.tool()
async def can_ask(ctx: Context) -> bool:
    """Whether the client declared elicitation."""
    capabilities = ctx.client_capabilities
    return capabilities is not None and capabilities.elicitation is not None


@server.tool()
async def request_meta(ctx: Context) -> dict[str, Any]:
    """The request's `_meta`, without the protocol's own keys."""
    meta = ctx.request_context.meta or {}
    return {key: value for key, value in meta.items() if not key.startswith("io.modelcontextprotocol/")}


@server.tool()
async def sample_unnamed(ctx: Context) -> str:
    """Ask the client's model as MCP SDK 1.x tools do, naming no call (`ctx.session.create_message`
    without `related_request_id`), and turn a refusal into a tool error of its own, as they do."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text="Summarize"))
    try:
        answer = await ctx.session.create_message([message], max_tokens=20)
    except MCPError as exc:
        raise ToolError(str(exc)) from exc
    content = answer.content
    return content.text if isinstance(content, TextContent) else "?"


@server.tool()
async def wait(tag: str) -> str:
    """Wait until cancelled."""
    try:
        await anyio.sleep_forever()
    finally:
        cancelled.append(tag)
    return tag


if __name__ == "__main__":
    server.run()
