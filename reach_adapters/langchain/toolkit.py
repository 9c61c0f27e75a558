"""`ReachToolkit`: hand the router to a LangChain agent as tools."""

from __future__ import annotations

import fnmatch
import logging
import re
import weakref
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.tools import BaseTool, BaseToolkit
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from reach_adapters.errors import InvalidDeclarationError, describe_validation_error
from reach_adapters.langchain.consensus import CONSENSUS_TOOL_NAME, ReachConsensusTool
from reach_adapters.langchain.tools import GENERIC_TOOL_NAME, CapabilityTool, ReachAnyTool
from reach_adapters.router import UNUSABLE_STATES, Capability, Router, cautious, numbered, parse_agent_id

__all__ = ["ReachToolkit"]

logger = logging.getLogger(__name__)

# What every common model provider accepts as a tool name: OpenAI's characters and length, and a
# first character Gemini accepts (it refuses a leading digit, which OpenAI allows).
_SAFE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


class ReachToolkit(BaseToolkit):
    """One tool per reachable capability, plus ``reach_agent`` to call any capability or agent id.

    Tools are built from the router's catalog each time `get_tools` is called, so agents
    registered later appear then; a tool keeps its name for the toolkit's life, so one registered
    later never takes over an existing tool's name. ``handle_tool_error`` (default True) makes
    routing failures come back to the model as error tool messages it can act on (with the
    `ReachResult` as artifact); set it False to have the `ToolException` raised instead.

    To give an agent only what concerns it: ``capabilities`` (name globs such as ``"orders_*"``),
    ``namespace`` (only agents of that namespace are offered, and reached; ``namespaces`` for
    several, a capability that several of them declare being reached in the first listed that
    declares it), ``max_tools`` (at most that many capability tools: those given before, then
    others by name; the rest stay reachable through ``reach_agent``).

    ``principal``: the calls are made for that principal of the router's guard (security.yaml),
    and only what it may reach is offered.

    ``include_consensus``: offer ``reach_consensus`` too, which asks several agents and answers
    what they agreed on (docs/consensus.md); off by default, as each call costs several.
    """

    # A misspelt option (`max_tool=3`) would otherwise be dropped, and the agent given every tool.
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    router: Router
    handle_tool_error: bool = True
    include_generic: bool = True
    capabilities: list[str] | None = None
    namespace: str | None = Field(None, min_length=1)
    namespaces: list[Annotated[str, Field(min_length=1)]] | None = Field(None, min_length=1)
    max_tools: int | None = Field(None, ge=0)
    principal: str | None = Field(None, min_length=1)
    include_consensus: bool = False

    _names: dict[str, str] = PrivateAttr(default_factory=dict)
    # The capabilities the last `get_tools` gave tools (see `_chosen`).
    _earlier: list[str] = PrivateAttr(default_factory=list)
    # Where calls by each capability name go, and how it is declared there (see `_homes`), until
    # the catalog changes.
    _known_homes: _Homes | None = PrivateAttr(default=None)
    _watching: bool = PrivateAttr(default=False)

    def __init__(self, router: Router, /, **data: Any) -> None:
        if not isinstance(router, Router):
            msg = f"ReachToolkit needs a Router, got {type(router).__name__}"
            raise InvalidDeclarationError(msg)
        try:
            super().__init__(router=router, **data)
        except ValidationError as exc:
            msg = f"invalid ReachToolkit options: {describe_validation_error(exc)}"
            if any(error["type"] == "extra_forbidden" for error in exc.errors()):
                msg += f"; the options are {sorted(set(type(self).model_fields) - {'router'})}"
            raise InvalidDeclarationError(msg) from None

    @model_validator(mode="after")
    def _one_namespace_option(self) -> ReachToolkit:
        if self.namespace is not None and self.namespaces is not None:
            msg = "give namespace (one) or namespaces (several), not both"
            raise ValueError(msg)
        return self

    def get_tools(self) -> list[BaseTool]:
        homes = self._homes()
        # For several namespaces, each call by name picks its own (`_home`).
        home = self._home if self.namespaces is not None else None
        offered = self._offered(homes)
        tools: list[BaseTool] = []
        if self.include_generic:
            tools.append(
                ReachAnyTool.build(
                    self.router,
                    sorted(offered),
                    handle_tool_error=self.handle_tool_error,
                    refuse=self._reach_refusal if self._filtered else None,
                    namespace=self.namespace,
                    home=home,
                    principal=self.principal,
                )
            )
        if self.include_consensus:
            tools.append(
                ReachConsensusTool.build(
                    self.router,
                    handle_tool_error=self.handle_tool_error,
                    refuse=self._refusal if self._filtered else None,
                    namespace=self.namespace,
                    home=home,
                    principal=self.principal,
                    resume_with=self._resume_with,
                )
            )
        shown = self._chosen(offered)
        names = self._tool_names(shown)
        for name in shown:
            tools.append(
                CapabilityTool.build(
                    self.router,
                    offered[name],
                    name=names[name],
                    handle_tool_error=self.handle_tool_error,
                    namespace=self.namespace,
                    home=home,
                    principal=self.principal,
                    resume_with=self._resume_with,
                )
            )
        return tools

    @property
    def _resume_with(self) -> str | None:
        """The offered tool that answers an agent asking for input: only ``reach_agent`` takes
        ``resume``; without it, the caller of the model answers."""
        return GENERIC_TOOL_NAME if self.include_generic else None

    def _chosen(self, offered: dict[str, Capability]) -> list[str]:
        """The capabilities given tools, by name: all of them, or at most ``max_tools``. Those
        chosen before stay while they are offered, and only free places take others (first by
        name), so a capability registered later never pushes out a tool an agent was given."""
        limit = self.max_tools
        if limit is None or len(offered) <= limit:
            self._earlier = sorted(offered)
            return self._earlier
        kept = [name for name in self._earlier if name in offered]
        fresh = sorted(set(offered) - set(kept))
        self._earlier = sorted((kept + fresh)[:limit])
        logger.info(
            "ReachToolkit offers %d of %d capability tools (max_tools); the rest via %s",
            limit,
            len(offered),
            GENERIC_TOOL_NAME,
        )
        return self._earlier

    @property
    def _filtered(self) -> bool:
        return self.capabilities is not None or self._spaces is not None

    @property
    def _spaces(self) -> list[str] | None:
        """The namespaces kept to, in the order given; None: all."""
        return [self.namespace] if self.namespace is not None else self.namespaces

    def _homes(self) -> _Homes:
        """For each capability declared in the namespaces kept to, the namespace calls by its name
        go to (the router takes one per call): the first listed where a usable agent declares it,
        else the first listed that declares it; and its declaration there, which the tool shows.
        Read from the catalog once per change of it, not per call: reading it walks every agent."""
        if self._known_homes is None:
            self._watch()
            self._known_homes = self._read_homes()
        return self._known_homes

    def _watch(self) -> None:
        """Forget the homes whenever the catalog changes; the router holds this toolkit weakly,
        and drops the listener once the toolkit is gone."""
        if self._watching:
            return
        self._watching = True
        toolkit = weakref.ref(self)
        stop: Callable[[], None] | None = None

        def changed() -> None:
            alive = toolkit()
            if alive is not None:
                alive._known_homes = None
            elif stop is not None:
                stop()

        stop = self.router.on_catalog_change(changed)

    def _read_homes(self) -> _Homes:
        homes = _Homes()
        spaces = self._spaces
        if spaces is None:
            return homes
        rank = {space: i for i, space in enumerate(spaces)}
        best: dict[str, tuple[bool, int]] = {}
        usable: dict[tuple[str, str], list[Capability]] = {}
        for info in self.router.catalog(principal=self.principal):
            space = parse_agent_id(info.agent_id).namespace
            if space not in rank:
                continue
            key = (info.state in UNUSABLE_STATES, rank[space])
            for cap in info.capabilities:
                if not key[0]:
                    usable.setdefault((cap.name, space), []).append(cap)
                if cap.name not in best or key < best[cap.name]:
                    best[cap.name], homes.spaces[cap.name] = key, space
        # The router's own choice of declaration (`reachable`) may be another namespace's, whose
        # schema the agents called here need not take.
        for name, space in homes.spaces.items():
            if (name, space) in usable:
                homes.declared[name] = cautious(usable[name, space])
        # What the principal may not see is the router's to refuse, naming its rule: a call by its
        # name goes to the first namespace listed that declares it.
        homes.anywhere = dict(homes.spaces)
        for info in self.router.catalog() if self.principal is not None else ():
            space = parse_agent_id(info.agent_id).namespace
            for cap in info.capabilities if space in rank else ():
                first = homes.anywhere.setdefault(cap.name, space)
                homes.anywhere[cap.name] = min(first, space, key=rank.__getitem__)
        return homes

    def _home(self, capability: str) -> str | None:
        """Where ``reach_agent`` routes a call by `capability`; the first namespace when none of
        them declares it, so the router says so."""
        spaces = self._spaces
        if spaces is None:
            return None
        if len(spaces) == 1:
            return spaces[0]
        homes = self._homes()
        return homes.spaces.get(capability) or homes.anywhere.get(capability, spaces[0])

    def _offered(self, homes: _Homes) -> dict[str, Capability]:
        reachable = self.router.reachable(principal=self.principal)
        if self._spaces is not None:
            declared = homes.declared
            reachable = {name: declared[name] for name in reachable if name in declared}
        return {name: cap for name, cap in reachable.items() if self._matches(name)}

    def _matches(self, capability: str) -> bool:
        globs = self.capabilities
        return globs is None or any(fnmatch.fnmatchcase(capability, glob) for glob in globs)

    def _reach_refusal(self, target: str, capability: str | None) -> str | None:
        """`_refusal`, and for ``reach_agent`` a capability no agent of the namespaces declares:
        not the router's no_candidate, which reads as "try again later" and names capabilities
        of other namespaces. (A consensus judge may live in any namespace.)"""
        spaces = self._spaces
        if spaces is not None and ":" not in target and target not in self._homes().anywhere:
            return f"no agent of {_named(spaces)} declares it"
        return self._refusal(target, capability)

    def _refusal(self, target: str, capability: str | None) -> str | None:
        """Why ``reach_agent`` may not reach `target` under this toolkit's filters, or None.

        A call by capability name goes to the toolkit's namespaces only (see `ReachAnyTool`).
        """
        if ":" not in target:
            return None if self._matches(target) else "it is not one of the capabilities this toolkit offers"
        spaces = self._spaces
        if spaces is not None and parse_agent_id(target).namespace not in spaces:
            return f"only agents of {_named(spaces)} are offered"
        if self.capabilities is None:
            return None
        if capability is not None:
            return (
                None
                if self._matches(capability)
                else f"capability {capability!r} is not one this toolkit offers"
            )
        declared = [
            cap.name
            for info in self.router.catalog(principal=self.principal)
            if info.agent_id == target
            for cap in info.capabilities
        ]
        if declared and not any(self._matches(name) for name in declared):
            return "the agent offers none of the capabilities this toolkit offers"
        return None

    def _tool_names(self, capabilities: list[str]) -> dict[str, str]:
        """Names for the tools of `capabilities`; a name once given stays, whatever registers later."""
        names = self._names
        reserved = {GENERIC_TOOL_NAME} if self.include_generic else set()
        if self.include_consensus:
            reserved.add(CONSENSUS_TOOL_NAME)
        fresh = [name for name in capabilities if name not in names]
        if fresh:
            names.update(_safe_names(fresh, taken=reserved | set(names.values())))
        return {name: names[name] for name in capabilities}


def _named(spaces: list[str]) -> str:
    return f"namespace {spaces[0]!r}" if len(spaces) == 1 else f"namespaces {spaces}"


@dataclass
class _Homes:
    """Per capability name: the namespace calls by it go to, and its declaration there when a
    usable agent of that namespace declares it; and what the namespaces declare at all."""

    spaces: dict[str, str] = field(default_factory=dict)
    declared: dict[str, Capability] = field(default_factory=dict)
    # Every capability an agent of the namespaces declares, those hidden from the principal too,
    # and the namespace calls by it go to.
    anywhere: dict[str, str] = field(default_factory=dict)


def _safe_names(capabilities: Collection[str], *, taken: set[str]) -> dict[str, str]:
    """A tool name for each capability, safe for model providers and unique among `taken` and
    each other.

    A capability whose name is already safe and free keeps it; other names are made safe and,
    where that makes them meet a name already taken, numbered among themselves.
    """
    owned = {name for name in capabilities if _SAFE.fullmatch(name) and name not in taken}
    taken = taken | owned
    names = {name: name for name in owned}
    for capability in sorted(set(capabilities) - owned):
        names[capability] = tool_name = numbered(_safe(capability), taken, limit=_MAX_NAME)
        taken.add(tool_name)
    return names


def _safe(capability: str) -> str:
    name = _UNSAFE.sub("_", capability)
    # Capability names may start with a digit; Gemini tool names may not.
    if not (name[0].isalpha() or name[0] == "_"):
        name = "_" + name
    return name[:_MAX_NAME]
