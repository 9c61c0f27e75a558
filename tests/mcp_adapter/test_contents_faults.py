"""Resources and prompts through the router when servers fail, disagree or list much: a read goes
to the server that has the resource, a replica stands in for one that cannot answer, a server
that restarted gets a new session, and long listings come in pages."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.resources import TextResource
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceLink,
    ResourceTemplate,
    ResourceTemplateReference,
    TextResourceContents,
    Tool,
)

from reach_adapters import AgentState, Router, RoutingPolicy
from reach_adapters.mcp import MCPOptions, MCPServerAgent, RouterMCPServer
from reach_adapters.router import ReconnectPolicy
from tests.mcp_adapter.conftest import HttpCalc
from tests.mcp_adapter.test_contents import _shelf, docs
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

LIBRARY = str(Path(__file__).parent / "servers" / "library.py")


@asynccontextmanager
async def _client(router: Router) -> AsyncIterator[Client]:
    reach = RouterMCPServer(router)
    try:
        async with Client(reach.server) as client:
            yield client
    finally:
        reach.close()


def _text(result: ReadResourceResult) -> str:
    content = result.contents[0]
    assert isinstance(content, TextResourceContents)
    return content.text


def _linker(tag: str) -> MCPServer:
    """A server whose ``find`` tool links a resource only its template makes, and that lists
    ``kb://shared`` as every copy of it does."""
    server = MCPServer(f"kb-{tag}")

    @server.resource("kb://hidden/{ticket}")
    def hidden(ticket: str) -> str:
        return f"{ticket} tag={tag}"

    @server.resource("kb://shared")
    def shared() -> str:
        return f"shared tag={tag}"

    @server.tool()
    def find() -> ResourceLink:
        """Find the ticket."""
        return ResourceLink(type="resource_link", uri="kb://hidden/ticket-7", name="ticket-7")

    return server


async def test_a_link_is_read_from_the_server_whose_tool_gave_it(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    for tag in ("prod", "staging"):
        options = MCPOptions(prefix=f"{tag}.")
        router.register(await MCPServerAgent.connect(f"kb-{tag}", _linker(tag), options=options))
    async with _client(router) as client:
        await client.list_resources()
        found = await client.call_tool("staging.find", {})
        link = found.content[0]
        assert isinstance(link, ResourceLink)
        # Both templates could make it; the link came from staging's tool.
        assert _text(await client.read_resource(link.uri)) == "ticket-7 tag=staging"
        # Both list it: the first server's, said in the log.
        assert _text(await client.read_resource("kb://shared")) == "shared tag=prod"
    assert "'kb-prod' and 'kb-staging' both list the resource 'kb://shared'" in caplog.text


async def test_a_resource_whose_server_is_offline_is_unavailable_not_unknown(router: Router) -> None:
    agent = await MCPServerAgent.connect(
        "docs", docs, options=MCPOptions(reconnect=ReconnectPolicy(enabled=False))
    )
    router.register(agent)
    router.register(await MCPServerAgent.connect("library", command=sys.executable, args=[LIBRARY]))
    async with _client(router) as client:
        assert "docs://readme" in {r.uri for r in (await client.list_resources()).resources}
        assert "review" in {p.name for p in (await client.list_prompts()).prompts}
        await agent.aclose()
        with pytest.raises(MCPError) as read:
            await client.read_resource("docs://readme")
        # Not the other server's "unknown resource": the one that has it cannot answer now.
        assert read.value.code == INTERNAL_ERROR
        assert (
            "resource 'docs://readme' cannot be read now: MCP server mcp:docs:0 is offline"
            in read.value.message
        )
        with pytest.raises(MCPError) as prompt:
            await client.get_prompt("review", {"code": "x"})
        assert prompt.value.code == INTERNAL_ERROR
        assert "review" not in {p.name for p in (await client.list_prompts()).prompts}
        assert "docs://readme" not in {r.uri for r in (await client.list_resources()).resources}


async def _pid(client: Client) -> int:
    return int(_text(await client.read_resource("library://pid")))


async def test_a_replica_answers_a_read_whose_server_died_during_it(router: Router) -> None:
    for instance in ("a", "b"):
        agent = await MCPServerAgent.connect(
            "library", command=sys.executable, args=[LIBRARY], options=MCPOptions(instance=instance)
        )
        router.register(agent)
    async with _client(router) as client:
        first = await _pid(client)
        reading = asyncio.create_task(client.read_resource("library://slow"))
        await asyncio.sleep(0.3)
        os.kill(first, signal.SIGKILL)
        async with asyncio.timeout(20):
            answer = _text(await reading)
    assert answer.startswith("slow from ")
    assert answer != f"slow from {first}"


async def test_a_read_after_an_http_server_restarted_opens_a_new_session(router: Router) -> None:
    server = HttpCalc(LIBRARY)
    try:
        quick = ReconnectPolicy(initial_delay_s=0.05, max_delay_s=0.2)
        options = MCPOptions(protocol="2025-11-25", reconnect=quick)
        agent = await MCPServerAgent.connect("library", server.url, options=options)
        router.register(agent)
        async with _client(router) as client:
            before = await _pid(client)
            server.kill()
            server.restart()
            # The server forgot the session: the read that finds so has a new one opened.
            refused: list[int] = []
            async with asyncio.timeout(20):
                while True:
                    try:
                        after = await _pid(client)
                        break
                    except MCPError as exc:
                        refused.append(exc.code)
                        await asyncio.sleep(0.05)
            assert set(refused) <= {INTERNAL_ERROR}
            assert after != before
        await agent.aclose()
    finally:
        server.stop()


def _counted(name: str, calls: Counter[str]) -> Server[Any]:
    """A server of one listed resource and one template, counting its listings."""

    async def resources(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        calls[f"{name} resources/list"] += 1
        return ListResourcesResult(resources=[Resource(uri=f"{name}://a", name="a")])

    async def templates(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        calls[f"{name} templates/list"] += 1
        return ListResourceTemplatesResult(
            resource_templates=[ResourceTemplate(uri_template=f"{name}://items/{{id}}", name="item")]
        )

    async def read(ctx: ServerRequestContext[Any], params: ReadResourceRequestParams) -> ReadResourceResult:
        return ReadResourceResult(contents=[TextResourceContents(uri=params.uri, text=params.uri)])

    return Server(
        name, on_list_resources=resources, on_list_resource_templates=templates, on_read_resource=read
    )


async def test_reads_of_unlisted_uris_list_the_servers_again_at_most_now_and_then(router: Router) -> None:
    calls: Counter[str] = Counter()
    for name in ("one", "two"):
        router.register(await MCPServerAgent.connect(name, _counted(name, calls)))
    async with _client(router) as client:
        for item in range(5):
            assert _text(await client.read_resource(f"two://items/{item}")) == f"two://items/{item}"
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("three://nothing")
    assert unknown.value.code == INVALID_PARAMS
    assert "Unknown resource: 'three://nothing'" in unknown.value.message
    # One listing of each server for all six reads, not one per read.
    assert calls == {
        f"{name} {what}/list": 1 for name in ("one", "two") for what in ("resources", "templates")
    }


async def test_a_long_listing_comes_in_pages(router: Router) -> None:
    shelf = MCPServer("shelf")
    for number in range(1_100):
        shelf.add_resource(_static(f"shelf://{number}"))
    router.register(await MCPServerAgent.connect("shelf", shelf))
    async with _client(router) as client, Client(shelf) as direct:
        pages = [await client.list_resources()]
        while pages[-1].next_cursor is not None:
            pages.append(await client.list_resources(cursor=pages[-1].next_cursor))
        assert [len(page.resources) for page in pages] == [500, 500, 100]
        theirs = await direct.list_resources()
        assert [r for page in pages for r in page.resources] == theirs.resources
        with pytest.raises(MCPError) as stale:
            await client.list_resources(cursor=pages[0].next_cursor)
        assert stale.value.code == INVALID_PARAMS


def _static(uri: str) -> TextResource:
    return TextResource(uri=uri, name=uri, text=uri)


async def test_renamed_prompts_never_take_a_servers_own_name(router: Router) -> None:
    first, notes = MCPServer("first"), MCPServer("notes")
    first.add_prompt(_prompt("summary", "FIRST"))
    notes.add_prompt(_prompt("summary", "NOTES"))
    notes.add_prompt(_prompt("summary_notes", "NOTES OWN"))
    router.register(await MCPServerAgent.connect("first", first))
    router.register(await MCPServerAgent.connect("notes", notes))
    async with _client(router) as client:
        names = [p.name for p in (await client.list_prompts()).prompts]
        assert names == ["summary", "summary_notes_2", "summary_notes"]
        said = {name: (await client.get_prompt(name)).messages[0].content for name in names}
    assert {name: getattr(content, "text", None) for name, content in said.items()} == {
        "summary": "FIRST",
        "summary_notes_2": "NOTES",
        "summary_notes": "NOTES OWN",
    }


def _prompt(name: str, text: str) -> Prompt:
    return Prompt.from_function(lambda: text, name=name)


async def test_completing_an_unknown_template_is_an_error_as_from_the_server(router: Router) -> None:
    router.register(await MCPServerAgent.connect("docs", docs))
    ref = ResourceTemplateReference(type="ref/resource", uri="docs://nope/{x}")
    async with _client(router) as client:
        with pytest.raises(MCPError) as ours:
            await client.complete(ref, {"name": "x", "value": ""})
    assert ours.value.code == INVALID_PARAMS


def _site(name: str, *, links_to: str | None = None, prompt: str | None = None) -> MCPServer:
    """A server listing ``<name>://doc``, optionally with a tool linking another URI, and a prompt."""
    server = MCPServer(name)
    server.add_resource(TextResource(uri=f"{name}://doc", name="doc", text=f"doc of {name}"))
    if links_to is not None:
        target = links_to

        @server.tool()
        def find() -> ResourceLink:
            """Find a document."""
            return ResourceLink(type="resource_link", uri=target, name="found")

    if prompt is not None:
        server.add_prompt(_prompt(prompt, f"{prompt} from {name}"))
    return server


async def test_a_link_never_takes_a_uri_from_the_server_that_lists_it(router: Router) -> None:
    router.register(await MCPServerAgent.connect("search", _site("search", links_to="wiki://doc")))
    router.register(await MCPServerAgent.connect("wiki", _site("wiki")))
    async with _client(router) as client:
        await client.call_tool("find", {})
        assert _text(await client.read_resource("wiki://doc")) == "doc of wiki"


async def test_a_shared_uri_whose_first_server_is_offline_is_not_read_elsewhere(router: Router) -> None:
    first = await MCPServerAgent.connect("prod", _linker("prod"), options=MCPOptions(prefix="prod."))
    router.register(first)
    router.register(
        await MCPServerAgent.connect("staging", _linker("staging"), options=MCPOptions(prefix="s."))
    )
    async with _client(router) as client:
        await client.list_resources()
        await first.aclose()
        with pytest.raises(MCPError) as read:
            await client.read_resource("kb://shared")
    assert read.value.code == INTERNAL_ERROR
    assert "mcp:prod:0 is offline" in read.value.message


async def test_a_server_offline_before_it_was_listed_is_not_answered_for(router: Router) -> None:
    router.register(await MCPServerAgent.connect("wiki", _site("wiki")))
    async with _client(router) as client:
        unknown = await MCPServerAgent.connect("late", _site("late"))
        router.register(unknown)
        await unknown.aclose()
        with pytest.raises(MCPError) as read:
            await client.read_resource("late://doc")
        assert read.value.code == INTERNAL_ERROR
        assert "mcp:late:0 cannot be asked now" in read.value.message


async def test_replicas_count_as_one_server_for_uris_none_lists(router: Router) -> None:
    calls: Counter[str] = Counter()
    server = _counted("one", calls)
    for instance in ("a", "b"):
        router.register(await MCPServerAgent.connect("one", server, options=MCPOptions(instance=instance)))
    async with _client(router) as client:
        assert _text(await client.read_resource("one://anything")) == "one://anything"


async def test_a_resource_a_server_announces_is_read_at_once(router: Router) -> None:
    router.register(await MCPServerAgent.connect("shelf", _shelf()))
    router.register(await MCPServerAgent.connect("wiki", _site("wiki")))
    async with _client(router) as client:
        with pytest.raises(MCPError):
            await client.read_resource("shelf://new")
        await client.call_tool("shelve", {"name": "new"})
        # Its resources/list_changed lets the read list it again, well within the 5 s.
        async with asyncio.timeout(2):
            while True:
                try:
                    text = _text(await client.read_resource("shelf://new"))
                    break
                except MCPError:
                    await asyncio.sleep(0.05)
    assert text == "page new"


async def test_a_server_that_lists_malformed_items_is_left_out(router: Router) -> None:
    malformed = str(Path(__file__).parent / "servers" / "malformed.py")
    options = MCPOptions(protocol="2025-11-25")
    router.register(
        await MCPServerAgent.connect("broken", command=sys.executable, args=[malformed], options=options)
    )
    router.register(await MCPServerAgent.connect("wiki", _site("wiki", prompt="review")))
    async with _client(router) as client:
        assert [r.uri for r in (await client.list_resources()).resources] == ["wiki://doc"]
        assert _text(await client.read_resource("wiki://doc")) == "doc of wiki"
        assert [p.name for p in (await client.list_prompts()).prompts] == ["review"]


async def test_a_cursor_is_good_only_for_the_listing_it_came_from(router: Router) -> None:
    shelf = MCPServer("shelf")
    for number in range(600):
        shelf.add_resource(_static(f"shelf://{number}"))
    router.register(await MCPServerAgent.connect("shelf", shelf))
    async with _client(router) as client:
        cursor = (await client.list_resources()).next_cursor
        assert cursor is not None
        with pytest.raises(MCPError) as other:
            await client.list_prompts(cursor=cursor)
    assert "Invalid or expired cursor" in other.value.message


@asynccontextmanager
async def _kb_and_wiki(
    router: Router, registered_first: bool
) -> AsyncIterator[tuple[Client, MCPServerAgent]]:
    """kb, then wiki, both with a prompt ``review``, registered before the router's MCP server is
    made or after, and a client of it."""

    async def register() -> MCPServerAgent:
        kb = await MCPServerAgent.connect("kb", _site("kb", prompt="review"))
        router.register(kb)
        router.register(await MCPServerAgent.connect("wiki", _site("wiki", prompt="review")))
        return kb

    kb = await register() if registered_first else None
    async with _client(router) as client:
        yield client, kb or await register()


@pytest.mark.parametrize("registered_first", [True, False])
async def test_the_first_server_keeps_a_prompt_name_while_it_is_away(
    router: Router, registered_first: bool
) -> None:
    async with _kb_and_wiki(router, registered_first) as (client, kb):
        # Learned when they came (or the server was made), before any client listed.
        await asyncio.sleep(0.3)
        await kb.aclose()
        with pytest.raises(MCPError) as prompt:
            await client.get_prompt("review")
        assert prompt.value.code == INTERNAL_ERROR
        said = (await client.get_prompt("review_wiki")).messages[0].content
        assert getattr(said, "text", None) == "review from wiki"


def _linking(calls: Counter[str]) -> Server[Any]:
    """A server whose ``find`` tool links ``fast://hidden/1``, which it reads but never lists."""

    async def resources(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        calls["resources/list"] += 1
        return ListResourcesResult(resources=[Resource(uri="fast://a", name="a")])

    async def read(ctx: ServerRequestContext[Any], params: ReadResourceRequestParams) -> ReadResourceResult:
        return ReadResourceResult(contents=[TextResourceContents(uri=params.uri, text=f"read {params.uri}")])

    async def tools(ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="find", input_schema={"type": "object"})])

    async def call(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        link = ResourceLink(type="resource_link", uri="fast://hidden/1", name="hidden")
        return CallToolResult(content=[link])

    return Server(
        "fast", on_list_resources=resources, on_read_resource=read, on_list_tools=tools, on_call_tool=call
    )


async def test_a_link_is_followed_without_listing_the_servers_again(router: Router) -> None:
    calls: Counter[str] = Counter()
    router.register(await MCPServerAgent.connect("fast", _linking(calls)))
    router.register(await MCPServerAgent.connect("wiki", _site("wiki")))
    async with _client(router) as client:
        await client.list_resources()
        listed = calls["resources/list"]
        await client.call_tool("find", {})
        assert _text(await client.read_resource("fast://hidden/1")) == "read fast://hidden/1"
    assert calls["resources/list"] == listed


async def test_a_server_the_health_probe_found_hung_is_not_waited_for() -> None:
    policy = RoutingPolicy(probe_interval_s=0.1, probe_timeout_s=0.2, probe_failures=1)
    async with Router(policy) as router:
        router.register(await MCPServerAgent.connect("library", command=sys.executable, args=[LIBRARY]))
        async with _client(router) as client:
            pid = await _pid(client)
            os.kill(pid, signal.SIGSTOP)
            try:
                await eventually(lambda: router.catalog()[0].state is AgentState.OFFLINE)
                for ask in (
                    lambda: client.read_resource("library://pid"),
                    lambda: client.get_prompt("summarise", {"isbn": "1"}),
                ):
                    with pytest.raises(MCPError) as refused:
                        # Not its timeout_ms (30 s): the router sends it nothing while it is out.
                        await asyncio.wait_for(ask(), 5)
                    assert refused.value.code == INTERNAL_ERROR
                    assert (
                        "MCP server mcp:library:0 is offline (health probe failed)" in refused.value.message
                    )
            finally:
                os.kill(pid, signal.SIGCONT)
