"""The router's A2A agent card: one skill per reachable capability, rebuilt only when the catalog
changes.

A card is asked for on every ``GET /.well-known/agent-card.json`` and every extended-card call;
building skills from the catalog each time would cost a walk of the registry per request, and
rendering one as JSON (the SDK's `agent_card_to_dict`) tens of milliseconds with a few hundred
skills. The router tells listeners about each change (`Router.on_catalog_change`, from any
thread), which bumps a version here; the cache of cards, and of their rendered bytes and ETag, is
emptied on the event loop when that version or the guard in force (a reload of security.yaml
changes what each principal sees without touching the catalog) is not the one it was filled under.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
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

__all__ = ["BEARER_SCHEME", "MATCH_SKILL", "Rendered", "RouterCard", "skill_of"]

BEARER_SCHEME = "bearer"
# The skill of a card that has no other: a card needs one (the spec), and text is always matched.
# No capability can take its id (':' is not allowed in capability names).
MATCH_SKILL = "agent-reach:match"
# Every skill takes text (as {"text": ...}) or one JSON object, and answers either.
_MODES = [TEXT_MEDIA_TYPE, JSON_MEDIA_TYPE]
# Cards kept at once (a principal's, or the public card at one URL); the rest are rebuilt on demand.
_MAX_CARDS = 256


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
    principal: str | None
    listed: bool
    url: str


@dataclass(slots=True)
class Rendered:
    """A card, and once asked for, its JSON bytes and their weak ETag as served over HTTP."""

    card: AgentCard
    _http: tuple[bytes, str] | None = field(default=None, repr=False)

    def http(self) -> tuple[bytes, str]:
        if self._http is None:
            body = orjson.dumps(agent_card_to_dict(self.card))
            self._http = (body, f'W/"{hashlib.sha256(body).hexdigest()}"')
        return self._http


class RouterCard:
    """The cards of a router served at `url` (its JSON-RPC endpoint; each call may name another,
    the URL a request was sent to).

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
        self._bump = threading.Lock()
        # Touched on the event loop only; `_filled` is what the cards were built under.
        self._cards: OrderedDict[_Key, Rendered] = OrderedDict()
        self._filled: tuple[int, object, bool] | None = None
        self._unsubscribe = router.on_catalog_change(self._changed)

    def close(self) -> None:
        """Stop following the router's catalog."""
        self._unsubscribe()

    def _changed(self) -> None:
        # Any thread may change the catalog: only the version moves here, under a lock so no
        # bump is lost; the cards are dropped by the next read, on the loop.
        with self._bump:
            self.version += 1

    @property
    def secured(self) -> bool:
        return self._secured()

    def public(self, url: str | None = None) -> Rendered:
        """The card anyone may read: every reachable skill, or none while requests are authenticated."""
        return self._card(None, listed=not self.secured, url=url or self.url)

    def extended(self, principal: str | None, url: str | None = None) -> AgentCard:
        """The card of an authenticated caller: the skills `principal` may reach."""
        return self._card(principal, listed=True, url=url or self.url).card

    def _card(self, principal: str | None, *, listed: bool, url: str) -> Rendered:
        secured = self.secured
        guard = self.router.guard
        # Read before building: a change while building leaves a newer version, and a refill.
        held = self._filled
        if held is None or held[0] != self.version or held[1] is not guard or held[2] != secured:
            self._cards.clear()
            self._filled = (self.version, guard, secured)
        key = _Key(principal if listed else None, listed, url)
        rendered = self._cards.get(key)
        if rendered is not None:
            self._cards.move_to_end(key)
            return rendered
        skills = []
        if listed:
            reachable = self.router.reachable(principal=principal if guard is not None else None)
            skills = [skill_of(capability) for capability in reachable.values()]
        rendered = Rendered(self._build(skills, secured, url))
        self._cards[key] = rendered
        while len(self._cards) > _MAX_CARDS:
            self._cards.popitem(last=False)
        return rendered

    def _build(self, skills: list[AgentSkill], secured: bool, url: str) -> AgentCard:
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
                AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
                # The same endpoint answers A2A 0.3 clients (message/send, tasks/get, ...).
                AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
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
