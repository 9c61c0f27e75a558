"""URL-mode elicitation (MCP 2025-11-25) through the router: a server's "open this URL first"
(error -32042) is the caller's to act on, never held against the server, and reaches an MCP
client as the server sent it; the server's word that the user is done reaches the client it asked."""

from __future__ import annotations

from collections.abc import AsyncIterator

import mcp
import pytest
from mcp.client.context import ClientRequestContext
from mcp.client.session import IncomingMessage
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError
from mcp.types import (
    URL_ELICITATION_REQUIRED,
    ElicitCompleteNotification,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
)

from middleware import Fault, ResultStatus
from reach_adapters import BreakerState, Router
from reach_adapters.mcp import MCPEndpoint, MCPOptions, MCPServerAgent, RouterMCPServer, start_mcp_server
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

drive = MCPServer("drive")
NEEDED = ElicitRequestURLParams(
    mode="url",
    message="Authorize access to your files",
    url="https://example.com/oauth/authorize",
    elicitation_id="auth-001",
)
WIRE = {"elicitations": [NEEDED.model_dump(by_alias=True, exclude_none=True)]}
# The upstream's sessions that refused a call, to say later that the user is done.
_refusing: list[ServerSession] = []


@drive.tool()
def list_files(ctx: Context) -> str:
    """List the user's files, once they authorized access at a URL."""
    _refusing.append(ctx.session)
    raise UrlElicitationRequiredError([NEEDED])


@drive.tool()
async def connect_drive(ctx: Context) -> str:
    """Send the user to authorize, then say that they did."""
    answer = await ctx.elicit_url("Authorize access", "https://example.com/oauth", "el-1")
    await ctx.session.send_elicit_complete("el-1", related_request_id=ctx.request_id)
    return f"user said {answer.action}"


class Caller:
    """An MCP client of the gateway that opens every URL it is handed, and hears completions."""

    def __init__(self) -> None:
        self.completed: list[str] = []

    async def on_elicit(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="accept")

    async def on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)

    def client(self, url: str, mode: str = "legacy") -> mcp.Client:
        return mcp.Client(
            url, mode=mode, elicitation_callback=self.on_elicit, message_handler=self.on_message
        )


@pytest.fixture
async def gateway(router: Router) -> AsyncIterator[MCPEndpoint]:
    # 2025-11-25: a tool may ask its client mid-call only on that version.
    options = MCPOptions(protocol="2025-11-25")
    router.register(await MCPServerAgent.connect("drive", drive, options=options))
    async with await start_mcp_server(router, port=0) as endpoint:
        yield endpoint


async def test_a_url_the_caller_must_open_is_its_to_act_on_and_never_held_against_the_server(
    router: Router,
) -> None:
    router.register(await MCPServerAgent.connect("drive", drive))
    for _ in range(4):
        result = await router.route("list_files", {})
        assert (result.status, result.fault, result.retryable) == (ResultStatus.REJECTED, Fault.CALLER, False)
        assert (result.error_type, result.attempts) == ("UrlElicitationRequiredError", 1)
        assert result.extra["url_elicitation"] == {"message": "URL elicitation required", "data": WIRE}
    info = router.catalog()[0]
    assert (info.breaker, info.failures) == (BreakerState.CLOSED, 0)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_mcp_client_gets_the_servers_error_with_its_urls(gateway: MCPEndpoint, mode: str) -> None:
    async with mcp.Client(gateway.url, mode=mode) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("list_files", {})
    assert (raised.value.code, raised.value.data) == (URL_ELICITATION_REQUIRED, WIRE)


async def test_a_reach_router_reads_it_back_across_a_gateway(router: Router) -> None:
    router.register(await MCPServerAgent.connect("drive", drive))
    async with Router() as near:
        near.register(await MCPServerAgent.connect("far", server=RouterMCPServer(router).server))
        result = await near.route("list_files", {})
    assert (result.status, result.fault) == (ResultStatus.REJECTED, Fault.CALLER)
    assert result.extra["url_elicitation"] == {"message": "URL elicitation required", "data": WIRE}


async def test_the_servers_word_that_the_user_is_done_reaches_the_caller_it_asked(
    gateway: MCPEndpoint,
) -> None:
    caller = Caller()
    async with caller.client(gateway.url) as client:
        # Asked during the call: on the call's own stream.
        answered = await client.call_tool("connect_drive", {})
        assert answered.structured_content == {"result": "user said accept"}
        await eventually(lambda: caller.completed == ["el-1"], what="the completion asked mid-call")
        # Asked by refusing the call: on the caller's session's stream, once the user is done.
        with pytest.raises(MCPError):
            await client.call_tool("list_files", {})
        await _refusing[-1].send_elicit_complete("auth-001")
        await eventually(lambda: caller.completed == ["el-1", "auth-001"], what="the later completion")


async def test_a_completion_nobody_was_handed_reaches_nobody(gateway: MCPEndpoint) -> None:
    caller = Caller()
    async with caller.client(gateway.url) as client:
        with pytest.raises(MCPError):
            await client.call_tool("list_files", {})
        session = _refusing[-1]
        await session.send_elicit_complete("never-handed")
        await session.send_elicit_complete("auth-001")
        await eventually(lambda: caller.completed == ["auth-001"], what="the completion handed out")
