"""The upstream MCP servers' resources, resource templates, prompts and completions, served again
by the router's MCP server: a client reads through the router what it reads from each server
directly, whichever protocol version either side speaks."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.resources import TextResource
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated, ServerEvent
from mcp.types import (
    INVALID_PARAMS,
    SERVER_INFO_META_KEY,
    Completion,
    CompletionArgument,
    CompletionContext,
    EmptyResult,
    PromptListChangedNotification,
    PromptReference,
    ResourceListChangedNotification,
    ResourceTemplateReference,
    ResourceUpdatedNotification,
    SubscribeRequest,
    SubscribeRequestParams,
    UnsubscribeRequest,
    UnsubscribeRequestParams,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from reach_adapters import FunctionAgent, Router
from reach_adapters.mcp import MCPOptions, MCPServerAgent, RouterMCPServer, start_mcp_server
from reach_adapters.mcp.notices import on_upstream_change, upstream_changed
from reach_adapters.security.guard import SecurityGuard
from reach_adapters.security.spec import SecuritySpec
from tests.mcp_adapter.test_instructions import _Principals
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]

docs = MCPServer("docs")


@docs.resource("docs://readme", mime_type="text/markdown", title="Read me")
def readme() -> str:
    """The project's read-me."""
    return "# Read me"


@docs.resource("docs://logo", mime_type="image/png")
def logo() -> bytes:
    return b"\x89PNG"


@docs.resource("docs://pages/{page}")
def page(page: str) -> str:
    """One page of the docs."""
    return f"page {page}"


@docs.prompt(title="Review code")
def review(code: str, language: str = "python") -> str:
    """Ask for a review."""
    return f"Review this {language}: {code}"


@docs.completion()  # type: ignore[untyped-decorator,no-untyped-call]
async def complete(
    ref: Any, argument: CompletionArgument, context: CompletionContext | None
) -> Completion | None:
    if isinstance(ref, PromptReference) and argument.name == "language":
        return Completion(values=[lang for lang in ("python", "perl") if lang.startswith(argument.value)])
    if isinstance(ref, ResourceTemplateReference) and argument.name == "page":
        return Completion(values=["intro", "install"])
    return None


# Another server with a prompt of the same name, and no resources: no tools either, which is how
# many resource and prompt servers are.
other = MCPServer("other")


@other.prompt(name="review")
def review_other(text: str) -> str:
    """Someone else's review."""
    return f"Other review: {text}"


@docs.tool()
def search(query: str) -> list[str]:
    """Search the docs."""
    return [query]


def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


Connect = Callable[..., Client]


@asynccontextmanager
async def _served(router: Router, transport: str) -> AsyncIterator[Connect]:
    if transport == "http":
        async with await start_mcp_server(router, port=0) as endpoint:
            yield lambda mode, **options: Client(endpoint.url, mode=mode, **options)
    else:
        reach = RouterMCPServer(router)
        try:
            yield lambda mode, **options: Client(reach.server, mode=mode, **options)
        finally:
            reach.close()


@pytest.mark.parametrize("transport", ["in-process", "http"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
async def test_resources_and_prompts_read_as_from_the_server_itself(
    router: Router, transport: str, mode: str, protocol: str
) -> None:
    router.register(await MCPServerAgent.connect("docs", docs, options=MCPOptions(protocol=protocol)))
    router.register(FunctionAgent(shout, agent_id="util:shout:0"))
    async with (
        Client(docs, mode=mode) as direct,
        _served(router, transport) as connect,
        connect(mode) as client,
    ):
        assert client.server_capabilities.resources is not None
        assert client.server_capabilities.prompts is not None
        assert (await client.list_resources()).resources == (await direct.list_resources()).resources
        assert (await client.list_resource_templates()).resource_templates == (
            await direct.list_resource_templates()
        ).resource_templates
        for uri in ("docs://readme", "docs://logo", "docs://pages/intro"):
            ours, theirs = await client.read_resource(uri), await direct.read_resource(uri)
            assert ours.contents == theirs.contents
        assert (await client.list_prompts()).prompts == (await direct.list_prompts()).prompts
        arguments = {"code": "x = 1", "language": "perl"}
        ours_prompt, theirs_prompt = (
            await client.get_prompt("review", arguments),
            await direct.get_prompt("review", arguments),
        )
        assert (ours_prompt.description, ours_prompt.messages) == (
            theirs_prompt.description,
            theirs_prompt.messages,
        )
        # The results are the router's: the upstream's server info stays on its hop.
        assert (ours_prompt.meta or {}).get(SERVER_INFO_META_KEY, {}).get("name") != "docs"
        prompt_ref = PromptReference(type="ref/prompt", name="review")
        assert (await client.complete(prompt_ref, {"name": "language", "value": "p"})).completion.values == [
            "python",
            "perl",
        ]
        template_ref = ResourceTemplateReference(type="ref/resource", uri="docs://pages/{page}")
        done = await client.complete(template_ref, {"name": "page", "value": ""})
        assert done.completion.values == ["intro", "install"]


async def test_a_server_of_no_tools_over_stdio_serves_its_resources_and_prompts(router: Router) -> None:
    library = str(Path(__file__).parent / "servers" / "library.py")
    agent = await MCPServerAgent.connect("library", command=sys.executable, args=[library])
    router.register(agent)
    assert agent.capabilities == ()
    async with _served(router, "in-process") as connect, connect("legacy") as client:
        listed = [r.uri for r in (await client.list_resources()).resources]
        assert listed == ["library://catalog", "library://pid", "library://slow"]
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["library://books/{isbn}"]
        # Not listed, made by the template: read from the server whose template could make it.
        read = await client.read_resource("library://books/978-3")
        assert read.contents[0].text == "book 978-3"  # type: ignore[union-attr]
        got = await client.get_prompt("summarise", {"isbn": "978-3"})
        assert got.messages[0].content.text == "Summarise the book 978-3."  # type: ignore[union-attr]
    await agent.aclose()


async def test_errors_of_the_server_reach_the_client_as_the_server_gave_them(router: Router) -> None:
    router.register(await MCPServerAgent.connect("docs", docs))
    async with Client(docs) as direct, _served(router, "in-process") as connect, connect("auto") as client:
        with pytest.raises(MCPError) as theirs:
            await direct.read_resource("docs://nothing")
        with pytest.raises(MCPError) as ours:
            await client.read_resource("docs://nothing")
        assert ours.value.code == theirs.value.code == INVALID_PARAMS
        assert "docs://nothing" in ours.value.message
        with pytest.raises(MCPError) as missing:
            await client.get_prompt("nope")
        assert missing.value.code == INVALID_PARAMS
        assert "Unknown prompt: 'nope'" in missing.value.message


async def test_namesake_prompts_of_two_servers_are_kept_apart(router: Router) -> None:
    router.register(await MCPServerAgent.connect("docs", docs))
    router.register(await MCPServerAgent.connect("other", other))
    async with _served(router, "in-process") as connect, connect("auto") as client:
        names = [prompt.name for prompt in (await client.list_prompts()).prompts]
        assert names == ["review", "review_other"]
        mine = await client.get_prompt("review", {"code": "y"})
        theirs = await client.get_prompt("review_other", {"text": "y"})
    assert mine.messages[0].content.text == "Review this python: y"  # type: ignore[union-attr]
    assert theirs.messages[0].content.text == "Other review: y"  # type: ignore[union-attr]


async def test_a_replica_reads_while_the_other_is_offline(router: Router) -> None:
    first = await MCPServerAgent.connect("docs", docs, options=MCPOptions(instance="a"))
    router.register(first)
    router.register(await MCPServerAgent.connect("docs", docs, options=MCPOptions(instance="b")))
    async with _served(router, "in-process") as connect, connect("auto") as client:
        assert [r.uri for r in (await client.list_resources()).resources] == ["docs://readme", "docs://logo"]
        await first.aclose()
        assert (await client.read_resource("docs://readme")).contents[0].text == "# Read me"  # type: ignore[union-attr]
        assert (await client.get_prompt("review", {"code": "z"})).messages


@asynccontextmanager
async def _as(url: str, principal: str, mode: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"x-principal": principal}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_principal_sees_the_contents_of_the_servers_it_may_reach(mode: str) -> None:
    rules = {"principals": {"alice": {"allow": ["shout"]}, "bob": {"allow": ["search"]}}}
    async with Router(guard=SecurityGuard(SecuritySpec.model_validate(rules))) as router:
        router.register(await MCPServerAgent.connect("docs", docs))
        router.register(FunctionAgent(shout, agent_id="util:shout:0"))
        async with await start_mcp_server(router, port=0, limits=_Principals()) as endpoint:
            async with _as(endpoint.url, "alice", mode) as client:
                # Like the tool list: alice may reach no tool of the docs server.
                assert (await client.list_resources()).resources == []
                assert (await client.list_prompts()).prompts == []
                with pytest.raises(MCPError):
                    await client.read_resource("docs://readme")
                with pytest.raises(MCPError):
                    await client.get_prompt("review", {"code": "x"})
            async with _as(endpoint.url, "bob", mode) as client:
                listed = (await client.list_resources()).resources
                assert [r.uri for r in listed] == ["docs://readme", "docs://logo"]
                assert (await client.get_prompt("review", {"code": "x"})).messages


def _shelf() -> MCPServer:
    """A server whose ``shelve`` tool adds a resource and a prompt, and says its lists changed."""
    shelf = MCPServer("shelf")

    @shelf.tool()
    async def shelve(name: str, ctx: Context) -> str:
        """Put a new page on the shelf."""
        shelf.add_resource(TextResource(uri=f"shelf://{name}", name=name, text=f"page {name}"))
        shelf.add_prompt(Prompt.from_function(lambda: f"Read {name}.", name=f"read_{name}"))
        session = ctx.request_context.session
        if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await ctx.notify_resources_changed()
            await ctx.notify_prompts_changed()
        else:
            await session.send_resource_list_changed()
            await session.send_prompt_list_changed()
        return name

    return shelf


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
async def test_clients_hear_when_an_upstreams_resources_or_prompts_change(
    router: Router, protocol: str
) -> None:
    router.register(await MCPServerAgent.connect("shelf", _shelf(), options=MCPOptions(protocol=protocol)))
    heard: list[str] = []

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, ResourceListChangedNotification | PromptListChangedNotification):
            heard.append(message.method)

    async with (
        _served(router, "http") as connect,
        connect("auto") as modern,
        connect("legacy", message_handler=on_message) as old,
    ):
        await old.list_resources()
        assert old.server_capabilities.resources is not None
        assert old.server_capabilities.resources.list_changed is True
        async with modern.listen(resources_list_changed=True, prompts_list_changed=True) as changes:
            await modern.call_tool("shelve", {"name": "one"})
            async with asyncio.timeout(10):
                kinds = {type(await anext(changes)).__name__, type(await anext(changes)).__name__}
        assert kinds == {"ResourcesListChanged", "PromptsListChanged"}
        await eventually(
            lambda: (
                sorted(heard)
                == ["notifications/prompts/list_changed", "notifications/resources/list_changed"]
            ),
            what="the handshake-era client to hear both changes",
        )
        assert "shelf://one" in {r.uri for r in (await old.list_resources()).resources}
        assert "read_one" in {p.name for p in (await modern.list_prompts()).prompts}


def _counter() -> MCPServer:
    """A server of one resource, ``counter://value``, that its ``bump`` tool updates, telling
    the sessions that subscribed (on 2025-11-25, with ``resources/subscribe``) or listen."""
    counter = MCPServer("counter")
    value = [0]
    subscribers: list[ServerSession] = []

    @counter.resource("counter://value")
    def current() -> str:
        return str(value[0])

    @counter.tool()
    async def bump(ctx: Context) -> int:
        """Add one to the counter."""
        value[0] += 1
        await ctx.notify_resource_updated("counter://value")
        for session in subscribers:
            await session.send_resource_updated("counter://value")
        return value[0]

    async def subscribe(ctx: ServerRequestContext[Any], params: SubscribeRequestParams) -> EmptyResult:
        subscribers.append(ctx.session)
        return EmptyResult()

    counter._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    return counter


async def _subscribe(client: Client, uri: str, *, stop: bool = False) -> None:
    """``resources/subscribe`` (or unsubscribe) as a 2025-11-25 client sends it; the SDK's own
    methods warn that 2026-07-28 removed them."""
    request = UnsubscribeRequest(params=UnsubscribeRequestParams(uri=uri)) if stop else None
    await client.session.send_request(
        request or SubscribeRequest(params=SubscribeRequestParams(uri=uri)), EmptyResult
    )


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
async def test_subscribers_hear_when_an_upstream_updates_a_resource(router: Router, protocol: str) -> None:
    router.register(
        await MCPServerAgent.connect("counter", _counter(), options=MCPOptions(protocol=protocol))
    )
    # Another server of resources: a URI neither has is no one's to judge.
    router.register(await MCPServerAgent.connect("docs", docs))
    updated: list[str] = []

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            updated.append(message.params.uri)

    async with (
        _served(router, "http") as connect,
        connect("auto") as modern,
        connect("legacy", message_handler=on_message) as old,
    ):
        assert old.server_capabilities.resources is not None
        assert old.server_capabilities.resources.subscribe is True
        await _subscribe(old, "counter://value")
        async with modern.listen(resource_subscriptions=["counter://value"]) as changes:
            await modern.call_tool("bump", {})
            async with asyncio.timeout(10):
                event = await anext(changes)
        assert event == ResourceUpdated(uri="counter://value")
        await eventually(lambda: updated == ["counter://value"], what="the handshake-era subscriber to hear")
        assert (await old.read_resource("counter://value")).contents[0].text == "1"  # type: ignore[union-attr]
        await _subscribe(old, "counter://value", stop=True)
        await modern.call_tool("bump", {})
        await asyncio.sleep(0.2)
        assert updated == ["counter://value"]
        with pytest.raises(MCPError) as unknown:
            await _subscribe(old, "counter://nothing")
        assert unknown.value.code == INVALID_PARAMS


async def test_a_failing_listener_of_upstream_changes_keeps_the_others_and_the_session(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    heard: list[str] = []

    def broken(agent_id: str, event: ServerEvent) -> None:
        msg = "a listener's bug"
        raise RuntimeError(msg)

    stops = [on_upstream_change(broken), on_upstream_change(lambda agent_id, event: heard.append(agent_id))]
    try:
        upstream_changed("mcp:docs:0", ResourcesListChanged())
    finally:
        for stop in stops:
            stop()
    assert heard == ["mcp:docs:0"]
    assert "a listener's bug" in caplog.text
