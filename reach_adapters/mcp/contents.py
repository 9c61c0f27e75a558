"""The resources and prompts of the router's upstream MCP servers, served again by its MCP server.

A client of the router reads what it could read from each upstream directly: the resources,
resource templates and prompts of every connected MCP server among the router's agents that the
client may reach (one of whose tools it may call; every server when the router runs without
security). Listings are gathered from those servers when a client asks, in one page. A read goes
to the servers that listed the URI, else to those with a template that could make it, else to
each in turn; a prompt goes to the server that lists it. Replicas (servers of one name) stand in
for each other while one is offline.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    Prompt,
    PromptReference,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    ServerCapabilities,
)

from reach_adapters.mcp.agent import MCPServerAgent
from reach_adapters.mcp.upstream_requests import PROMPTS, RESOURCES, TEMPLATES, first, gather
from reach_adapters.router import Router, parse_agent_id

__all__ = ["Contents"]

logger = logging.getLogger(__name__)


_EXPRESSION = re.compile(r"\{[^{}]*\}")
_NO_COMPLETION = CompleteResult(completion=Completion(values=[]))


@dataclass(slots=True)
class _Prompt:
    """A prompt as served here, the name its server gives it, and the servers that list it."""

    prompt: Prompt
    upstream_name: str
    server: str
    owners: list[MCPServerAgent] = field(default_factory=list)


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
        # What each server listed last, by agent id: where reads and completions look first.
        self._uris: dict[str, frozenset[str]] = {}
        self._templates: dict[str, list[ResourceTemplate]] = {}
        # Each server's prompts as last listed, kept while it is offline so that the names served
        # stay the same: a namesake's prompt does not take over a name while its owner is away.
        self._prompts: dict[str, list[Prompt]] = {}
        self._renamed: set[tuple[str, str]] = set()

    # -- resources ---------------------------------------------------------------------------

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        _one_page(params)
        self._seen(ctx)
        resources: dict[str, Resource] = {}
        for listed in (await self._list_resources(self._upstreams(ctx, _resources))).values():
            for resource in listed:
                resources.setdefault(resource.uri, resource)
        return ListResourcesResult(resources=list(resources.values()), cache_scope=self._scope())

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        _one_page(params)
        self._seen(ctx)
        templates: dict[str, ResourceTemplate] = {}
        for listed in (await self._list_templates(self._upstreams(ctx, _resources))).values():
            for template in listed:
                templates.setdefault(template.uri_template, template)
        return ListResourceTemplatesResult(
            resource_templates=list(templates.values()), cache_scope=self._scope()
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        uri = params.uri
        agents = self._upstreams(ctx, _resources)
        owners = await self._owners(agents, uri)
        guessing = not owners
        result = await first(
            owners or agents, lambda client: client.read_resource(uri), f"resource {uri!r}", guessing=guessing
        )
        if self._router.guard is not None:
            result.cache_scope = "private"
        return result

    async def owners(self, ctx: ServerRequestContext[Any, Any], uri: str) -> list[MCPServerAgent]:
        """The servers the client of `ctx` may reach that have resource `uri`: that listed it,
        else that have a template that could make it."""
        return await self._owners(self._upstreams(ctx, _resources), uri)

    async def _owners(self, agents: list[MCPServerAgent], uri: str) -> list[MCPServerAgent]:
        owners = [agent for agent in agents if uri in self._uris.get(agent.agent_id, ())]
        if not owners:
            # Listed since the last listing, or never: ask again before guessing.
            await self._list_resources(agents)
            owners = [agent for agent in agents if uri in self._uris.get(agent.agent_id, ())]
        return owners or await self._made_by_template(agents, uri)

    async def _list_resources(self, agents: list[MCPServerAgent]) -> dict[str, list[Resource]]:
        listed = await gather(agents, RESOURCES, "resources")
        for agent_id, resources in listed.items():
            self._uris[agent_id] = frozenset(resource.uri for resource in resources)
        return listed

    async def _list_templates(self, agents: list[MCPServerAgent]) -> dict[str, list[ResourceTemplate]]:
        listed = await gather(agents, TEMPLATES, "resource templates")
        self._templates.update(listed)
        return listed

    async def _made_by_template(self, agents: list[MCPServerAgent], uri: str) -> list[MCPServerAgent]:
        """The servers with a resource template that could make `uri`, listed afresh."""
        templates = await self._list_templates(agents)
        return [agent for agent in agents if _makes(templates.get(agent.agent_id, ()), uri)]

    # -- prompts -----------------------------------------------------------------------------

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListPromptsResult:
        _one_page(params)
        self._seen(ctx)
        table = await self._prompt_table(self._upstreams(ctx, _prompts))
        return ListPromptsResult(
            prompts=[entry.prompt for entry in table.values()], cache_scope=self._scope()
        )

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams
    ) -> GetPromptResult:
        entry = await self._find_prompt(ctx, params.name)
        arguments = params.arguments
        return await first(
            entry.owners,
            lambda client: client.get_prompt(entry.upstream_name, arguments),
            f"prompt {params.name!r}",
        )

    async def _find_prompt(self, ctx: ServerRequestContext[Any, Any], name: str) -> _Prompt:
        agents = self._upstreams(ctx, _prompts)
        entry = self._table(agents).get(name)
        if entry is None:
            entry = (await self._prompt_table(agents)).get(name)
        if entry is None:
            msg = f"Unknown prompt: {name!r}; list the prompts to see what this router's servers offer"
            raise MCPError(INVALID_PARAMS, msg)
        return entry

    async def _prompt_table(self, agents: list[MCPServerAgent]) -> dict[str, _Prompt]:
        """The prompts of `agents`, listed afresh, under the names they are served as."""
        self._prompts.update(await gather(agents, PROMPTS, "prompts"))
        return self._table(agents)

    def _table(self, agents: list[MCPServerAgent]) -> dict[str, _Prompt]:
        """The prompts `agents` serve, each under its name with the server's ``prefix``: the
        first server (in the router's order, whether reachable or not) keeps a name, and a
        later server of another name serves its namesake as ``<name>_<server name>``."""
        usable = {agent.agent_id for agent in agents}
        table: dict[str, _Prompt] = {}
        for agent in self._mcp_agents():
            server = parse_agent_id(agent.agent_id).type
            for prompt in self._prompts.get(agent.agent_id, ()):
                name = agent.options.prefix + prompt.name
                taken = table.get(name)
                if taken is not None and taken.server != server:
                    self._warn_renamed(name, taken.server, server)
                    name = f"{name}_{server}"
                entry = table.get(name)
                if entry is None:
                    entry = table[name] = _Prompt(
                        prompt.model_copy(update={"name": name}), prompt.name, server
                    )
                if agent.agent_id in usable and agent not in entry.owners:
                    entry.owners.append(agent)
        return {name: entry for name, entry in table.items() if entry.owners}

    def _warn_renamed(self, name: str, first: str, later: str) -> None:
        if (name, later) not in self._renamed:
            self._renamed.add((name, later))
            logger.warning(
                "MCP servers %r and %r both offer a prompt %r: %r's is served as %r",
                first,
                later,
                name,
                later,
                f"{name}_{later}",
            )

    # -- completion --------------------------------------------------------------------------

    async def complete(
        self, ctx: ServerRequestContext[Any, Any], params: CompleteRequestParams
    ) -> CompleteResult:
        """Completions from the server of the prompt or resource template; none when no server
        that offers completions has it."""
        ref = params.ref
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None
        if isinstance(ref, PromptReference):
            entry = await self._find_prompt(ctx, ref.name)
            owners = [agent for agent in entry.owners if _completions(agent)]
            upstream_ref: PromptReference | Any = PromptReference(type="ref/prompt", name=entry.upstream_name)
        else:
            agents = [agent for agent in self._upstreams(ctx, _resources) if _completions(agent)]
            templates = await self._list_templates(agents)
            owners = [agent for agent in agents if _has_template(templates.get(agent.agent_id, ()), ref.uri)]
            upstream_ref = ref
        if not owners:
            return _NO_COMPLETION
        return await first(
            owners, lambda client: client.complete(upstream_ref, argument, context), f"completion of {ref}"
        )

    # -- which servers -----------------------------------------------------------------------

    def _mcp_agents(self) -> Iterable[MCPServerAgent]:
        for info in self._router.catalog():
            agent = self._router.agent(info.agent_id)
            if isinstance(agent, MCPServerAgent):
                yield agent

    def _upstreams(
        self, ctx: ServerRequestContext[Any, Any], offers: Callable[[ServerCapabilities], object]
    ) -> list[MCPServerAgent]:
        """The connected MCP servers that offer something (`offers`) to the client of `ctx`:
        those it may reach one tool of, when the router runs with security."""
        if self._router.guard is None:
            agents: Iterable[MCPServerAgent] = self._mcp_agents()
        else:
            principal = self._principal_of(ctx)
            reached = {info.agent_id for info in self._router.catalog(principal=principal)}
            agents = (agent for agent in self._mcp_agents() if agent.agent_id in reached)
        out = []
        for agent in agents:
            capabilities = agent.server_capabilities
            if capabilities is not None and offers(capabilities) is not None:
                out.append(agent)
        return out

    def _scope(self) -> Any:
        """What a listing may be cached as: per client when what it shows depends on who asks."""
        return "public" if self._router.guard is None else "private"


def _resources(capabilities: ServerCapabilities) -> object:
    return capabilities.resources


def _prompts(capabilities: ServerCapabilities) -> object:
    return capabilities.prompts


def _completions(agent: MCPServerAgent) -> bool:
    capabilities = agent.server_capabilities
    return capabilities is not None and capabilities.completions is not None


def _one_page(params: PaginatedRequestParams | None) -> None:
    if params is not None and params.cursor is not None:
        msg = f"Invalid cursor {params.cursor!r}: this server lists everything in one page"
        raise MCPError(INVALID_PARAMS, msg)


def _makes(templates: Iterable[ResourceTemplate], uri: str) -> bool:
    """Whether one of `templates` (RFC 6570) could expand to `uri`: each expression matches any text."""
    return any(_pattern(template.uri_template).fullmatch(uri) for template in templates)


@lru_cache(maxsize=1024)
def _pattern(template: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in _EXPRESSION.split(template)), re.DOTALL)


def _has_template(templates: Iterable[ResourceTemplate], uri_template: str) -> bool:
    return any(template.uri_template == uri_template for template in templates)
