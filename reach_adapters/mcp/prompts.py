"""The prompts of the router's upstream MCP servers under the names the router serves them as.

A prompt keeps its name, with its server's ``prefix``. Servers of one name are replicas: one
prompt. A prompt of a server of another name whose name is already served is served as
``<name>_<server name>`` (or with a number after it, should that be some server's own prompt),
with a warning. Names go to servers in the router's order, from each one's last listing, kept
while it is offline: a namesake's prompt never takes over a name while its owner is away.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, Prompt

from reach_adapters.mcp.agent import MCPServerAgent
from reach_adapters.mcp.upstream_requests import gather, prompt_page

__all__ = ["Prompts", "ServedPrompt"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class ServedPrompt:
    """A prompt as served here, the name its server gives it, and the servers that offer it."""

    prompt: Prompt
    upstream_name: str
    server: str
    owners: list[MCPServerAgent] = field(default_factory=list)


class Prompts:
    """The prompt table of one router's MCP server."""

    def __init__(self, mcp_agents: Callable[[], Iterable[MCPServerAgent]]) -> None:
        self._mcp_agents = mcp_agents
        # Each server's prompts as last listed, by agent id.
        self._listed: dict[str, list[Prompt]] = {}
        self._warned: set[tuple[str, str]] = set()

    async def listing(self, agents: list[MCPServerAgent], live: list[MCPServerAgent]) -> list[Prompt]:
        """The prompts `agents` offer now, listed afresh from those `live`: those a live server
        offers."""
        table = await self._list(agents, live)
        return [entry.prompt for entry in table.values() if any(agent in live for agent in entry.owners)]

    async def find(self, agents: list[MCPServerAgent], live: list[MCPServerAgent], name: str) -> ServedPrompt:
        """The prompt served as `name` among those `agents` offer (its servers live or not);
        those `live` listed afresh when it is not known yet. `MCPError` (invalid params) when
        there is none."""
        entry = self._table(agents).get(name) or (await self._list(agents, live)).get(name)
        if entry is None:
            msg = f"Unknown prompt: {name!r}; list the prompts to see what this router's servers offer"
            raise MCPError(INVALID_PARAMS, msg)
        return entry

    async def learn(self, live: list[MCPServerAgent]) -> None:
        """List the prompts of the servers of `live` not listed yet (one just connected): the
        names go to servers in the router's order from the start, not as clients happen to list."""
        unknown = [agent for agent in live if agent.agent_id not in self._listed]
        if unknown:
            self._listed.update(await gather(unknown, prompt_page, "prompts"))

    async def _list(
        self, agents: list[MCPServerAgent], live: list[MCPServerAgent]
    ) -> dict[str, ServedPrompt]:
        self._listed.update(await gather(live, prompt_page, "prompts"))
        return self._table(agents)

    def _table(self, agents: list[MCPServerAgent]) -> dict[str, ServedPrompt]:
        """Every known prompt under its served name, with those of `agents` as its owners; only
        the prompts some of `agents` offer."""
        known = [
            (agent, agent.name, prompt)
            for agent in self._mcp_agents()
            for prompt in self._listed.get(agent.agent_id, ())
        ]
        # Every server's own names first: a renamed prompt never takes one of them.
        taken = {agent.options.prefix + prompt.name for agent, _, prompt in known}
        table: dict[str, ServedPrompt] = {}
        renames: dict[tuple[str, str], str] = {}
        usable = {agent.agent_id for agent in agents}
        for agent, server, prompt in known:
            name = agent.options.prefix + prompt.name
            entry = table.get(name)
            if entry is not None and entry.server != server:
                if (name, server) not in renames:
                    renames[name, server] = self._renamed(name, server, entry.server, taken)
                name = renames[name, server]
                entry = table.get(name)
            if entry is None:
                entry = table[name] = ServedPrompt(
                    prompt.model_copy(update={"name": name}), prompt.name, server
                )
            if agent.agent_id in usable and agent not in entry.owners:
                entry.owners.append(agent)
        return {name: entry for name, entry in table.items() if entry.owners}

    def _renamed(self, name: str, server: str, first: str, taken: set[str]) -> str:
        renamed = f"{name}_{server}"
        number = 2
        while renamed in taken:
            renamed = f"{name}_{server}_{number}"
            number += 1
        taken.add(renamed)
        if (name, server) not in self._warned:
            self._warned.add((name, server))
            logger.warning(
                "MCP servers %r and %r both offer a prompt %r: %r's is served as %r",
                first,
                server,
                name,
                server,
                renamed,
            )
        return renamed
