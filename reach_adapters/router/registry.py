"""Agents and their capabilities, indexed so selection never scans every agent."""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from typing import Any

from reach_adapters.errors import DuplicateAgentError, InvalidDeclarationError
from reach_adapters.router.agent import Agent
from reach_adapters.router.breaker import Breaker
from reach_adapters.router.capability import Capability, validate_capabilities
from reach_adapters.router.identity import parse_agent_id
from reach_adapters.router.naming import numbered
from reach_adapters.router.policy import BreakerSettings
from reach_adapters.router.state import AgentRuntime, Slot, Waitlist

__all__ = ["Registry"]

_CacheKey = tuple[str, str | None, str | None]

logger = logging.getLogger(__name__)


class Registry:
    """Holds runtimes by agent id and slots by capability name.

    Filtered candidate lists are cached per (capability, version, namespace) and dropped on every
    change, so the hot path is one dict lookup.
    """

    def __init__(self, breaker: BreakerSettings) -> None:
        self._breaker = breaker
        self._agents: dict[str, AgentRuntime] = {}
        self._slots: dict[str, list[Slot]] = {}
        self._waitlists: dict[str, Waitlist] = {}
        self._cache: dict[_CacheKey, tuple[Slot, ...]] = {}

    def __len__(self) -> int:
        return len(self._agents)

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._agents

    def __iter__(self) -> Iterator[AgentRuntime]:
        return iter(list(self._agents.values()))

    def add(self, agent: Agent) -> AgentRuntime:
        agent_id = getattr(agent, "agent_id", None)
        if not callable(getattr(agent, "invoke", None)) or agent_id is None:
            msg = (
                f"{type(agent).__name__} is not an agent: it needs agent_id, capabilities and "
                "async invoke(message); wrap functions in FunctionAgent"
            )
            raise InvalidDeclarationError(msg)
        ident = parse_agent_id(agent_id)
        if agent_id in self._agents:
            msg = (
                f"agent {agent_id} is already registered; deregister it first, pick another instance "
                "id for a replica of it, or another type for a different agent (replicas share "
                "namespace and type, and the router takes them to declare alike)"
            )
            raise DuplicateAgentError(msg)
        # An agent that can declare capabilities later (through its handle: an MCP server with no
        # tools yet) may start with none; any other would never serve.
        capabilities = validate_capabilities(
            agent_id,
            getattr(agent, "capabilities", None) or [],
            allow_empty=callable(getattr(agent, "attach", None)),
        )
        runtime = AgentRuntime(
            agent=agent,
            agent_id=agent_id,
            ident=ident,
            breaker=Breaker(self._breaker),
        )
        self._agents[agent_id] = runtime
        self._index(runtime, capabilities)
        return runtime

    def reconfigure(self, breaker: BreakerSettings) -> None:
        """New breaker settings for new agents and, from their next call on, for registered ones."""
        self._breaker = breaker
        for runtime in self._agents.values():
            runtime.breaker.reconfigure(breaker)

    def set_capabilities(
        self, runtime: AgentRuntime, capabilities: Sequence[Capability | Mapping[str, Any]]
    ) -> None:
        """Re-declare a registered agent's capabilities (an MCP server's tool list changed).

        A capability it still declares, by its own name and in the same version, keeps its usual
        latency; a new one, or one in another version (other work, maybe), starts from none
        (and borrows the agent's until its first success, `Slot.usual_ms`).
        """
        built = validate_capabilities(runtime.agent_id, capabilities, allow_empty=True)
        usual = {_own_key(slot): slot.avg_ms for slot in runtime.slots if slot.avg_ms is not None}
        served = {_own_key(slot): slot.capability.name for slot in runtime.slots if slot.own_name}
        self._unindex(runtime)
        runtime.slots = []
        self._index(runtime, built, served)
        if usual:
            for slot in runtime.slots:
                slot.avg_ms = usual.get(_own_key(slot))

    def _index(
        self,
        runtime: AgentRuntime,
        capabilities: Sequence[Capability],
        served: Mapping[tuple[str, str], str] | None = None,
    ) -> None:
        """Index `capabilities`, those renamed before (`served`, by their own name and version)
        first: a name clients know keeps its tool when the agent declares that name later."""
        served = served or {}
        own = {cap.name for cap in capabilities}
        slots: dict[int, Slot] = {}
        for index in sorted(range(len(capabilities)), key=lambda i: _key(capabilities[i]) not in served):
            declared = capabilities[index]
            cap = self._distinct(runtime, declared, own, served.get(_key(declared)))
            waitlist = self._waitlists.get(cap.name)
            if waitlist is None:
                waitlist = self._waitlists[cap.name] = Waitlist()
            slot = slots[index] = Slot(runtime=runtime, capability=cap, waitlist=waitlist)
            if cap is not declared:
                slot.own_name = declared.name
            self._add(slot)
        runtime.slots = [slots[index] for index in range(len(capabilities))]
        self._cache.clear()

    def _distinct(
        self, runtime: AgentRuntime, cap: Capability, own: Container[str], before: str | None
    ) -> Capability:
        """`cap`, or a renamed copy when another agent of its namespace already declares its name
        and version with other schemas: namesakes are not replicas, and a payload one accepts the
        other may refuse. The first keeps the name; the newcomer gets ``<name>_<type>`` (numbered
        when the agent declares that name itself (`own`); ``<name>_<type>_<instance>``, numbered
        when need be, when agents of one type disagree), which is the same on every start; and
        keeps the name it was given `before` an update while its own does not fit and that one
        still does. Schemas that differ only in titles, descriptions or examples are the same."""
        namespace = runtime.ident.namespace
        if self._fits(cap.name, cap, namespace):
            return cap
        if before is not None and self._fits(before, cap, namespace, renamed=True):
            return cap.model_copy(update={"name": before})
        kind = runtime.ident.type.replace(".", "_")
        name = numbered(f"{cap.name[: 128 - len(kind) - 1]}_{kind}", own, limit=128)
        if name in self._slots and not self._fits(name, cap, namespace, renamed=True):
            taken = _Taken(lambda name: name in own or not self._fits(name, cap, namespace, renamed=True))
            suffix = f"_{kind}_{runtime.ident.instance.replace('.', '_')}"
            name = numbered(cap.name[: 128 - len(suffix)] + suffix, taken, limit=128)
        logger.warning(
            "agent %s declares %r with other schemas than the agents already serving it; "
            "it serves it as %r (a different version, or a prefix, keeps namesakes apart)",
            runtime.agent_id,
            cap.name,
            name,
        )
        return cap.model_copy(update={"name": name})

    def _fits(self, name: str, cap: Capability, namespace: str, *, renamed: bool = False) -> bool:
        """Whether `cap` can serve under `name`: no agent of its namespace declares it in that
        version, or those who do take and give the same shapes and came by the name alike: for a
        generated name, renamed to it from the same name; for a declared one, declaring it too.
        A made-up ``search_code`` is never another server's own ``search_code``."""
        for slot in self._slots.get(name, ()):
            if slot.capability.version == cap.version and slot.runtime.ident.namespace == namespace:
                # Agents serving one name, version and namespace all take the same shapes (a
                # newcomer that does not is renamed), so the first stands for every replica:
                # registering the thousandth replica compares once, not a thousand times.
                return slot.capability.same_schemas(cap) and slot.own_name == (cap.name if renamed else None)
        return True

    def _add(self, slot: Slot) -> None:
        name = slot.capability.name
        # A restored slot brings its capability's waitlist back, if removing it had dropped it.
        self._waitlists.setdefault(name, slot.waitlist)
        self._slots.setdefault(name, []).append(slot)

    def _unindex(self, runtime: AgentRuntime) -> None:
        for slot in runtime.slots:
            name = slot.capability.name
            kept = [s for s in self._slots.get(name, ()) if s is not slot]
            if kept:
                self._slots[name] = kept
            else:
                self._slots.pop(name, None)
                if not len(self._waitlists.get(name, ())):
                    self._waitlists.pop(name, None)
        self._cache.clear()

    def restore(self, runtime: AgentRuntime) -> None:
        """Put a removed runtime back with its own slots, whose in-flight counts are still live."""
        self._agents[runtime.agent_id] = runtime
        for slot in runtime.slots:
            self._add(slot)
        self._cache.clear()

    def remove(self, agent_id: str) -> AgentRuntime | None:
        runtime = self._agents.pop(agent_id, None)
        if runtime is not None:
            self._unindex(runtime)
        return runtime

    def get(self, agent_id: str) -> AgentRuntime | None:
        return self._agents.get(agent_id)

    def capability_names(self) -> list[str]:
        return sorted(self._slots)

    def candidates(self, name: str, version: str | None, namespace: str | None) -> tuple[Slot, ...]:
        key = (name, version, namespace)
        cached = self._cache.get(key)
        if cached is None:
            cached = tuple(
                slot
                for slot in self._slots.get(name, ())
                if (version is None or slot.capability.version == version)
                and (namespace is None or slot.runtime.ident.namespace == namespace)
            )
            if cached:
                # Unknown names are not cached: a stream of typos must not grow memory.
                self._cache[key] = cached
        return cached

    def declarations(self) -> dict[str, Capability]:
        """One declaration per capability name (the first registered), for matching tasks to names."""
        return {name: slots[0].capability for name, slots in self._slots.items()}

    def longest_timeout_ms(self) -> int:
        """The longest `timeout_ms` any capability declares: as long as any call may run."""
        return max(
            (slot.capability.timeout_ms for slots in self._slots.values() for slot in slots), default=0
        )

    def slots_named(self, name: str) -> list[Slot]:
        return list(self._slots.get(name, ()))

    def waitlist(self, name: str) -> Waitlist | None:
        return self._waitlists.get(name)

    def versions(self, name: str) -> list[str]:
        return sorted({slot.capability.version for slot in self._slots.get(name, ())})


class _Taken:
    """The names a made-up one may not be, as `numbered` asks."""

    def __init__(self, taken: Callable[[str], bool]) -> None:
        self._taken = taken

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._taken(name)


def _key(capability: Capability) -> tuple[str, str]:
    return capability.name, capability.version


def _own_key(slot: Slot) -> tuple[str, str]:
    """The capability as its agent declares it: its own name (not a name the router gave it to
    keep namesakes apart, which may change as other agents come and go) and version."""
    return slot.own_name or slot.capability.name, slot.capability.version
