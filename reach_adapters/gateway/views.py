"""What ``/api/health`` and ``/api/catalog`` (and ``reach catalog``) show: the router's own
models, with the free text that may quote a command line, URL or error masked of secrets."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from reach_adapters.gateway.gateway import GatewayStatus
from reach_adapters.router.catalog import AgentInfo
from reach_adapters.security import redact_text

__all__ = ["catalog_view", "health_view"]


def health_view(status: GatewayStatus) -> dict[str, Any]:
    out = status.model_dump(mode="json")
    out["problems"] = {agent_id: redact_text(problem) for agent_id, problem in status.problems.items()}
    if status.last_error is not None:
        out["last_error"] = redact_text(status.last_error)
    return out


def catalog_view(agents: Iterable[AgentInfo], node: str | None = None) -> list[dict[str, Any]]:
    """The catalog as JSON; in a cluster, `node` (this node's id) stands for the agents hosted here."""
    out = []
    for info in agents:
        shown = info.model_dump(mode="json")
        if info.node is None and node is not None:
            shown["node"] = node
        shown["state_reason"] = redact_text(info.state_reason)
        if info.problem is not None:
            shown["problem"] = redact_text(info.problem)
        out.append(shown)
    return out
