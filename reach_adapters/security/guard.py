"""The router's `Guard` built from ``security.yaml``: who calls, what it may reach, how often."""

from __future__ import annotations

import os
from collections.abc import Mapping

from middleware import MetaInfo
from middleware.fast import amend
from reach_adapters.router import ErrorKind, ReachMessage, Refusal
from reach_adapters.security.errors import HopTokenError
from reach_adapters.security.hoptokens import HopTokens
from reach_adapters.security.permissions import Globs, Permissions
from reach_adapters.security.quotas import Quotas
from reach_adapters.security.spec import SecuritySpec

__all__ = ["SecurityGuard"]


_ForbidKey = tuple[str, str, str, str]
# Agent ids come from registrations and signed tokens; the bound is for safety, not expected use.
_MAX_CACHED_AGENTS = 10_000


class SecurityGuard:
    """Enforces a `SecuritySpec` on a router (``Router(guard=...)`` or `Router.set_guard`).

    Built again on each reload of security.yaml; pass the old guard's `quotas` so counts carry on.
    """

    def __init__(
        self,
        spec: SecuritySpec,
        *,
        environ: Mapping[str, str] | None = None,
        quotas: Quotas | None = None,
    ) -> None:
        self.spec = spec
        self.quotas = Quotas() if quotas is None else quotas
        self._principals = spec.principals
        self._permissions = {name: Permissions(name, p.allow) for name, p in spec.principals.items()}
        self._agent_globs = [(Globs(p.agent_ids), name) for name, p in spec.principals.items() if p.agent_ids]
        self._agents: dict[str, str | None] = {}
        self._forbids: dict[_ForbidKey, str | None] = {}
        env = os.environ if environ is None else environ
        self.hops = None if spec.hop_tokens is None else HopTokens.from_spec(spec.hop_tokens, env)

    # -- the Guard protocol ------------------------------------------------------------------

    async def admit(self, message: ReachMessage, calling_agent: str | None) -> Refusal | None:
        meta = message.meta_info
        agent = calling_agent
        token = meta.caller_token
        if token is not None and self.hops is not None:
            refusal = self._gateway_only(meta.principal)
            if refusal is not None:
                return refusal
            target = meta.capability or message.routing_hint.target or ""
            try:
                agent = self.hops.verify(token, target, meta.task_id)
            except HopTokenError as exc:
                return Refusal(ErrorKind.PERMISSION_DENIED, f"call refused: {exc}")
        if agent is not None:
            # An agent passing a task on calls as its own principal, never as its caller's.
            principal = self.agent_principal(agent)
            if principal is None:
                error = (
                    f"agent {agent!r} may not reach onward: no principal in security.yaml names it "
                    "in 'agent_ids'; add it to the principal whose permissions it should have"
                )
                return Refusal(ErrorKind.PERMISSION_DENIED, error)
            amend(meta, {"principal": principal})
        principal = meta.principal
        if principal is None:
            return None
        spec = self._principals.get(principal)
        if spec is None:
            error = f"principal {principal!r} is not declared in security.yaml; add it under 'principals'"
            return Refusal(ErrorKind.PERMISSION_DENIED, error)
        permissions = self._permissions[principal]
        rule = permissions.nothing() if meta.capability is None else permissions.capability(meta.capability)
        if rule is not None:
            return Refusal(ErrorKind.PERMISSION_DENIED, f"call refused by security.yaml: {rule}")
        return await self.quotas.take(principal, spec)

    def forbids(self, principal: str, capability: str, agent_id: str, namespace: str) -> str | None:
        key = (principal, capability, agent_id, namespace)
        try:
            return self._forbids[key]
        except KeyError:
            pass
        permissions = self._permissions.get(principal)
        if permissions is None:
            # Unknown names are not cached: callers choose them, the cache would grow without end.
            return f"principal {principal!r} is not declared in security.yaml"
        rule = self._forbids[key] = permissions.forbids(capability, agent_id, namespace)
        return rule

    async def fan_out(self, principal: str, targets: int) -> Refusal | None:
        spec = self._principals.get(principal)
        if spec is None:
            return None
        limit = spec.max_broadcast_targets or self.spec.max_broadcast_targets
        if targets > limit:
            error = (
                f"the broadcast would reach {targets} agents, over the limit of {limit} for principal "
                f"{principal!r} (max_broadcast_targets in security.yaml); narrow it with namespace= "
                "or version="
            )
            return Refusal(ErrorKind.QUOTA_EXCEEDED, error)
        return None if targets <= 1 else await self.quotas.take(principal, spec, targets - 1)

    def sees_all(self, principal: str) -> bool:
        spec = self._principals.get(principal)
        return spec is not None and spec.role == "admin"

    def hop_token(self, meta: MetaInfo, agent_id: str, target: str) -> str | None:
        if self.hops is None:
            return None
        return self.hops.mint(agent_id, target, meta.task_id)

    def _gateway_only(self, principal: str | None) -> Refusal | None:
        """Hop tokens come from gateways: another caller holding one (a server it was sent to)
        may not use it to act as that gateway's agent. The program itself may."""
        if principal is None:
            return None
        spec = self._principals.get(principal)
        if spec is not None and spec.role == "gateway":
            return None
        error = (
            f"principal {principal!r} sent a hop token, which only principals with role: gateway "
            "(another reach serve) may send; give that gateway's principal role: gateway"
        )
        return Refusal(ErrorKind.PERMISSION_DENIED, error)

    # -- lookups -----------------------------------------------------------------------------

    def agent_principal(self, agent_id: str) -> str | None:
        """The principal whose ``agent_ids`` name `agent_id` (the first in the file), or None."""
        try:
            return self._agents[agent_id]
        except KeyError:
            pass
        found = next((name for globs, name in self._agent_globs if globs.match(agent_id)), None)
        if len(self._agents) < _MAX_CACHED_AGENTS:
            self._agents[agent_id] = found
        return found
