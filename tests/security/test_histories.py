"""A principal's chat histories are its own, as its threads are: the ids a
`RunnableWithMessageHistory` keeps its histories per (``session_id``, or the ids of its
``history_factory_config``) reach the history factory scoped to the call's principal, so naming
another principal's session opens a history of one's own; calls without a principal are left
as they are."""

from __future__ import annotations

import inspect
import itertools
import warnings
from typing import Any

import pytest
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import ConfigurableFieldSpec, Runnable, RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from middleware import MetaInfo, ReachMessage, ResultStatus
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent
from reach_adapters.security.guard import SecurityGuard
from reach_adapters.security.spec import SecuritySpec
from tests.core.conftest import FAST

pytestmark = pytest.mark.timeout(30)

SESSION = {"session_id": "alice-chat"}


class Chats:
    """Chat histories in memory, one per key the history factory is given, and what the chat
    model was shown in each run (the history, then the question)."""

    def __init__(self) -> None:
        self.store: dict[tuple[str, ...], InMemoryChatMessageHistory] = {}
        self.shown: list[list[str]] = []

    def history(self, *key: str) -> InMemoryChatMessageHistory:
        if key not in self.store:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated, and still what many agents use
                self.store[key] = InMemoryChatMessageHistory()
        return self.store[key]

    def told(self) -> dict[tuple[str, ...], list[str]]:
        """What each history holds: the human turns (the model's answers left out)."""
        return {
            key: [str(m.content) for m in h.messages if m.type == "human"] for key, h in self.store.items()
        }

    def chain(self) -> Runnable[Any, Any]:
        def shown(prompt: PromptValue) -> PromptValue:
            self.shown.append([str(m.content) for m in prompt.to_messages()])
            return prompt

        prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
        model = GenericFakeChatModel(messages=itertools.cycle([AIMessage("noted")]))
        return prompt | RunnableLambda(shown) | model

    def by_session(self) -> Runnable[Any, Any]:
        """A history per ``session_id`` (LangChain's default)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated, and still what many agents use
            return RunnableWithMessageHistory(
                self.chain(),
                lambda session_id: self.history(session_id),
                input_messages_key="question",
                history_messages_key="history",
            )

    def by(self, *ids: str) -> Runnable[Any, Any]:
        """A history per the ids of a ``history_factory_config``."""

        def factory(*one: str, **given: str) -> InMemoryChatMessageHistory:
            return self.history(*(one or [given[key] for key in ids]))

        factory.__signature__ = _signature(ids)  # type: ignore[attr-defined]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return RunnableWithMessageHistory(
                self.chain(),
                factory,
                input_messages_key="question",
                history_messages_key="history",
                history_factory_config=[ConfigurableFieldSpec(id=key, annotation=str) for key in ids],
            )


def _signature(ids: tuple[str, ...]) -> Any:
    """LangChain hands the ids to the factory by parameter name (one id, by position)."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature([inspect.Parameter(key, kind, annotation=str) for key in ids])


def guarded(*principals: str) -> Router:
    spec = SecuritySpec.model_validate({"principals": {name: {"allow": ["*"]} for name in principals}})
    return Router(FAST, guard=SecurityGuard(spec))


def asked(text: str) -> dict[str, str]:
    return {"question": text}


def chat_agent(runnable: Runnable[Any, Any], agent_id: str = "chat:history:01") -> LangChainAgent:
    return LangChainAgent(runnable, agent_id=agent_id, capabilities=[{"name": "chat"}])


async def say(router: Router, text: str, configurable: dict[str, Any], principal: str | None = None) -> None:
    result = await router.route("chat", asked(text), configurable=configurable, principal=principal)
    assert (result.status, result.payload) == (ResultStatus.OK, "noted"), result.error


async def test_a_principal_naming_anothers_session_gets_a_history_of_its_own() -> None:
    chats = Chats()
    router = guarded("alice", "bob")
    router.register(chat_agent(chats.by_session()))
    for who, text in (("alice", "my card is 4111"), ("bob", "what did she say?"), ("alice", "and?")):
        await say(router, text, SESSION, who)
    # Bob's stream names her session too: still his own history.
    chunks = [c async for c in router.stream("chat", asked("more"), configurable=SESSION, principal="bob")]
    assert chunks
    assert chats.shown == [
        ["my card is 4111"],
        ["what did she say?"],  # not alice's turn: bob neither reads her history...
        ["my card is 4111", "noted", "and?"],  # ...nor adds to it; she sees her own across calls
        ["what did she say?", "noted", "more"],
    ]
    assert chats.told() == {
        ("alice/alice-chat",): ["my card is 4111", "and?"],
        ("bob/alice-chat",): ["what did she say?", "more"],
    }


async def test_every_id_of_a_history_factory_config_is_scoped_wherever_the_history_sits() -> None:
    chats = Chats()
    router = guarded("alice", "bob")
    # The history as a chain's later step, under a binding: found all the same.
    history = chats.by("user_id", "conversation_id").with_config(tags=["kept"])
    runnable = RunnableLambda(lambda payload: payload, name="prep") | history
    router.register(chat_agent(runnable))
    ids = {"user_id": "alice", "conversation_id": "c-1"}
    await say(router, "a1", ids, "alice")
    await say(router, "b1", ids, "bob")
    # A principal naming its own scoped form reaches its own history, once scoped.
    mine = {"user_id": "alice/alice", "conversation_id": 7}
    await say(router, "a2", mine, "alice")
    assert chats.told() == {
        ("alice/alice", "alice/c-1"): ["a1"],
        ("bob/alice", "bob/c-1"): ["b1"],
        ("alice/alice", "alice/7"): ["a2"],
    }


async def test_a_history_kept_per_thread_is_scoped_once() -> None:
    """The router scopes ``thread_id`` itself; a history keyed on it gets that, not a second prefix."""
    chats = Chats()
    router = guarded("alice", "bob")
    router.register(chat_agent(chats.by("thread_id")))
    for who in ("alice", "bob"):
        await say(router, who, {"thread_id": "t-1"}, who)
    assert chats.told() == {("alice/t-1",): ["alice"], ("bob/t-1",): ["bob"]}


async def test_the_router_scopes_session_ids_and_an_id_that_is_no_id_is_its_mistake() -> None:
    chats = Chats()
    router = guarded("alice")
    router.register(chat_agent(chats.by_session()))
    message = ReachMessage(
        meta_info=MetaInfo(capability="chat", principal="alice", configurable=SESSION),
        raw_payload=asked("hi"),
    )
    result = await router.dispatch(message)
    assert result.status is ResultStatus.OK, result.error
    # What the caller sent names its own id; the router scopes its own copy (as for thread_id).
    assert message.meta_info.configurable == SESSION
    assert chats.told() == {("alice/alice-chat",): ["hi"]}
    refused = await router.route(
        "chat", asked("x"), configurable={"session_id": {"of": "bob"}}, principal="alice"
    )
    assert (refused.status, refused.fault) == (ResultStatus.INVALID, "caller")
    assert "configurable['session_id'] must be a string or an integer" in (refused.error or "")
    assert all(info.failures == 0 for info in router.catalog())


async def test_calls_without_a_principal_are_left_as_they_are() -> None:
    chats = Chats()
    open_router = Router(FAST)
    open_router.register(chat_agent(chats.by_session()))
    await say(open_router, "one caller", SESSION)
    router = guarded("alice")
    router.register(chat_agent(chats.by_session()))
    await say(router, "alice", SESSION, "alice")
    # The program owning the router is not scoped: it names alice's history by its scoped id.
    await say(router, "owner", {"session_id": "alice/alice-chat"})
    assert chats.told() == {("alice-chat",): ["one caller"], ("alice/alice-chat",): ["alice", "owner"]}


def test_the_ids_to_scope_are_read_once_at_registration() -> None:
    from reach_adapters.langchain.histories import history_ids

    chats = Chats()
    assert history_ids(chats.by_session()) == {"session_id"}
    assert history_ids(RunnableLambda(str).with_fallbacks([chats.by("user_id", "conversation_id")])) == {
        "user_id",
        "conversation_id",
    }
    assert history_ids(chats.chain()) == frozenset()


@pytest.mark.parametrize(
    "given",
    [
        {"session_id": "../bob/bob-chat"},
        {"session_id": "alice/../bob/bob-chat"},
        {"session_id": "chats\\..\\bob"},
        {"session_id": "."},
        {"user_id": "..", "conversation_id": "c"},
    ],
)
async def test_an_id_that_reads_as_a_path_elsewhere_is_refused(given: dict[str, Any]) -> None:
    # A history kept in a file per id (LangChain's FileChatMessageHistory pattern) would open
    # <dir>/alice/../bob/bob-chat.json: bob's history.
    chats = Chats()
    router = guarded("alice")
    ids = tuple(given) if len(given) > 1 else ()
    router.register(chat_agent(chats.by(*ids) if ids else chats.by_session()))
    refused = await router.route("chat", asked("x"), configurable=given, principal="alice")
    assert (refused.status, refused.fault) == (ResultStatus.INVALID, "caller"), refused.error
    assert "must not hold '.' or '..' steps or backslashes" in (refused.error or "")
    assert chats.told() == {}
    assert all(info.failures == 0 for info in router.catalog())


async def test_an_integer_id_python_cannot_write_out_is_the_callers_mistake() -> None:
    chats = Chats()
    router = guarded("alice")
    router.register(chat_agent(chats.by("user_id", "conversation_id")))
    huge = 10**5000
    for _ in range(3):
        refused = await router.route(
            "chat", asked("x"), configurable={"user_id": huge, "conversation_id": "c"}, principal="alice"
        )
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, "caller"), refused.error
    assert all(info.failures == 0 for info in router.catalog())
