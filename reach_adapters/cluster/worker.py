"""`RemoteWorker`: hosts agents for a cluster from a process that is not a node.

A worker speaks the cluster's wire protocol (docs/cluster.md, "Remote agents without a node") as a
node's serving half does, with the same parts: its leases (`Leases`, renewed every TTL/3, deleted
when it leaves), its inbox (`Inbox`: calls delivered once, deadlines, cancel entries, replies).
It lists no other agent, routes nothing and reads no catalog. Its agents run in a private
`Router` of its own, which gives them what a node's have: each capability's `max_concurrency`
and timeout, deadlines cancelling a call past them, an exception answered as the agent's fault
with its class name as ``error_type``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import secrets
import socket
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

import redis.asyncio as redis
from redis.exceptions import RedisError

from reach_adapters import FunctionAgent
from reach_adapters.cluster.connection import DEFAULT_LEASE_TTL_S, connect, io_timeout_s
from reach_adapters.cluster.errors import ClusterError
from reach_adapters.cluster.inbox import Inbox
from reach_adapters.cluster.leases import Leases
from reach_adapters.cluster.outage import Outage
from reach_adapters.cluster.records import Keys, checked_keys
from reach_adapters.cluster.stats import NodeStats
from reach_adapters.errors import InvalidDeclarationError, UnknownAgentError
from reach_adapters.router import (
    Agent,
    AgentHandle,
    AgentState,
    Capability,
    ReachMessage,
    ReachResult,
    Router,
    validate_capabilities,
)

__all__ = ["RemoteWorker"]

logger = logging.getLogger(__name__)

# A worker id is a key part and a stream name: no ':' (it separates the lease key's parts).
_WORKER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
# What a worker may say of its own agent; the others are the cluster's judgement.
_SETTABLE = (AgentState.ONLINE, AgentState.BUSY, AgentState.OFFLINE)

Handler = Callable[..., Any]


class _Hosted:
    """An agent served by a worker, holding the handle its state is set through; the agent's own
    optional methods (``attach``, ``probe``, ``aclose``...) stay its own."""

    def __init__(self, agent: Agent) -> None:
        self._agent = agent
        self.handle: AgentHandle | None = None

    @property
    def agent_id(self) -> str:
        return self._agent.agent_id

    @property
    def capabilities(self) -> Sequence[Capability]:
        return self._agent.capabilities

    async def invoke(self, message: ReachMessage) -> ReachResult:
        return await self._agent.invoke(message)

    def attach(self, handle: AgentHandle) -> None:
        self.handle = handle
        own = getattr(self._agent, "attach", None)
        if callable(own):
            own(handle)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._agent, name)


def _handler_agent(
    agent_id: str, capabilities: Sequence[Capability | Mapping[str, Any]], handler: Handler
) -> Agent:
    """`handler(payload)` or `handler(payload, message)`, sync or async, as an agent."""
    if not callable(handler):
        msg = f"agent {agent_id}: the handler must be a function of the payload, got {type(handler).__name__}"
        raise InvalidDeclarationError(msg)
    try:
        params = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        params = []  # a builtin without a signature: given the payload alone
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    takes_message = len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)

    def arguments(message: ReachMessage) -> tuple[Any, ...]:
        return (message.raw_payload, message) if takes_message else (message.raw_payload,)

    call = getattr(handler, "__call__", None)  # noqa: B004 - async callable objects
    run: Handler
    if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call):

        async def run(message: ReachMessage) -> Any:
            return await handler(*arguments(message))

    else:

        def run(message: ReachMessage) -> Any:
            # FunctionAgent runs it in a thread of the agent's own, so it blocks no other call.
            return handler(*arguments(message))

    return FunctionAgent(run, agent_id=agent_id, capabilities=capabilities, call_style="message")


class RemoteWorker:
    """Agents of this process, served to the cluster at a Redis URL without joining it as a node.

    Use ``async with await RemoteWorker.connect(url, worker_id=...) as worker:``, then
    `serve` each agent: its lease is written at once and renewed every TTL/3 while the worker
    lives. Leaving (`aclose`, the end of the ``async with``) answers the calls still running
    (outcome unknown) and deletes the leases, so every node drops the agents at once. While Redis
    is out of reach the worker warns once, retries with a growing backoff, and renews when back.
    """

    def __init__(self, client: redis.Redis, *, worker_id: str, lease_ttl_s: float, keys: Keys) -> None:
        self.worker_id = worker_id
        self.lease_ttl_s = lease_ttl_s
        self.keys = keys
        self.stats = NodeStats()
        self._client = client
        self._router = Router()
        ttl_ms = max(int(lease_ttl_s * 1000), 3)
        self._leases = Leases(self._router, client, keys, worker_id, ttl_ms=ttl_ms, stats=self.stats)
        self._outage = Outage(
            f"worker {worker_id}",
            first_s=lease_ttl_s / 6,
            meanwhile="its agents' leases lapse if this lasts; retrying",
            recovery="renewing its leases",
            on_back=self._leases.forget,
        )
        # Blocking reads return well within the socket timeout, which would cut them off.
        block_ms = max(int(io_timeout_s(lease_ttl_s) * 500), 50)
        self._inbox = Inbox(
            self._router,
            client,
            keys,
            worker_id,
            self.stats,
            self._router.__contains__,
            block_ms=block_ms,
            reply_ttl_ms=max(ttl_ms * 2, 10_000),
            outage=self._outage,
        )
        self._stop_listening = self._router.on_catalog_change(self._leases.changed)
        self._hosted: dict[str, _Hosted] = {}
        self._heartbeat: asyncio.Task[None] | None = None
        # Stops the heartbeat (with cancel(), which 3.11 may swallow); `_left`: aclose ran.
        self._stopping = False
        self._left = False

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        worker_id: str | None = None,
        prefix: str = "reach:",
        lease_ttl_s: float = DEFAULT_LEASE_TTL_S,
    ) -> RemoteWorker:
        """Connect to the cluster at `url` (``redis://HOST:PORT/DB``) under `worker_id` (its
        "node" in the leases; default ``HOSTNAME-RANDOM``) and start reading its inbox.

        Raises `InvalidDeclarationError` for a malformed worker id, `ClusterError` for a
        malformed URL, a lease under 0.5 s, a `prefix` with other characters than letters, digits,
        '_', '.', ':', '-', or a Redis that does not answer.
        """
        worker_id = worker_id or f"{socket.gethostname()}-{secrets.token_hex(3)}"
        if not isinstance(worker_id, str) or not _WORKER_ID.match(worker_id):
            msg = (
                f"worker id {worker_id!r}: use letters, digits, '_', '.', '-' (no ':'), starting "
                "with a letter or digit, at most 128 characters, e.g. 'gpu-box-1'"
            )
            raise InvalidDeclarationError(msg)
        keys = checked_keys(prefix)
        worker = cls(connect(url, lease_ttl_s), worker_id=worker_id, lease_ttl_s=lease_ttl_s, keys=keys)
        try:
            await worker._leases.claim()
            await worker._inbox.start()
        except ClusterError:
            await worker.aclose()
            raise
        except RedisError as exc:
            await worker.aclose()
            msg = f"cannot reach the cluster registry at {url}: {exc}; start Redis there or fix the URL"
            raise ClusterError(msg) from exc
        renewing = worker._leases.renewing(worker._outage, lease_ttl_s / 3, lambda: worker._stopping)
        worker._heartbeat = asyncio.get_running_loop().create_task(
            renewing,
            name=f"reach worker {worker_id} leases",
        )
        logger.info("worker %s connected to the cluster at %s, lease %.1f s", worker_id, url, lease_ttl_s)
        return worker

    async def __aenter__(self) -> RemoteWorker:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def serve(
        self,
        agent: Agent | str,
        capabilities: Sequence[Capability | Mapping[str, Any]] | None = None,
        handler: Handler | None = None,
    ) -> None:
        """Serve an agent to the cluster: ``serve(agent_id, capabilities, handler)``, or
        ``serve(agent)`` with any `Agent` (agent_id, capabilities, ``async invoke(message)``).

        `handler(payload)` or `handler(payload, message)`, sync or async, returns the JSON
        payload of the answer; what it raises is answered as the agent's failure. The lease is
        written at once, in the background. Raises `InvalidDeclarationError` for a malformed id,
        capability or handler, `DuplicateAgentError` for an id served already.
        """
        if isinstance(agent, str):
            if capabilities is None or handler is None:
                msg = f"agent {agent}: serve(agent_id, capabilities, handler) needs all three"
                raise InvalidDeclarationError(msg)
            agent = _handler_agent(agent, capabilities, handler)
        elif capabilities is not None or handler is not None:
            msg = "serve(agent) takes the agent alone: its capabilities and invoke() are its own"
            raise InvalidDeclarationError(msg)
        elif not isinstance(agent, Agent):
            msg = (
                f"{type(agent).__name__} is not an agent: it needs agent_id, capabilities and async "
                "invoke(message); or call serve(agent_id, capabilities, handler)"
            )
            raise InvalidDeclarationError(msg)
        else:
            validate_capabilities(agent.agent_id, agent.capabilities)
        hosted = _Hosted(agent)
        self._router.register(hosted)
        self._hosted[hosted.agent_id] = hosted

    async def withdraw(self, agent_id: str, *, drain_timeout: float = 30.0) -> None:
        """Stop serving one agent: no new calls, running ones finish (up to `drain_timeout`), then
        its lease is deleted and every node drops it."""
        self._known(agent_id)
        await self._router.deregister(agent_id, drain_timeout=drain_timeout, close=True)
        self._hosted.pop(agent_id, None)

    def set_state(self, agent_id: str, state: AgentState | str, reason: str = "") -> None:
        """Say an agent is ``busy`` (callers prefer others), ``offline`` (skipped) or ``online``
        again; the nodes see it at once (its lease is renewed on the change)."""
        hosted = self._known(agent_id)
        try:
            value = AgentState(state)
        except ValueError:
            value = None
        if value not in _SETTABLE:
            allowed = ", ".join(s.value for s in _SETTABLE)
            msg = f"agent {agent_id}: state {state!r} cannot be set by a worker; use one of {allowed}"
            raise InvalidDeclarationError(msg)
        if hosted.handle is not None:
            hosted.handle.set_state(value, reason)

    def _known(self, agent_id: str) -> _Hosted:
        hosted = self._hosted.get(agent_id)
        if hosted is None:
            served = ", ".join(sorted(self._hosted)) or "none"
            msg = f"worker {self.worker_id} serves no agent {agent_id!r} (it serves: {served})"
            raise UnknownAgentError(msg)
        return hosted

    async def aclose(self) -> None:
        """Leave: calls still running are cancelled and answered (outcome unknown), the leases
        deleted (every node drops these agents at once), the agents closed. Again: nothing."""
        if self._left:
            return
        self._left = True
        self._stop_listening()
        await self._inbox.aclose()
        self._stopping = True
        self._leases.changed()
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
        try:
            await self._leases.delete()
        except (RedisError, OSError) as exc:
            logger.warning(
                "worker %s left without deleting its leases (they expire): %s", self.worker_id, exc
            )
        await self._router.aclose()
        await self._client.aclose()
