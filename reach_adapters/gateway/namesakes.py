"""MCP servers of different names that serve a tool of the same name and schemas.

The router takes them for replicas of one capability and sends each call to either, as it should
for two copies of one server; but two servers of different names are seldom copies (a filesystem
server on another folder, a database server on another database), and then about half the calls
fail. The router cannot tell: it is said once, when `reach serve` loads its directory.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from reach_adapters.mcp import MCPServerAgent
from reach_adapters.router import Capability, parse_agent_id
from reach_adapters.router.agent import Agent

__all__ = ["warn_shared_tools"]

logger = logging.getLogger(__name__)


def warn_shared_tools(agents: Iterable[Agent]) -> None:
    """Log a warning for each tool that MCP servers of more than one name serve as replicas."""
    served: dict[tuple[str, str], dict[str, Capability]] = {}
    for agent in agents:
        if not isinstance(agent, MCPServerAgent):
            continue
        ident = parse_agent_id(agent.agent_id)
        for cap in agent.capabilities:
            served.setdefault((ident.namespace, cap.name), {}).setdefault(ident.type, cap)
    for (_, tool), by_server in served.items():
        first, *others = by_server.values()
        if others and all(first.same_schemas(cap) for cap in others):
            logger.warning(
                "MCP servers %s all serve %r, with the same schemas: they are served as replicas of "
                "one capability, each call going to one of them; if they are not copies of one "
                "server (another folder, account or database), give each a prefix",
                ", ".join(sorted(by_server)),
                tool,
            )
