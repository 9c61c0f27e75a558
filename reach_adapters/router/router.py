"""The router: register agents, pick the right one for each task, deliver it, fall back."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from pydantic import ValidationError

from middleware import (
    MergePolicy,
    MetaInfo,
    NotJsonSafeError,
    ReachMessage,
    ReachResult,
    ResultStatus,
    RoutingHint,
    Timings,
    ensure_json,
)
from reach_adapters.errors import InvalidMessageError, UnknownAgentError, describe_validation_error
from reach_adapters.router.agent import Agent
from reach_adapters.router.broadcast import fan_out
from reach_adapters.router.capability import Capability
from reach_adapters.router.catalog import AgentInfo, agent_info
from reach_adapters.router.decisions import Attempt, DecisionLog, DecisionRecord, Exclusion
from reach_adapters.router.delivery import current_hop, deliver, error_result
from reach_adapters.router.handle import AgentHandle
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.portal import Portal
from reach_adapters.router.registry import Registry
from reach_adapters.router.selection import eligible, exclusion_reason, why_no_candidate
from reach_adapters.router.state import AgentRuntime, AgentState, Slot
from reach_adapters.router.strategies import make_strategies

__all__ = ["Router"]

logger = logging.getLogger(__name__)

_NO_CANDIDATE = ResultStatus.NO_CANDIDATE
_UNUSABLE = frozenset({AgentState.OFFLINE, AgentState.DRAINING})


class Router:
    """Finds the right agent for each task and delivers it.

    The embedded default keeps everything in memory. `route` (unicast by capability), `broadcast`
    (every candidate), `send` (one named agent) build a `ReachMessage` and call `dispatch`; each has
    a ``*_sync`` twin for synchronous code.
    """

    def __init__(self, policy: RoutingPolicy | None = None, *, default_agent: str | None = None) -> None:
        policy = policy or RoutingPolicy()
        if default_agent is not None:
            policy = RoutingPolicy(**{**policy.model_dump(), "default_agent": default_agent})
        self.policy = policy
        self._registry = Registry()
        self._decisions = DecisionLog(policy.decision_log_size)
        self._strategies = make_strategies(policy)
        self._portal = Portal()
        self._listeners: list[Callable[[], None]] = []

    # -- registration ------------------------------------------------------------------------

    def register(self, agent: Agent) -> None:
        """Add an agent; its capabilities become routable at once.

        An agent with an ``attach(handle)`` method gets an `AgentHandle` to report its state and
        capability changes later.
        """
        runtime = self._registry.add(agent)
        attach = getattr(agent, "attach", None)
        if callable(attach):
            attach(
                AgentHandle(
                    runtime.agent_id,
                    partial(self._set_state, runtime),
                    partial(self._set_capabilities, runtime),
                )
            )
        logger.info(
            "registered agent %s with capabilities %s",
            runtime.agent_id,
            [slot.capability.name for slot in runtime.slots],
        )
        self._changed()

    def deregister(self, agent_id: str) -> None:
        """Remove an agent from routing. Calls already delivered to it run to completion."""
        if self._registry.remove(agent_id) is None:
            msg = f"agent {agent_id} is not registered; see router.catalog() for the registered ids"
            raise UnknownAgentError(msg)
        logger.info("deregistered agent %s", agent_id)
        self._changed()

    def catalog(self) -> list[AgentInfo]:
        """Every registered agent with its state, load and declarations."""
        return [agent_info(runtime) for runtime in self._registry]

    def reachable(self) -> dict[str, Capability]:
        """Each capability some usable agent declares, with one declaration standing for it.

        What the LangChain toolkit and the MCP server offer as tools.
        """
        out: dict[str, Capability] = {}
        for name in self._registry.capability_names():
            for slot in self._registry.slots_named(name):
                if slot.runtime.state not in _UNUSABLE:
                    out[name] = slot.capability
                    break
        return out

    def on_catalog_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` whenever agents, their capabilities or their usability change.

        Returns a function that removes the listener.
        """
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def explain(self, task_id: str) -> DecisionRecord:
        """The decision record of a recent task: candidates, scores, exclusions, attempts."""
        return self._decisions.get(task_id)

    def close(self) -> None:
        """Stop the helper thread that serves sync calls, if one was started."""
        self._portal.close()

    # -- calling -----------------------------------------------------------------------------

    async def route(self, capability: str, payload: Any = None, **options: Any) -> ReachResult:
        """Unicast: deliver to the best agent declaring `capability`, failing over to the next.

        Options are `MetaInfo` fields (version, namespace, timeout_ms, priority, attributes, tags,
        source, task_id, trace_id) and `RoutingHint` fields (fallback, strategy).
        """
        if not isinstance(capability, str) or not capability:
            msg = f"capability must be a non-empty string, got {capability!r}; see router.catalog()"
            raise InvalidMessageError(msg)
        return await self._dispatch(self._message(payload, options, capability=capability, mode="unicast"))

    async def broadcast(
        self, capability: str, payload: Any = None, *, merge: MergePolicy = "all", **options: Any
    ) -> ReachResult:
        """Deliver to every eligible agent declaring `capability` at once and merge the answers."""
        if not isinstance(capability, str) or not capability:
            msg = f"capability must be a non-empty string, got {capability!r}; see router.catalog()"
            raise InvalidMessageError(msg)
        message = self._message(payload, options, capability=capability, mode="broadcast", merge=merge)
        return await self._dispatch(message)

    async def send(self, agent_id: str, payload: Any = None, **options: Any) -> ReachResult:
        """Directed: deliver to this agent, bypassing selection."""
        if not isinstance(agent_id, str) or not agent_id:
            msg = f"agent_id must be a non-empty string, got {agent_id!r}; see router.catalog()"
            raise InvalidMessageError(msg)
        return await self._dispatch(self._message(payload, options, mode="directed", target=agent_id))

    async def dispatch(self, message: ReachMessage | Mapping[str, Any]) -> ReachResult:
        """The core: deliver a `ReachMessage` as its routing hint says.

        Fills in ``meta_info.deadline`` (and, inside a routed call, the trace, depth and lineage
        of the enclosing call) on the message it is given.
        """
        if not isinstance(message, ReachMessage):
            if not isinstance(message, Mapping):
                msg = f"dispatch() takes a ReachMessage or a dict, got {type(message).__name__}"
                raise InvalidMessageError(msg)
            try:
                message = ReachMessage.model_validate(message)
            except ValidationError as exc:
                msg = f"invalid message: {describe_validation_error(exc)}"
                raise InvalidMessageError(msg) from None
        hop = current_hop()
        if hop is not None and not message.meta_info.lineage:
            meta = message.meta_info
            meta.trace_id = hop.meta.trace_id
            meta.depth = hop.meta.depth + 1
            meta.lineage = [*hop.meta.lineage, hop.agent_id]
            meta.source = meta.source or hop.agent_id
            if hop.meta.deadline is not None:
                meta.deadline = min(meta.deadline or hop.meta.deadline, hop.meta.deadline)
        return await self._dispatch(message)

    def route_sync(self, capability: str, payload: Any = None, **options: Any) -> ReachResult:
        return self._portal.call(self.route(capability, payload, **options), what="route")

    def broadcast_sync(
        self, capability: str, payload: Any = None, *, merge: MergePolicy = "all", **options: Any
    ) -> ReachResult:
        return self._portal.call(
            self.broadcast(capability, payload, merge=merge, **options), what="broadcast"
        )

    def send_sync(self, agent_id: str, payload: Any = None, **options: Any) -> ReachResult:
        return self._portal.call(self.send(agent_id, payload, **options), what="send")

    def dispatch_sync(self, message: ReachMessage | Mapping[str, Any]) -> ReachResult:
        return self._portal.call(self.dispatch(message), what="dispatch")

    # -- internals ---------------------------------------------------------------------------

    def _changed(self) -> None:
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:
                logger.exception("catalog listener %r failed", listener)

    def _set_state(self, runtime: AgentRuntime, state: AgentState, reason: str) -> None:
        if runtime.state is state:
            return
        was_usable = runtime.state not in _UNUSABLE
        logger.info("agent %s: %s -> %s %s", runtime.agent_id, runtime.state, state, reason)
        runtime.state = state
        if was_usable is (state in _UNUSABLE):
            self._changed()

    def _set_capabilities(
        self, runtime: AgentRuntime, capabilities: Sequence[Capability | Mapping[str, Any]]
    ) -> None:
        if self._registry.get(runtime.agent_id) is not runtime:
            return
        self._registry.set_capabilities(runtime, capabilities)
        self._changed()

    def _message(
        self,
        payload: Any,
        options: dict[str, Any],
        *,
        mode: str,
        capability: str | None = None,
        target: str | None = None,
        merge: str = "all",
    ) -> ReachMessage:
        try:
            raw = ensure_json(payload)
        except NotJsonSafeError as exc:
            msg = f"payload is not JSON data: {exc}"
            raise InvalidMessageError(msg) from None
        fallback = options.pop("fallback", None)
        strategy = options.pop("strategy", None)
        hop = current_hop()
        if hop is not None:
            parent = hop.meta
            options.setdefault("trace_id", parent.trace_id)
            options.setdefault("source", hop.agent_id)
            options["depth"] = parent.depth + 1
            options["lineage"] = [*parent.lineage, hop.agent_id]
            if parent.deadline is not None:
                options["deadline"] = min(options.get("deadline") or parent.deadline, parent.deadline)
        try:
            meta = MetaInfo(capability=capability, **options)
            hint = RoutingHint.model_validate(
                {
                    "mode": mode,
                    "target": target,
                    "merge": merge,
                    "fallback": fallback or [],
                    "strategy": strategy,
                }
            )
        except ValidationError as exc:
            msg = f"invalid call options: {describe_validation_error(exc)}"
            raise InvalidMessageError(msg) from None
        except TypeError as exc:
            msg = f"invalid call options: {exc}"
            raise InvalidMessageError(msg) from None
        return ReachMessage.model_construct(raw_payload=raw, meta_info=meta, routing_hint=hint)

    async def _dispatch(self, message: ReachMessage) -> ReachResult:
        start = time.perf_counter()
        self._portal.bind(asyncio.get_running_loop())
        meta = message.meta_info
        hint = message.routing_hint
        strategy_name = hint.strategy or self.policy.strategy
        strategy = self._strategies.get(strategy_name)
        if strategy is None:
            msg = f"routing_hint.strategy {strategy_name!r} is unknown; use one of {sorted(self._strategies)}"
            raise InvalidMessageError(msg)
        if meta.deadline is None and meta.timeout_ms is not None:
            meta.deadline = meta.created_at + meta.timeout_ms / 1000.0
        record = DecisionRecord(
            meta.task_id, meta.trace_id, meta.capability, hint.mode, strategy.name, time.time()
        )
        if hint.mode == "directed":
            slots, problem = self._directed_slot(message, record)
        else:
            slots, problem = self._candidate_slots(message, record)
        if not slots:
            missing = error_result(message, _NO_CANDIDATE, problem[0], problem[1])
            return await self._fall_back(message, record, missing, start)
        if meta.deadline is None:
            meta.deadline = time.time() + slots[0].capability.timeout_ms / 1000.0
        if hint.mode == "broadcast":
            record.chosen = None
            merged = await fan_out(slots, message, meta.deadline, hint.merge, record)
            return self._finish(message, record, merged, start, "candidate")
        ranked = strategy.rank(slots, meta) if len(slots) > 1 or hint.mode != "directed" else None
        if ranked is not None:
            record.candidates = [scored for _, scored in ranked]
            slots = [slot for slot, _ in ranked[: self.policy.max_candidates]]
        routed = time.perf_counter()
        result: ReachResult | None = None
        for slot in slots:
            reason = exclusion_reason(slot, meta, self.policy)
            if reason is not None:
                # Its state changed while an earlier candidate was being tried.
                record.exclusions.append(Exclusion(slot.runtime.agent_id, reason))
                continue
            result, elapsed_ms = await deliver(slot, message, meta.deadline)
            record.attempts.append(
                Attempt(
                    slot.runtime.agent_id,
                    result.status,
                    elapsed_ms,
                    "candidate",
                    result.error_type,
                    result.error,
                )
            )
            if result.status is ResultStatus.OK:
                return self._finish(message, record, result, start, "candidate", routed)
            if not result.retryable or meta.deadline <= time.time():
                break
        if result is None:
            result = error_result(
                message, _NO_CANDIDATE, "NoCandidateError", "every candidate became unavailable"
            )
        return await self._fall_back(message, record, result, start)

    def _candidate_slots(
        self, message: ReachMessage, record: DecisionRecord
    ) -> tuple[list[Slot], tuple[str, str]]:
        meta = message.meta_info
        if meta.capability is None:
            return [], ("InvalidMessageError", "meta_info.capability is empty; name the capability to reach")
        slots = self._registry.candidates(meta.capability, meta.version, meta.namespace)
        if not slots:
            return [], ("NoCandidateError", why_no_candidate(self._registry, meta))
        usable = eligible(slots, meta, self.policy, record.exclusions)
        if not usable:
            reasons = "; ".join(f"{e.agent_id}: {e.reason}" for e in record.exclusions)
            return [], (
                "NoCandidateError",
                f"every agent declaring {meta.capability!r} is excluded ({reasons})",
            )
        return usable, ("", "")

    def _directed_slot(
        self, message: ReachMessage, record: DecisionRecord
    ) -> tuple[list[Slot], tuple[str, str]]:
        meta = message.meta_info
        target = message.routing_hint.target or ""
        runtime = self._registry.get(target)
        if runtime is None:
            return [], ("UnknownAgentError", f"agent {target} is not registered; see router.catalog()")
        slot = _slot_for(runtime.slots, meta.capability)
        if slot is None:
            names = [s.capability.name for s in runtime.slots]
            return [], (
                "NoCandidateError",
                f"agent {target} does not declare {meta.capability!r}; it declares {names}",
            )
        meta.capability = slot.capability.name
        reason = exclusion_reason(slot, meta, self.policy)
        if reason is not None:
            record.exclusions.append(Exclusion(target, reason))
            return [], ("NoCandidateError", f"agent {target} cannot take the task: {reason}")
        return [slot], ("", "")

    async def _fall_back(
        self, message: ReachMessage, record: DecisionRecord, result: ReachResult, start: float
    ) -> ReachResult:
        """Try the hint's fallback agents, then the policy's default agent, in that order."""
        meta = message.meta_info
        chain = [(agent_id, "fallback") for agent_id in message.routing_hint.fallback]
        default = self.policy.default_agent
        if default is not None and default not in message.routing_hint.fallback:
            chain.append((default, "default"))
        tried = {attempt.agent_id for attempt in record.attempts}
        for agent_id, path in chain:
            runtime = self._registry.get(agent_id)
            if runtime is None:
                record.exclusions.append(Exclusion(agent_id, f"{path} agent is not registered"))
                continue
            if agent_id in tried:
                continue
            slot = _slot_for(runtime.slots, meta.capability) or runtime.slots[0]
            reason = exclusion_reason(slot, meta, self.policy)
            if reason is not None:
                record.exclusions.append(Exclusion(agent_id, f"{path} agent: {reason}"))
                continue
            if meta.deadline is None:
                meta.deadline = time.time() + slot.capability.timeout_ms / 1000.0
            outcome, elapsed_ms = await deliver(slot, message, meta.deadline)
            record.attempts.append(
                Attempt(agent_id, outcome.status, elapsed_ms, path, outcome.error_type, outcome.error)
            )
            if outcome.ok:
                return self._finish(message, record, outcome, start, path)
            result = outcome
        return self._finish(message, record, result, start, "none")

    def _finish(
        self,
        message: ReachMessage,
        record: DecisionRecord,
        result: ReachResult,
        start: float,
        path: str,
        routed: float | None = None,
    ) -> ReachResult:
        meta = message.meta_info
        end = time.perf_counter()
        attempts = record.attempts
        agent_ms = attempts[-1].elapsed_ms if attempts else 0.0
        routing_ms = ((routed or end) - start) * 1000.0 if routed else 0.0
        result.task_id = meta.task_id
        result.trace_id = meta.trace_id
        result.capability = meta.capability
        result.attempts = len(attempts)
        result.served_by = path  # type: ignore[assignment]
        result.timings = Timings.model_construct(
            routing_ms=routing_ms, queueing_ms=0.0, agent_ms=agent_ms, total_ms=(end - start) * 1000.0
        )
        if result.agent_id is None and attempts and message.routing_hint.mode != "broadcast":
            result.agent_id = attempts[-1].agent_id
        record.status = result.status
        record.path = path
        if result.ok and message.routing_hint.mode != "broadcast":
            record.chosen = result.agent_id
        self._decisions.add(record)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "task %s %s %s -> %s via %s in %.3f ms",
                meta.task_id,
                message.routing_hint.mode,
                meta.capability,
                result.agent_id,
                path,
                (end - start) * 1000.0,
            )
        return result


def _slot_for(slots: list[Slot], capability: str | None) -> Slot | None:
    if capability is None:
        return slots[0] if slots else None
    for slot in slots:
        if slot.capability.name == capability:
            return slot
    return None
