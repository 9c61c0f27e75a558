"""The router's A2A agent card: one skill per reachable capability, rebuilt only when the catalog
changes.

A card is asked for on every ``GET /.well-known/agent-card.json`` and every extended-card call;
building skills from the catalog each time would cost a walk of the registry per request. The
router tells listeners about each change (`Router.on_catalog_change`), which bumps a version here;
cards are cached against that version and the guard in force (a reload of security.yaml changes
what each principal sees without touching the catalog).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

from reach_adapters.a2a.parts import JSON_MEDIA_TYPE, TEXT_MEDIA_TYPE
from reach_adapters.router import Capability, Router
from reach_adapters.version import package_version

__all__ = ["BEARER_SCHEME", "MATCH_SKILL", "RouterCard", "skill_of"]

BEARER_SCHEME = "bearer"
# The skill of a card that has no other: a card needs one (the spec), and text is always matched.
# No capability can take its id (':' is not allowed in capability names).
MATCH_SKILL = "agent-reach:match"
# Every skill takes text (as {"text": ...}) or one JSON object, and answers either.
_MODES = [TEXT_MEDIA_TYPE, JSON_MEDIA_TYPE]
# Principals whose extended card is kept at once; the rest are rebuilt on demand.
_MAX_PRINCIPAL_CARDS = 256


def skill_of(capability: Capability) -> AgentSkill:
    """A capability as an A2A skill: its name is the skill id a message's metadata names."""
    tags = [*capability.keywords, *capability.strict_keywords] or [capability.name]
    return AgentSkill(
        id=capability.name,
        name=capability.title or capability.name,
        description=capability.description or capability.name,
        tags=list(dict.fromkeys(tags)),
        examples=capability.examples,
        input_modes=_MODES,
        output_modes=_MODES,
    )


_MATCH = AgentSkill(
    id=MATCH_SKILL,
    name="match",
    description=(
        "Send the task as text: it is matched to what this router reaches. An authenticated "
        "caller's extended card lists the skills it may name."
    ),
    tags=["route", "match"],
    input_modes=[TEXT_MEDIA_TYPE],
    output_modes=_MODES,
)


@dataclass(frozen=True, slots=True)
class _Key:
    version: int
    guard: int
    principal: str | None


class RouterCard:
    """The cards of a router served at `url` (its JSON-RPC endpoint).

    `secured()` says whether requests are authenticated now (a gateway's security.yaml, which a
    reload may add or remove). While it is, the public card declares the bearer scheme and lists
    only `MATCH_SKILL`: what a principal may reach is its own business, read from its extended
    card. A router with nothing reachable lists `MATCH_SKILL` too.
    """

    def __init__(
        self, router: Router, url: str, *, name: str = "agent-reach", secured: Callable[[], bool] = bool
    ) -> None:
        self.router = router
        self.url = url
        self.name = name
        self._secured = secured
        self.version = 0
        self._cards: OrderedDict[_Key, AgentCard] = OrderedDict()
        self._unsubscribe = router.on_catalog_change(self._changed)

    def close(self) -> None:
        """Stop following the router's catalog."""
        self._unsubscribe()

    def _changed(self) -> None:
        # Called from whichever thread changed the catalog: an int bump and a clear are enough.
        self.version += 1
        self._cards.clear()

    @property
    def secured(self) -> bool:
        return self._secured()

    def public(self) -> AgentCard:
        """The card anyone may read: every reachable skill, or none while requests are authenticated."""
        return self._card(None, listed=not self.secured)

    def extended(self, principal: str | None) -> AgentCard:
        """The card of an authenticated caller: the skills `principal` may reach."""
        return self._card(principal, listed=True)

    def _card(self, principal: str | None, *, listed: bool) -> AgentCard:
        secured = self.secured
        guard = self.router.guard
        key = _Key(self.version, id(guard) if secured else 0, principal if listed else "\0unlisted")
        card = self._cards.get(key)
        if card is not None:
            self._cards.move_to_end(key)
            return card
        skills = []
        if listed:
            reachable = self.router.reachable(principal=principal if guard is not None else None)
            skills = [skill_of(capability) for capability in reachable.values()]
        card = self._build(skills, secured)
        self._cards[key] = card
        while len(self._cards) > _MAX_PRINCIPAL_CARDS:
            self._cards.popitem(last=False)
        return card

    def _build(self, skills: list[AgentSkill], secured: bool) -> AgentCard:
        if not skills:
            skills = [_MATCH]
        card = AgentCard(
            name=self.name,
            description=(
                "Agent Reach: a router that finds the right agent for each task and delivers it. "
                "Name a skill in the message metadata ({'skill': id}), or send text to be matched."
            ),
            version=package_version(),
            supported_interfaces=[
                AgentInterface(url=self.url, protocol_binding="JSONRPC", protocol_version="1.0"),
                # The same endpoint answers A2A 0.3 clients (message/send, tasks/get, ...).
                AgentInterface(url=self.url, protocol_binding="JSONRPC", protocol_version="0.3"),
            ],
            capabilities=AgentCapabilities(
                streaming=True, push_notifications=True, extended_agent_card=secured
            ),
            default_input_modes=_MODES,
            default_output_modes=_MODES,
            skills=skills,
        )
        if secured:
            card.security_schemes[BEARER_SCHEME].CopyFrom(
                SecurityScheme(
                    http_auth_security_scheme=HTTPAuthSecurityScheme(
                        scheme="Bearer",
                        bearer_format="JWT or opaque token",
                        description="A principal's token from the server's security.yaml.",
                    )
                )
            )
            card.security_requirements.append(
                SecurityRequirement(schemes={BEARER_SCHEME: StringList(list=[])})
            )
        return card
