"""A router run from a configuration directory, following changes to the directory while it runs."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel

from reach_adapters.config import (
    ConfigError,
    GatewayConfig,
    check_permissions,
    config_files,
    load_config,
    parse_config,
    read_config_dir,
)
from reach_adapters.errors import ReachError
from reach_adapters.gateway.build import build_agents, close_agents
from reach_adapters.gateway.errors import GatewayError
from reach_adapters.gateway.namesakes import warn_shared_tools
from reach_adapters.router.agent import Agent
from reach_adapters.router.router import Router, remover
from reach_adapters.router.state import UNUSABLE_STATES
from reach_adapters.security.spec import SecuritySpec

if TYPE_CHECKING:
    from reach_adapters.cluster import ClusterNode
    from reach_adapters.security.credentials import Authenticator
    from reach_adapters.security.guard import SecurityGuard
    from reach_adapters.security.quotas import Quotas

__all__ = ["Gateway", "GatewaySecurity", "GatewayStatus"]

logger = logging.getLogger(__name__)


# (file name, modification time, size) of each config file: cheap to take on every poll.
_Signature = frozenset[tuple[str, int, int]]
_UNKNOWN = object()


class GatewayStatus(BaseModel):
    """What ``GET /api/health`` answers: whether calls can be served, the config in force and how
    reloads went.

    ``status`` is ``ok`` when every registered agent is fully in service, ``degraded`` when some
    are not (offline, reconnecting, draining, suspicious, quarantined or stuck: `problems` says
    which and why), ``unavailable`` when none takes calls or none is registered; the API answers
    the last with HTTP 503, so a load balancer's readiness check needs no parsing.
    """

    status: Literal["ok", "degraded", "unavailable"]
    problems: dict[str, str]
    config_dir: str
    generation: int
    agents: int
    usable_agents: int
    capabilities: int
    reloads_applied: int
    reloads_rejected: int
    last_error: str | None
    uptime_s: float


@dataclass(frozen=True, slots=True)
class GatewaySecurity:
    """The ``security.yaml`` in force and what is built from it; replaced as a whole on reload."""

    spec: SecuritySpec
    authenticator: Authenticator
    guard: SecurityGuard

    @classmethod
    def build(
        cls, config: GatewayConfig, previous: GatewaySecurity | None = None, quotas: Quotas | None = None
    ) -> GatewaySecurity | None:
        """None when `config` has no ``security.yaml``; raises `SecurityConfigError` if a token
        variable or key file it names is missing. Quota counts carry over from `previous`, or are
        kept in `quotas` (a cluster's, shared by its nodes)."""
        if config.security is None:
            return None
        # Imported here: the JWT and crypto libraries only load for a config that needs them.
        from reach_adapters.security.credentials import Authenticator
        from reach_adapters.security.guard import SecurityGuard

        if quotas is None and previous is not None:
            quotas = previous.guard.quotas
        return cls(
            config.security,
            Authenticator.from_spec(config.security, config.directory),
            SecurityGuard(config.security, quotas=quotas),
        )


class Gateway:
    """Owns a `Router` built from a config directory and keeps it in line with the directory.

    A change is validated as a whole first; only a valid one is applied, as a diff: a changed
    policy through `Router.update_policy`, new agents registered, changed ones swapped in with
    `Router.replace` (running calls finish on the old one), removed ones drained; old agents are
    closed after their last call. An invalid change is logged with file, line and field, and the
    config in force stays. `generation` counts the configs applied, starting at 1.

    `security` is the ``security.yaml`` in force (None: no authentication); `exposed_at`, set by
    whoever serves the gateway beyond loopback, makes removing ``security.yaml`` a refused change.
    """

    def __init__(
        self,
        router: Router,
        config: GatewayConfig,
        agents: Mapping[str, Agent],
        *,
        drain_timeout_s: float,
        allow_insecure_config: bool = False,
        security: GatewaySecurity | None = None,
    ) -> None:
        self.router = router
        self.config = config
        self.security: GatewaySecurity | None = None
        self.exposed_at: str | None = None
        self.generation = 1
        self.reloads_applied = 0
        self.reloads_rejected = 0
        # This process as a node of a cluster (`reach serve --registry`), else None.
        self.node: ClusterNode | None = None
        self._quota_store: tuple[str, str] | None = None
        self._shared_quotas: Quotas | None = None
        self.last_error: str | None = None
        self._agents = dict(agents)
        warn_shared_tools(self._agents.values())
        self._drain_timeout_s = drain_timeout_s
        # Checked on every reload too: a file made writable by others later is refused then.
        self._allow_insecure_config = allow_insecure_config
        self._started = time.monotonic()
        self._lock = asyncio.Lock()
        self._watcher: asyncio.Task[None] | None = None
        self._reload_listeners: list[Callable[[], None]] = []
        self._security_changed(security)

    @classmethod
    async def start(
        cls, directory: str | Path, *, drain_timeout_s: float = 30.0, allow_insecure_config: bool = False
    ) -> Gateway:
        """Load `directory`, build every agent and register it; raise `ConfigError` if any fails,
        with nothing left running."""
        config = load_config(directory, allow_insecure=allow_insecure_config)
        return await cls.from_config(
            config, drain_timeout_s=drain_timeout_s, allow_insecure_config=allow_insecure_config
        )

    @classmethod
    async def from_config(
        cls, config: GatewayConfig, *, drain_timeout_s: float = 30.0, allow_insecure_config: bool = False
    ) -> Gateway:
        security = GatewaySecurity.build(config)
        router = Router(config.policy)
        agents = await build_agents(config.agents.values(), config.directory, router)
        try:
            for agent in agents:
                router.register(agent)
        except ReachError:
            await close_agents(agents)
            raise
        return cls(
            router,
            config,
            {agent.agent_id: agent for agent in agents},
            drain_timeout_s=drain_timeout_s,
            allow_insecure_config=allow_insecure_config,
            security=security,
        )

    # -- what the API shows ------------------------------------------------------------------

    @property
    def node_id(self) -> str | None:
        """This process's node id in its cluster; None when it is not a node."""
        return None if self.node is None else self.node.node_id

    def status(self) -> GatewayStatus:
        catalog = self.router.catalog()
        usable = sum(info.state not in UNUSABLE_STATES for info in catalog)
        problems = {info.agent_id: problem for info in catalog if (problem := info.problem) is not None}
        return GatewayStatus(
            status="unavailable" if usable == 0 else "degraded" if problems else "ok",
            problems=problems,
            config_dir=str(self.config.directory),
            generation=self.generation,
            agents=len(catalog),
            usable_agents=usable,
            capabilities=len(self.router.reachable()),
            reloads_applied=self.reloads_applied,
            reloads_rejected=self.reloads_rejected,
            last_error=self.last_error,
            uptime_s=round(time.monotonic() - self._started, 3),
        )

    # -- reloading ---------------------------------------------------------------------------

    async def reload(self) -> bool:
        """Read the directory again and apply what changed; False when nothing was applied."""
        async with self._lock:
            directory = self.config.directory
            try:
                if not self._allow_insecure_config:
                    check_permissions(directory)
                files = read_config_dir(directory)
                if files == self.config.files:
                    self.last_error = None
                    return False
                await self._apply(parse_config(directory, files))
            except ReachError as exc:
                self.reloads_rejected += 1
                self.last_error = str(exc)
                logger.error("config change rejected, generation %d stays in force: %s", self.generation, exc)
                return False
            return True

    def on_reload(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call `listener` after each config change is applied (its agents built and installed).

        Returns a function that removes the listener.
        """
        self._reload_listeners.append(listener)
        return remover(self._reload_listeners, listener)

    def watch(self, interval_s: float = 0.5) -> None:
        """Poll the directory every `interval_s` seconds and reload when it changed and settled."""
        if interval_s <= 0:
            msg = f"the reload interval must be above 0 seconds, got {interval_s}"
            raise GatewayError(msg)
        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(
                self._watch(interval_s), name="reach watch"
            )

    async def _watch(self, interval_s: float) -> None:
        # The first look compares contents, so a change made since the config was loaded counts.
        seen: object = _UNKNOWN
        pending: object = _UNKNOWN
        while True:
            await asyncio.sleep(interval_s)
            current = _signature(self.config.directory)
            if current == seen:
                pending = _UNKNOWN
                continue
            # Act on a change once it has held for one interval: an editor's write may come in parts.
            if current != pending:
                pending = current
                continue
            seen, pending = current, _UNKNOWN
            try:
                # Shielded: closing the gateway lets a reload finish, not leave agents half-built.
                await asyncio.shield(self.reload())
            except Exception:
                logger.exception("reloading %s failed; watching goes on", self.config.directory)

    async def _apply(self, new: GatewayConfig) -> None:
        old = self.config
        removed = [agent_id for agent_id in old.agents if agent_id not in new.agents]
        added = [agent_id for agent_id in new.agents if agent_id not in old.agents]
        changed = [
            agent_id
            for agent_id, spec in new.agents.items()
            if agent_id in old.agents and not spec.same_as(old.agents[agent_id])
        ]
        self._refuse_clashes(new, added)
        security_changed = new.security != old.security
        security = self._next_security(new) if security_changed else self.security
        specs = [new.agents[agent_id] for agent_id in added + changed]
        built = await build_agents(specs, new.directory, self.router)
        fresh = {agent.agent_id: agent for agent in built}
        policy_changed = new.policy != old.policy
        try:
            # Code may have registered or deregistered agents while these were built.
            self._refuse_clashes(new, added)
            if policy_changed:
                self.router.update_policy(new.policy)
            # New and changed agents serve at once; calls running on a changed agent's old self
            # finish there, and removed agents drain, before either is closed.
            for agent_id in added + changed:
                await self._install(fresh.pop(agent_id))
        except BaseException:
            await close_agents(list(fresh.values()))
            raise
        await asyncio.gather(*(self._retire(agent_id) for agent_id in removed))
        if added or changed:
            warn_shared_tools(self._agents.values())
        if security_changed:
            self._security_changed(security)
        if new.registry != old.registry:
            # Moving a live node to another cluster would drop calls in flight between nodes.
            logger.warning(
                "registry in the policy file changed: it takes effect when reach serve restarts; "
                "until then this process %s",
                "is not a node" if self.node is None else f"stays node {self.node.node_id} of its cluster",
            )
        self.config = new
        self.generation += 1
        self.reloads_applied += 1
        self.last_error = None
        for listener in self._reload_listeners:
            try:
                listener()
            except Exception:
                logger.exception("reload listener %r failed", listener)
        logger.info(
            "config generation %d in force: policy %s; security %s; added %s; changed %s; removed %s",
            self.generation,
            "changed" if policy_changed else "unchanged",
            "changed" if security_changed else "unchanged",
            added or "none",
            changed or "none",
            removed or "none",
        )

    def _next_security(self, new: GatewayConfig) -> GatewaySecurity | None:
        if new.security is None and self.exposed_at is not None:
            msg = (
                f"{new.directory}: security.yaml was removed, but the server listens on {self.exposed_at}, "
                "beyond loopback, and would answer anyone; restore security.yaml, or restart with --insecure"
            )
            raise ConfigError(msg)
        store = self._quota_store
        shared = None if new.security is None or store is None else self._quotas(store)
        return GatewaySecurity.build(new, self.security, shared)

    def share_quotas(self, url: str, prefix: str) -> None:
        """Count principals' quotas in the Redis at `url` from now on (a cluster's, shared by its
        nodes), in the security in force and in every one a reload builds."""
        self._quota_store = (url, prefix)
        if self.security is not None:
            self.security.guard.quotas = self._quotas(self._quota_store)

    def _quotas(self, store: tuple[str, str]) -> Quotas:
        if self._shared_quotas is None:
            # Imported here, as security is: limits loads only for a config with security.yaml.
            from reach_adapters.security.quotas import Quotas

            self._shared_quotas = Quotas.shared(*store)
        return self._shared_quotas

    def _security_changed(self, security: GatewaySecurity | None) -> None:
        """Put `security` in force: every request from now on is authenticated with it, and every
        call held to its permissions and quotas.

        The one place a ``security.yaml`` takes effect, at start and on each reload that changed it.
        """
        self.security = security
        self.router.set_guard(None if security is None else security.guard)

    def _refuse_clashes(self, new: GatewayConfig, added: list[str]) -> None:
        """Code may register its own agents on the router; a config file may not take their ids."""
        for agent_id in added:
            if agent_id in self.router and agent_id not in self._agents:
                problem = (
                    f"agent {agent_id} is already registered with the router, not from this "
                    "directory; deregister it in code or pick another instance id"
                )
                raise new.agents[agent_id].error(("agent_id",), problem)

    async def _install(self, agent: Agent) -> None:
        """Serve `agent` under its id: in place of the registered one, or registered afresh.

        An agent of ours that code deregistered is not the router's to close any more, so it is
        closed here. Ids are looked up now, not from before the build: code may have acted since.
        """
        agent_id = agent.agent_id
        previous = self._agents.get(agent_id)
        if agent_id in self.router:
            await self.router.replace(agent)
        else:
            self.router.register(agent)
            if previous is not None:
                await close_agents([previous])
        self._agents[agent_id] = agent

    async def _retire(self, agent_id: str) -> None:
        """Drain the agent's calls; it is closed once the last of them is done."""
        agent = self._agents.pop(agent_id, None)
        if agent_id in self.router:
            await self.router.deregister(agent_id, drain_timeout=self._drain_timeout_s, close=True)
        elif agent is not None:
            # Deregistered in code; closing again is harmless for agents that hold something.
            await close_agents([agent])

    # -- closing -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop watching, let a running reload finish, then close the router and every agent."""
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            await asyncio.wait({watcher})
        async with self._lock:
            await self.router.aclose()

    async def __aenter__(self) -> Gateway:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _signature(directory: Path) -> _Signature | None:
    try:
        stats = [(path.name, path.stat()) for path in config_files(directory)]
    except (ConfigError, OSError):
        return None
    return frozenset((name, stat.st_mtime_ns, stat.st_size) for name, stat in stats)
