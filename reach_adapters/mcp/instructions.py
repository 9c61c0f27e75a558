"""The instructions the router's MCP server gives its clients, which hosts put in the model's
context: the operator's own, then one section per upstream MCP server that gives instructions,
headed by the server's name and its tools as the router serves them, so that a model knows which
instructions go with which tools.

They are made when a client asks (``initialize``, ``server/discover``), for the tools that client
may reach, and kept until the catalog changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from reach_adapters.mcp.agent import MCPServerAgent
from reach_adapters.router import Router

__all__ = ["MAX_SERVER_CHARS", "MAX_TOOLS_NAMED", "Instructions", "compose"]

# An upstream's text beyond this is cut (saying so): a host puts it in every conversation, and
# one server's essay must not crowd out the rest. The operator's own text is never cut.
MAX_SERVER_CHARS = 8_000
# A section's heading names at most this many of the server's tools, then says how many more.
MAX_TOOLS_NAMED = 50
# The requests whose results carry the server's instructions.
_INTRODUCTIONS = frozenset({"initialize", "server/discover"})
_INSTRUCTIONS = "instructions"


class Instructions:
    """The server's instructions, served through the SDK's middleware: the results of
    ``initialize`` and ``server/discover`` get those for the requesting principal's tools."""

    def __init__(
        self,
        router: Router,
        own: str | None,
        principal_of: Callable[[ServerRequestContext[Any, Any]], str | None],
    ) -> None:
        self.own = own
        self._router = router
        self._principal_of = principal_of
        # By principal (None: all tools), until the catalog changes.
        self._made: dict[str | None, str | None] = {}

    def forget(self) -> None:
        """The catalog changed (from any thread): make them again when next asked."""
        self._made = {}

    def text(self, principal: str | None = None) -> str | None:
        """The instructions for a client `principal` (None: one that may reach every tool)."""
        if self._router.guard is None:
            principal = None
        made = self._made
        if principal not in made:
            made[principal] = compose(self._router, self.own, principal)
        return made[principal]

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method in _INTRODUCTIONS and isinstance(result, dict):
            text = self.text(self._principal_of(ctx))
            if text is None:
                result.pop(_INSTRUCTIONS, None)
            else:
                result[_INSTRUCTIONS] = text
        return result


def compose(router: Router, own: str | None, principal: str | None = None) -> str | None:
    """`own` (the operator's text, kept whole) followed by a section per upstream MCP server of
    `router` that gives instructions and serves a tool `principal` may reach; None when there is
    nothing to say."""
    parts = [own] if own else []
    parts += [_section(name, tools, text) for name, (text, tools) in _upstreams(router, principal).items()]
    return "\n\n".join(parts) or None


def _upstreams(router: Router, principal: str | None) -> dict[str, tuple[str, list[str]]]:
    """Per server name: its instructions and the tools it serves here (what `principal` may
    reach), in catalog order. Replicas (one name) are one server: the first one's text, every
    replica's tools; an offline one keeps the text of its last session."""
    found: dict[str, tuple[str, list[str]]] = {}
    for info in router.catalog(principal=principal):
        agent = router.agent(info.agent_id)
        if not isinstance(agent, MCPServerAgent):
            continue
        text = agent.instructions
        if not text or not text.strip():
            continue
        name = agent.name
        entry = found.setdefault(name, (text, []))
        tools = entry[1]
        tools += [cap.name for cap in info.capabilities if cap.name not in tools]
    return {name: entry for name, entry in found.items() if entry[1]}


def _section(name: str, tools: list[str], text: str) -> str:
    named = ", ".join(tools[:MAX_TOOLS_NAMED])
    if len(tools) > MAX_TOOLS_NAMED:
        named += f" and {len(tools) - MAX_TOOLS_NAMED} more"
    heading = f'## Instructions of the MCP server "{name}", for its tools {named}'
    if len(text) > MAX_SERVER_CHARS:
        text = (
            text[:MAX_SERVER_CHARS].rstrip()
            + f"\n\n[cut by agent-reach at {MAX_SERVER_CHARS} of its {len(text)} characters]"
        )
    return f"{heading}\n\n{text.strip()}"
