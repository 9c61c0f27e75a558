"""The resources and prompts of the router's upstream MCP servers, served again by its MCP server.

A client of the router reads what it could read from each upstream directly: the resources,
resource templates and prompts of every MCP server among the router's agents that the client may
reach (one of whose tools it may call; every server when the router runs without security).
Listings are gathered from the connected ones when a client asks, served in pages of the router's
own. A read goes to the server whose tool returned the URI as a link, then to those that listed
it, else to those with a template that could make it; a prompt to the server that lists it.
Replicas (servers of one name) stand in for each other when one cannot be reached.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Literal

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    ContentBlock,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    PromptReference,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceLink,
    ResourceTemplate,
    ServerCapabilities,
)

from reach_adapters.mcp.accesses import Accesses, Answered
from reach_adapters.mcp.agent import MCPServerAgent
from reach_adapters.mcp.listings import Merged, has_template, makes
from reach_adapters.mcp.paging import Pages
from reach_adapters.mcp.prompts import Prompts
from reach_adapters.mcp.upstream_requests import first, gather, resource_page, template_page
from reach_adapters.router import UNUSABLE_STATES, AgentInfo, Router

__all__ = ["Contents"]

logger = logging.getLogger(__name__)


_NO_COMPLETION = CompleteResult(completion=Completion(values=[]))
# A read of a URI no server is known to have lists the servers again, at most this often each.
_RELIST_S = 5.0
# The URIs of links tool results carried, kept for the reads that follow them.
_MAX_LINKS = 10_000


class Contents:
    """The request handlers of ``resources/*``, ``prompts/*`` and ``completion/complete``."""

    def __init__(
        self,
        router: Router,
        principal_of: Callable[[ServerRequestContext[Any, Any]], str | None],
        seen: Callable[[ServerRequestContext[Any, Any]], None],
    ) -> None:
        """`seen`: told of each client that lists something, to hear when lists change."""
        self._router = router
        self._principal_of = principal_of
        self._seen = seen
        # What each server listed last, by agent id (kept while it is offline), and when.
        self._uris: dict[str, frozenset[str]] = {}
        self._templates: dict[str, list[ResourceTemplate]] = {}
        self._relisted: dict[str, float] = {}
        # URI -> the agent whose tool result linked it: that server has it, whoever lists it too.
        self._links: OrderedDict[str, str] = OrderedDict()
        self._merged = Merged()
        self._relisting = asyncio.Lock()
        self._learned: dict[str, float] = {}
        self._prompts = Prompts(self._mcp_agents)
        self._accesses = Accesses(router, principal_of)
        self._pages = Pages()

    # -- resources ---------------------------------------------------------------------------

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        self._seen(ctx)
        listing = partial(self._resources_of, *self._upstreams(ctx, _resources))
        resources, cursor = await self._pages.page("resources", params, self._who(ctx), listing)
        return ListResourcesResult(resources=resources, next_cursor=cursor, cache_scope=self._scope())

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        self._seen(ctx)
        listing = partial(self._templates_of, *self._upstreams(ctx, _resources))
        templates, cursor = await self._pages.page("templates", params, self._who(ctx), listing)
        return ListResourceTemplatesResult(
            resource_templates=templates, next_cursor=cursor, cache_scope=self._scope()
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        uri = params.uri
        what = f"resource {uri!r}"
        async with self._accesses.access(ctx, "resources/read", uri) as answered:
            agents, live = self._upstreams(ctx, _resources)
            owners = self._in_use(await self._owners(agents, live, uri), live, what)
            result = await first(owners, lambda client: client.read_resource(uri), what, answered)
        if self._router.guard is not None:
            result.cache_scope = "private"
        return result

    async def owners(self, ctx: ServerRequestContext[Any, Any], uri: str) -> list[MCPServerAgent]:
        """The servers the client of `ctx` may reach that have resource `uri`, best first
        (`_known_owners`), the servers listed again when none is known to (at most every 5 s);
        the one server that offers resources when none says. `MCPError`: invalid params when
        none has it, an internal error when one that might cannot be asked."""
        return await self._owners(*self._upstreams(ctx, _resources), uri)

    async def _owners(
        self, agents: list[MCPServerAgent], live: list[MCPServerAgent], uri: str
    ) -> list[MCPServerAgent]:
        found = self._known_owners(agents, live, uri)
        if not found and all(agent.agent_id in self._uris for agent in live):
            # Every server's listing is known and none claims it: a link names its server now.
            found = self._known_owners(agents, live, uri, link_alone=True)
        if not found:
            async with self._relisting:
                # Another read (or `learn`) may have listed them while this one waited.
                found = self._known_owners(agents, live, uri)
            stale = [agent for agent in live if self._stale(agent)]
            if not found and stale:
                await self._relist(stale)
                found = self._known_owners(agents, live, uri)
        found = found or self._known_owners(agents, live, uri, link_alone=True)
        if found:
            return found
        unasked = [
            agent.agent_id for agent in agents if agent not in live and agent.agent_id not in self._uris
        ]
        if unasked:
            msg = (
                f"resource {uri!r} cannot be read now: no MCP server here is known to have it, "
                f"and {', '.join(unasked)} cannot be asked now (offline or out of use) and has "
                "not listed its resources yet"
            )
            raise MCPError(INTERNAL_ERROR, msg)
        servers = {agent.name for agent in agents}
        if len(servers) == 1:
            return sorted(agents, key=lambda agent: agent not in live)
        msg = f"Unknown resource: {uri!r}; no MCP server here lists it or has a template that could make it"
        raise MCPError(INVALID_PARAMS, msg)

    def changed(self, agent_id: str) -> None:
        """The server of `agent_id` said its resources changed: a read may list it again now."""
        self._relisted.pop(agent_id, None)

    async def learn(self) -> None:
        """List what the live servers not listed yet offer (one just connected or registered):
        reads know their resources, and prompt names go to servers in the router's order. A
        server is tried at most every 5 s: one that fails is not asked again on each change."""
        servers, usable = self._servers()
        now = time.monotonic()
        due = [
            agent
            for agent in servers
            if agent.agent_id in usable and now - self._learned.get(agent.agent_id, -_RELIST_S) >= _RELIST_S
        ]
        self._learned.update(dict.fromkeys((agent.agent_id for agent in due), now))
        fresh = [agent for agent in due if agent.agent_id not in self._uris and _offers(agent, _resources)]
        await asyncio.gather(
            self._relist(fresh), self._prompts.learn([agent for agent in due if _offers(agent, _prompts)])
        )

    async def _relist(self, agents: list[MCPServerAgent]) -> None:
        """List the resources and templates of `agents`; a read that would list them meanwhile
        waits for this listing instead."""
        async with self._relisting:
            # Those another listing did not just list, while this one waited.
            agents = [agent for agent in agents if self._stale(agent)]
            if agents:
                await asyncio.gather(self._list_resources(agents), self._list_templates(agents))
                self._relisted.update(dict.fromkeys((agent.agent_id for agent in agents), time.monotonic()))

    def _stale(self, agent: MCPServerAgent) -> bool:
        return time.monotonic() - self._relisted.get(agent.agent_id, -_RELIST_S) >= _RELIST_S

    def note_links(self, blocks: Sequence[ContentBlock], agent_id: str | None) -> None:
        """A tool result `agent_id` gave: the resources it links are read from that server."""
        links = self._links
        for block in blocks:
            if isinstance(block, ResourceLink) and agent_id is not None:
                links[block.uri] = agent_id
                links.move_to_end(block.uri)
                if len(links) > _MAX_LINKS:
                    links.popitem(last=False)

    def _known_owners(
        self, agents: list[MCPServerAgent], live: list[MCPServerAgent], uri: str, *, link_alone: bool = False
    ) -> list[MCPServerAgent]:
        """The server that has `uri` as far as is known, its replicas standing in: the first (in
        the router's order) of those that listed it, else of those with a template that could
        make it; the server whose tool linked it among them, or, with `link_alone`, when none
        claims it (after listing them again). The linking agent first, then the live ones."""
        claimants = [agent for agent in agents if uri in self._uris.get(agent.agent_id, ())] or [
            agent for agent in agents if makes(self._templates.get(agent.agent_id, ()), uri)
        ]
        linked = self._links.get(uri)
        linker = next((agent for agent in agents if agent.agent_id == linked), None)
        if linker is not None and (linker in claimants or (link_alone and not claimants)):
            server = linker.name
            claimants = claimants or agents
        elif claimants:
            server = claimants[0].name
        else:
            return []
        owners = [agent for agent in claimants if agent.name == server]
        return sorted(owners, key=lambda agent: (agent is not linker, agent not in live))

    async def _resources_of(self, agents: list[MCPServerAgent], live: list[MCPServerAgent]) -> list[Resource]:
        listed = await self._list_resources(live)
        return self._merged.first_of(listed, agents, lambda resource: resource.uri, "resource")

    async def _templates_of(
        self, agents: list[MCPServerAgent], live: list[MCPServerAgent]
    ) -> list[ResourceTemplate]:
        listed = await self._list_templates(live)
        return self._merged.first_of(
            listed, agents, lambda template: template.uri_template, "resource template"
        )

    async def _list_resources(self, agents: list[MCPServerAgent]) -> dict[str, list[Resource]]:
        listed = await gather(agents, resource_page, "resources")
        for agent_id, resources in listed.items():
            self._uris[agent_id] = frozenset(resource.uri for resource in resources)
        return listed

    async def _list_templates(self, agents: list[MCPServerAgent]) -> dict[str, list[ResourceTemplate]]:
        listed = await gather(agents, template_page, "resource templates")
        self._templates.update(listed)
        return listed

    # -- prompts -----------------------------------------------------------------------------

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListPromptsResult:
        self._seen(ctx)
        listing = partial(self._prompts.listing, *self._upstreams(ctx, _prompts))
        prompts, cursor = await self._pages.page("prompts", params, self._who(ctx), listing)
        return ListPromptsResult(prompts=prompts, next_cursor=cursor, cache_scope=self._scope())

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams
    ) -> GetPromptResult:
        what = f"prompt {params.name!r}"
        async with self._accesses.access(ctx, "prompts/get", params.name) as answered:
            agents, live = self._upstreams(ctx, _prompts)
            entry = await self._prompts.find(agents, live, params.name)
            name, arguments = entry.upstream_name, params.arguments
            owners = self._in_use(entry.owners, live, what)
            return await first(owners, lambda client: client.get_prompt(name, arguments), what, answered)

    # -- completion --------------------------------------------------------------------------

    async def complete(
        self, ctx: ServerRequestContext[Any, Any], params: CompleteRequestParams
    ) -> CompleteResult:
        """Completions from the server of the prompt or resource template; none when it offers
        none. An unknown prompt or template is an error, as a server says it."""
        ref = params.ref
        target = ref.name if isinstance(ref, PromptReference) else ref.uri
        async with self._accesses.access(ctx, "completion/complete", target) as answered:
            return await self._complete(ctx, params, answered)

    async def _complete(
        self, ctx: ServerRequestContext[Any, Any], params: CompleteRequestParams, answered: Answered
    ) -> CompleteResult:
        ref = params.ref
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None
        if isinstance(ref, PromptReference):
            agents, live = self._upstreams(ctx, _prompts)
            entry = await self._prompts.find(agents, live, ref.name)
            owners = entry.owners
            upstream_ref: PromptReference | Any = PromptReference(type="ref/prompt", name=entry.upstream_name)
        else:
            agents, live = self._upstreams(ctx, _resources)
            owners = await self._with_template(agents, live, ref.uri)
            if not owners:
                msg = f"Resource template {ref.uri!r} not found on any MCP server here"
                raise MCPError(INVALID_PARAMS, msg)
            upstream_ref = ref
        owners = [agent for agent in owners if _offers(agent, _completions)]
        if not owners:
            return _NO_COMPLETION
        what = f"completion of {ref}"
        owners = self._in_use(owners, live, what)
        return await first(
            owners, lambda client: client.complete(upstream_ref, argument, context), what, answered
        )

    async def _with_template(
        self, agents: list[MCPServerAgent], live: list[MCPServerAgent], uri_template: str
    ) -> list[MCPServerAgent]:
        """Those of `agents` that list the template, listed again when none is known to."""

        def listing(templates: dict[str, list[ResourceTemplate]]) -> list[MCPServerAgent]:
            return [
                agent for agent in agents if has_template(templates.get(agent.agent_id, ()), uri_template)
            ]

        return listing(self._templates) or listing(await self._list_templates(live))

    # -- which servers -----------------------------------------------------------------------

    def _in_use(
        self, owners: list[MCPServerAgent], live: list[MCPServerAgent], what: str
    ) -> list[MCPServerAgent]:
        """Those of `owners` worth asking now: one the router took out of use (its health probe
        failed: it may hang; draining; resting after failures) is not waited for, as no call is
        sent to it. `MCPError` (internal error) naming each and why, when none is left."""
        asked = [agent for agent in owners if agent in live]
        if asked or not owners:
            return asked
        infos = {info.agent_id: info for info in self._router.catalog()}
        why = "; ".join(_why_not(agent, infos.get(agent.agent_id)) for agent in owners)
        msg = f"{what} cannot be read now: {why}"
        raise MCPError(INTERNAL_ERROR, msg)

    def _servers(self, principal: str | None = None) -> tuple[list[MCPServerAgent], set[str]]:
        """The MCP servers among the router's agents (those `principal` may reach one tool of,
        under security), in the router's order, and the ids of those worth asking now:
        connected, and not taken out by the router (offline, draining, quarantined by its
        breaker). One catalog for both."""
        servers: list[MCPServerAgent] = []
        usable: set[str] = set()
        for info in self._router.catalog(principal=principal):
            agent = self._router.agent(info.agent_id)
            if isinstance(agent, MCPServerAgent):
                servers.append(agent)
                if agent.connected and info.state not in UNUSABLE_STATES and info.quarantined_for_s <= 0:
                    usable.add(agent.agent_id)
        return servers, usable

    def _mcp_agents(self) -> list[MCPServerAgent]:
        return self._servers()[0]

    def _upstreams(
        self, ctx: ServerRequestContext[Any, Any], offers: Callable[[ServerCapabilities], object]
    ) -> tuple[list[MCPServerAgent], list[MCPServerAgent]]:
        """The MCP servers that offer something (`offers`, as their last session said, offline
        or not) to the client of `ctx` (those it may reach one tool of, under security), and
        those of them worth asking now (`_servers`)."""
        servers, usable = self._servers(self._who(ctx))
        agents = [agent for agent in servers if _offers(agent, offers)]
        return agents, [agent for agent in agents if agent.agent_id in usable]

    def _who(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        return None if self._router.guard is None else self._principal_of(ctx)

    def _scope(self) -> Literal["public", "private"]:
        """What a listing may be cached as: per client when what it shows depends on who asks."""
        return "public" if self._router.guard is None else "private"


def _offers(agent: MCPServerAgent, offers: Callable[[ServerCapabilities], object]) -> bool:
    capabilities = agent.server_capabilities
    return capabilities is not None and offers(capabilities) is not None


def _resources(capabilities: ServerCapabilities) -> object:
    return capabilities.resources


def _prompts(capabilities: ServerCapabilities) -> object:
    return capabilities.prompts


def _completions(capabilities: ServerCapabilities) -> object:
    return capabilities.completions


def _template_key(template: ResourceTemplate) -> str:
    return template.uri_template


def _why_not(agent: MCPServerAgent, info: AgentInfo | None) -> str:
    if info is None:
        return f"MCP server {agent.agent_id} is gone"
    if info.state in UNUSABLE_STATES or not agent.connected:
        reason = f" ({info.state_reason})" if info.state_reason else ""
        return f"MCP server {agent.agent_id} is {info.state}{reason}"
    return f"MCP server {agent.agent_id} rests {info.quarantined_for_s:.0f} s more after failing"
