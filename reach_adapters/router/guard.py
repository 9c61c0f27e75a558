"""The extension point through which security rules reach the router: who calls, what it may
reach, how often. The router enforces what a `Guard` says; `reach_adapters.security` builds one
from ``security.yaml``.

Calls without a principal come from the program that owns the router and are not restricted; a
gateway always names the principal it authenticated. An agent's onward call is the calling
agent's: the guard names its principal from the delivery it runs in, or from a signed hop token
when the call crossed from another gateway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from middleware import Fault, MetaInfo, ReachMessage, ReachResult, ResultStatus
from reach_adapters.router.outcomes import ErrorKind, error_result

__all__ = ["Guard", "Refusal", "refused_result"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a call may not go ahead: `kind` is `ErrorKind.PERMISSION_DENIED` or
    `ErrorKind.QUOTA_EXCEEDED`; `error` names the rule; `retry_after_s` when waiting helps."""

    kind: ErrorKind
    error: str
    retry_after_s: float | None = None


class Guard(Protocol):
    async def admit(self, message: ReachMessage, calling_agent: str | None) -> Refusal | None:
        """Before selection: settle who calls (setting ``meta_info.principal`` for an agent's
        onward call, `calling_agent` being the agent whose delivery the call runs in), refuse a
        caller or a request it may not make, and take one call from its quota."""
        ...

    def forbids(self, principal: str, capability: str, agent_id: str, namespace: str) -> str | None:
        """The rule that keeps `principal` from reaching `capability` on `agent_id`, or None."""
        ...

    async def fan_out(self, principal: str, targets: int) -> Refusal | None:
        """A broadcast to `targets` agents: refused past the fan-out limit; it costs that many
        calls of the quota (one was taken on admission)."""
        ...

    def sees_all(self, principal: str) -> bool:
        """Whether `principal` may read every caller's tasks and records (an admin)."""
        ...

    def hop_token(self, meta: MetaInfo, agent_id: str, target: str) -> str | None:
        """A token for agent `agent_id` passing the task on to `target` on another gateway, or None
        when hop tokens are not configured."""
        ...


def refused_result(message: ReachMessage, refusal: Refusal) -> ReachResult:
    """The `rejected` result of a refused call: the caller's doing, never an agent's."""
    result = error_result(message, ResultStatus.REJECTED, refusal.kind, refusal.error, fault=Fault.CALLER)
    if refusal.retry_after_s is not None:
        result.extra["retry_after_s"] = refusal.retry_after_s
    return result
