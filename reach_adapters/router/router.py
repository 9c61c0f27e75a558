"""The router: register agents, pick the right one for each task, deliver it, fall back."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any, Unpack

from pydantic import JsonValue

from middleware import MergePolicy, ReachMessage, ReachResult
from reach_adapters.errors import (
    InvalidDeclarationError,
    InvalidPolicyError,
    RouterClosedError,
)
from reach_adapters.router.agent import Agent, close_agent
from reach_adapters.router.capability import Capability
from reach_adapters.router.catalog import AgentInfo, list_agents, reachable_capabilities
from reach_adapters.router.chains.calls import ChainCalls
from reach_adapters.router.consensus.calls import ConsensusCalls
from reach_adapters.router.decision_calls import DecisionCalls
from reach_adapters.router.deferred_calls import DeferredCalls
from reach_adapters.router.dispatcher import Dispatcher
from reach_adapters.router.guard import Guard
from reach_adapters.router.handle import AgentHandle
from reach_adapters.router.health import HealthMonitor
from reach_adapters.router.leaving import LeavingCalls
from reach_adapters.router.matching import Matcher
from reach_adapters.router.messages import (
    build_message,
    inherit_hop,
    parse_message,
    refused_call,
    require_name,
)
from reach_adapters.router.options import CallOptions
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.portal import Portal, running_loop
from reach_adapters.router.registry import Registry
from reach_adapters.router.state import AgentRuntime, AgentState, StateSource
from reach_adapters.router.streaming import stream_message
from reach_adapters.router.tasks import AsyncTasks, MemoryTaskStore, TaskStore
from reach_adapters.router.tasks.calls import TaskCalls

__all__ = ["Router"]

logger = logging.getLogger(__name__)


class Router(LeavingCalls, DecisionCalls, TaskCalls, ChainCalls, ConsensusCalls, DeferredCalls):
    """Finds the right agent for each task and delivers it.

    The embedded default keeps everything in memory. `route` (unicast by capability), `broadcast`
    (every candidate), `send` (one named agent) build a `ReachMessage` and call `dispatch`; each has
    a ``*_sync`` twin for synchronous code. Their keyword options are `CallOptions`: `MetaInfo`
    fields (version, namespace, timeout_ms, priority, ...) plus ``fallback`` and ``strategy``.
    """

    def __init__(
        self,
        policy: RoutingPolicy | None = None,
        *,
        default_agent: str | None = None,
        matcher: Matcher | None = None,
        guard: Guard | None = None,
        task_store: TaskStore | None = None,
    ) -> None:
        """`task_store`: where submitted tasks are kept (default: this process's memory)."""
        policy = policy or RoutingPolicy()
        if default_agent is not None:
            policy = policy.model_copy(update={"default_agent": require_name(default_agent, "default_agent")})
        self.policy = policy
        self._registry = Registry(policy.breaker)
        if matcher is not None and not isinstance(matcher, Matcher):
            msg = f"matcher must have async match(text, capabilities), got {type(matcher).__name__}"
            raise InvalidDeclarationError(msg)
        self._dispatcher = Dispatcher(self._registry, policy, matcher=matcher, on_dispatch=self._bind)
        self._dispatcher.set_guard(guard)
        self._health = HealthMonitor(self._registry, policy, self._set_state)
        self._portal = Portal(start_timeout=policy.sync_start_timeout_s)
        store = MemoryTaskStore() if task_store is None else task_store
        self._tasks = AsyncTasks(self._dispatcher.dispatch, policy, store, self._dispatcher.decisions)
        self._listeners: list[Callable[[], None]] = []
        self._on_close: list[Callable[[], Awaitable[None]]] = []
        # Calls waiting deferred for a capable agent look again on every catalog change, and end
        # when the router closes rather than wait out their deadlines.
        self._listeners.append(self._dispatcher.deferred.look_again)
        self._on_close.append(self._dispatcher.deferred.close)
        self._probing_wanted = False
        self._closing: set[asyncio.Task[None]] = set()
        self._bound_loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._init_chains()

    # -- registration ------------------------------------------------------------------------

    def register(self, agent: Agent) -> None:
        """Add an agent; its capabilities become routable at once.

        An agent with an ``attach(handle)`` method gets an `AgentHandle` to report its state and
        capability changes later; one with ``async probe() -> bool`` is health-probed.
        """
        self._check_open()
        runtime = self._registry.add(agent)
        attach = getattr(agent, "attach", None)
        if callable(attach):
            attach(
                AgentHandle(
                    runtime.agent_id,
                    partial(self._set_state, runtime, source=StateSource.AGENT),
                    partial(self._set_capabilities, runtime),
                )
            )
        if callable(getattr(agent, "probe", None)):
            self._probing_wanted = True
            if running_loop() is not None:
                # From now, not from the first routed call: a router that only serves an MCP
                # server's reads, or waits, must still notice an agent die.
                self._probe()
        logger.info(
            "registered agent %s with capabilities %s",
            runtime.agent_id,
            [slot.capability.name for slot in runtime.slots],
        )
        self._changed()

    def __contains__(self, agent_id: object) -> bool:
        """Whether an agent with this id is registered: ``"support:refund:01" in router``."""
        return agent_id in self._registry

    def agent(self, agent_id: str) -> Agent | None:
        """The registered agent with this id (the object given to `register`), or None."""
        runtime = self._registry.get(agent_id)
        return None if runtime is None else runtime.agent

    @property
    def guard(self) -> Guard | None:
        """The security rules in force (see `set_guard`), or None: every caller may reach all."""
        return self._dispatcher.guard

    def set_guard(self, guard: Guard | None) -> None:
        """Enforce `guard`'s rules on every call from now on (a gateway does this from
        security.yaml, again on each reload); None lifts them."""
        self._dispatcher.set_guard(guard)
        # What each principal may reach, and so its catalog, changed with the rules.
        self._changed()

    def catalog(self, *, principal: str | None = None) -> list[AgentInfo]:
        """Every registered agent with its state, load, breaker and declarations; for a
        `principal`, only the agents and capabilities it may reach."""
        return list_agents(
            self._registry, self._dispatcher.planner.visible(principal), self._dispatcher.ratings
        )

    def reachable(self, *, principal: str | None = None) -> dict[str, Capability]:
        """Each capability some usable agent declares, with one declaration standing for it: the
        first registered, with the most cautious flags of all usable replicas (`cautious`); for a
        `principal`, only the agents it may reach count.

        What the LangChain toolkit and the MCP server offer as tools.
        """
        return reachable_capabilities(self._registry, self._dispatcher.planner.visible(principal))

    def declarations(self) -> dict[str, Capability]:
        """Each capability any registered agent declares, usable now or not, with one declaration
        standing for it."""
        return self._registry.declarations()

    def on_catalog_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` whenever agents, their capabilities or their usability change.

        Returns a function that removes the listener.
        """
        self._listeners.append(listener)
        return remover(self._listeners, listener)

    def on_close(self, callback: Callable[[], Awaitable[None]]) -> Callable[[], None]:
        """Await `callback` first thing in `aclose`, for what must not outlive the router (a
        cluster node leaves before the agents close). Returns a function that removes it."""
        self._on_close.append(callback)
        return remover(self._on_close, callback)

    def update_policy(self, policy: RoutingPolicy) -> None:
        """Apply a new policy to a running router (hot reload).

        Registered agents, their statistics, breakers and calls in flight are kept; the next
        selection already uses the new strategy and coefficients.
        """
        if not isinstance(policy, RoutingPolicy):
            msg = f"update_policy() takes a RoutingPolicy, got {type(policy).__name__}"
            raise InvalidPolicyError(msg)
        self.policy = policy
        self._registry.reconfigure(policy.breaker)
        self._dispatcher.reconfigure(policy)
        self._health.reconfigure(policy)
        self._tasks.reconfigure(policy)
        self._portal.start_timeout = policy.sync_start_timeout_s
        logger.info("routing policy updated: strategy %s", policy.strategy)

    async def probe_now(self) -> None:
        """Probe every probe-able agent once, now (the background loop does it on an interval)."""
        await self._health.probe_all()

    async def aclose(self) -> None:
        """Stop background work and close every agent that has ``aclose()``, once.

        A closed router refuses calls and registrations with `RouterClosedError`; closing it
        again does nothing.
        """
        if self._closed:
            return
        self._closed = True
        for callback in list(self._on_close):
            await callback()
        await self._tasks.aclose()
        await self._health.aclose()
        if self._closing:
            await asyncio.gather(*self._closing)
        for runtime in self._registry:
            await close_agent(runtime.agent)

    def close(self) -> None:
        """Synchronous `aclose`; also stops the thread that served sync calls, if one started."""
        self._portal.call(self.aclose(), method="close", instead="await router.aclose()")
        self._portal.close()

    async def __aenter__(self) -> Router:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- calling -----------------------------------------------------------------------------

    async def route(
        self, capability: str | None, payload: Any = None, **options: Unpack[CallOptions]
    ) -> ReachResult:
        """Unicast: deliver to the best agent declaring `capability`, failing over to the next.

        With ``capability=None`` the capability is matched from the task text (``text=...`` or a
        string payload): a sure match is routed to, close ones are tried best first.
        """
        self._check_open()
        if capability is not None:
            require_name(capability, "capability")
        message = build_message(payload, options, capability=capability, mode="unicast")
        return await self._dispatcher.dispatch(message)

    async def broadcast(
        self,
        capability: str,
        payload: Any = None,
        *,
        merge: MergePolicy = "all",
        **options: Unpack[CallOptions],
    ) -> ReachResult:
        """Deliver to every eligible agent declaring `capability` at once and merge the answers.

        ``merge``: ``all`` (every answer, in ``results``), ``first`` (the first answer),
        ``first_success`` (the first ok answer). Every target gets one entry in ``results``.
        """
        self._check_open()
        require_name(capability, "capability")
        message = build_message(payload, options, capability=capability, mode="broadcast", merge=merge)
        return await self._dispatcher.dispatch(message)

    async def send(
        self,
        agent_id: str,
        payload: Any = None,
        *,
        capability: str | None = None,
        **options: Unpack[CallOptions],
    ) -> ReachResult:
        """Directed: deliver to this agent, bypassing selection.

        An agent with several capabilities needs `capability` to say which one is called.
        """
        self._check_open()
        require_name(agent_id, "agent_id")
        if capability is not None:
            require_name(capability, "capability")
        message = build_message(payload, options, capability=capability, mode="directed", target=agent_id)
        return await self._dispatcher.dispatch(message)

    async def dispatch(
        self, message: ReachMessage | Mapping[str, Any], *, admitted: bool = False
    ) -> ReachResult:
        """The core: deliver a `ReachMessage` as its routing hint says.

        The message is left as it was given: the router fills in deadlines, the matched
        capability and, inside a routed call, the trace, depth and lineage on its own copy, so one
        message can be dispatched again. ``admitted=True`` is for a call another router of the
        cluster admitted and deduplicated already: neither is done twice.
        """
        self._check_open()
        message = parse_message(message)
        inherit_hop(message)
        return await self._dispatcher.dispatch(message, admitted=admitted)

    async def stream(
        self, capability: str, payload: Any = None, **options: Unpack[CallOptions]
    ) -> AsyncIterator[JsonValue]:
        """Unicast, yielding the chosen agent's chunks as they come: selected, retried before the
        first chunk, fallen back and recorded like `route` (see `streaming`)."""
        self._check_open()
        require_name(capability, "capability")
        message = build_message(payload, options, capability=capability, mode="unicast")
        # Closed with this one, so a caller that stops early ends the agent's stream at once.
        async with contextlib.aclosing(stream_message(self._dispatcher, message)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def dispatch_stream(self, message: ReachMessage | Mapping[str, Any]) -> AsyncIterator[JsonValue]:
        """`stream` for a prepared `ReachMessage`, as `dispatch` is for `route`: a unicast one
        naming its capability. Its task id counts as the caller's choice (deduplicated) only when
        it was set, not when the message made one up."""
        self._check_open()
        message = parse_message(message, "dispatch_stream")
        if message.routing_hint.mode != "unicast" or not message.meta_info.capability:
            msg = (
                "dispatch_stream takes a unicast message naming its capability, got mode "
                f"{message.routing_hint.mode!r} and capability {message.meta_info.capability!r}"
            )
            raise refused_call(msg)
        inherit_hop(message)
        async with contextlib.aclosing(stream_message(self._dispatcher, message)) as chunks:
            async for chunk in chunks:
                yield chunk

    def route_sync(
        self, capability: str | None, payload: Any = None, **options: Unpack[CallOptions]
    ) -> ReachResult:
        return self._portal.call(self.route(capability, payload, **options), method="route_sync")

    def broadcast_sync(
        self,
        capability: str,
        payload: Any = None,
        *,
        merge: MergePolicy = "all",
        **options: Unpack[CallOptions],
    ) -> ReachResult:
        return self._portal.call(
            self.broadcast(capability, payload, merge=merge, **options), method="broadcast_sync"
        )

    def send_sync(
        self,
        agent_id: str,
        payload: Any = None,
        *,
        capability: str | None = None,
        **options: Unpack[CallOptions],
    ) -> ReachResult:
        return self._portal.call(
            self.send(agent_id, payload, capability=capability, **options), method="send_sync"
        )

    def dispatch_sync(self, message: ReachMessage | Mapping[str, Any]) -> ReachResult:
        return self._portal.call(self.dispatch(message), method="dispatch_sync")

    # -- internals ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            msg = "the router is closed (aclose() was called); create a new Router to route again"
            raise RouterClosedError(msg)

    def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._bound_loop:
            self._bound_loop = loop
            self._portal.bind(loop)
        self._probe()

    def _probe(self) -> None:
        if self._probing_wanted and not self._health.running and not self._closed:
            self._health.start()

    def _changed(self) -> None:
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:
                logger.exception("catalog listener %r failed", listener)

    def _set_state(self, runtime: AgentRuntime, state: AgentState, reason: str, source: StateSource) -> None:
        if self._registry.get(runtime.agent_id) is not runtime:
            return  # a handle outliving its registration
        if runtime.set_state(state, reason, source):
            self._changed()

    def _set_capabilities(
        self, runtime: AgentRuntime, capabilities: Sequence[Capability | Mapping[str, Any]]
    ) -> None:
        if self._registry.get(runtime.agent_id) is not runtime:
            return
        self._registry.set_capabilities(runtime, capabilities)
        self._changed()


def remover(items: list[Any], item: object) -> Callable[[], None]:
    """A function that takes `item` out of `items`; calling it again does nothing."""
    return partial(_discard, items, item)


def _discard(items: list[Any], item: object) -> None:
    if item in items:
        items.remove(item)
