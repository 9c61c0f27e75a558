"""A provider's refusal says nothing ran only when the agent is that one model call: in a graph
or a chain, the steps before it may have done work, which must not run twice (DESIGN §5, §6)."""

from __future__ import annotations

import itertools
import socket
from typing import Any, TypedDict

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langgraph.graph import END, START, StateGraph
from langgraph.pregel.remote import RemoteGraph

from middleware import Fault, ResultStatus
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent

pytestmark = pytest.mark.timeout(30)


class RateLimitError(Exception):
    """Shaped like an LLM SDK's rate limit (openai.RateLimitError): HTTP 429."""

    status_code = 429


class Limited(GenericFakeChatModel):
    """A chat model whose provider answers 429 to every request."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        msg = "rate limit reached for requests"
        raise RateLimitError(msg)


def limited() -> Limited:
    return Limited(messages=iter([]))


def answering(text: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=itertools.repeat(AIMessage(text)))


async def test_a_model_refused_by_its_provider_goes_to_the_next_replica() -> None:
    async with Router() as router:
        router.register(
            LangChainAgent(limited(), agent_id="llm:chat:01", capabilities=[{"name": "chat", "weight": 100}])
        )
        router.register(
            LangChainAgent(
                answering("hi"), agent_id="llm:chat:02", capabilities=[{"name": "chat", "weight": 1}]
            )
        )
        result = await router.route("chat", "hello")
        assert (result.ok, result.agent_id, result.payload) == (True, "llm:chat:02", "hi"), result.error
        (first, _) = router.explain(result.task_id).attempts
        assert (first.error_type, first.delivered, first.fault) == ("RateLimitError", False, Fault.AGENT)


async def test_a_model_bound_with_tools_is_still_one_request() -> None:
    async with Router() as router:
        bound = limited().bind(stop=["\n"])
        router.register(
            LangChainAgent(bound, agent_id="llm:chat:01", capabilities=[{"name": "chat", "weight": 100}])
        )
        router.register(
            LangChainAgent(
                answering("hi"), agent_id="llm:chat:02", capabilities=[{"name": "chat", "weight": 1}]
            )
        )
        assert (await router.route("chat", "hello")).agent_id == "llm:chat:02"


class Order(TypedDict, total=False):
    order: str
    reply: str


def charging_graph(charged: list[str]) -> Any:
    """Charges the card, then asks a model for the reply: the model's provider refuses."""

    def charge(state: Order) -> dict[str, Any]:
        charged.append(state["order"])
        return {}

    async def reply(state: Order) -> dict[str, Any]:
        answer = await limited().ainvoke(f"confirm {state['order']}")
        return {"reply": str(answer.content)}

    graph = StateGraph(Order)
    graph.add_node("charge", charge)
    graph.add_node("reply", reply)
    graph.add_edge(START, "charge")
    graph.add_edge("charge", "reply")
    graph.add_edge("reply", END)
    return graph.compile(name="checkout")


async def test_a_refusal_inside_a_graph_is_not_sent_to_a_replica_again() -> None:
    charged: list[str] = []
    async with Router() as router:
        for replica in ("01", "02"):
            router.register(LangChainAgent(charging_graph(charged), agent_id=f"shop:checkout:{replica}"))
        result = await router.route("checkout", {"order": "A-1"})
        assert (result.status, result.fault, result.delivered) == (ResultStatus.ERROR, Fault.AGENT, True)
        assert result.error_type == "RateLimitError"
        assert "outcome is unknown" in (result.error or "")
        assert charged == ["A-1"]


async def test_a_refusal_inside_a_streamed_graph_is_not_sent_again_either() -> None:
    charged: list[str] = []
    async with Router() as router:
        for replica in ("01", "02"):
            router.register(LangChainAgent(charging_graph(charged), agent_id=f"shop:checkout:{replica}"))
        with pytest.raises(Exception, match="rate limit"):
            async for _ in router.stream("checkout", {"order": "A-1"}, stream_mode="messages"):
                pass
        assert charged == ["A-1"]


@pytest.mark.parametrize(
    "wrap",
    [
        lambda model: model.with_retry(stop_after_attempt=2, wait_exponential_jitter=False),
        lambda model: model.bind(stop=["\n"]).with_retry(stop_after_attempt=1),
        lambda model: model.with_fallbacks([limited()]),
    ],
    ids=["with_retry", "bound-with_retry", "with_fallbacks"],
)
async def test_a_model_wrapped_in_retries_or_fallbacks_is_still_one_request(wrap: Any) -> None:
    async with Router() as router:
        router.register(
            LangChainAgent(
                wrap(limited()), agent_id="llm:chat:01", capabilities=[{"name": "chat", "weight": 100}]
            )
        )
        router.register(
            LangChainAgent(
                answering("hi"), agent_id="llm:chat:02", capabilities=[{"name": "chat", "weight": 1}]
            )
        )
        result = await router.route("chat", "hello")
        assert (result.ok, result.agent_id) == (True, "llm:chat:02"), result.error


async def test_a_remote_graph_whose_server_refuses_the_connection_goes_to_the_next_replica() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    remote = RemoteGraph("checkout", url=f"http://127.0.0.1:{port}")
    charged: list[str] = []
    declared = [{"name": "checkout", "input_schema": {"type": "object"}}]
    async with Router() as router:
        router.register(
            LangChainAgent(
                remote, agent_id="shop:checkout:remote", capabilities=[{**declared[0], "weight": 100}]
            )
        )
        router.register(
            LangChainAgent(charging_graph(charged), agent_id="shop:checkout:local", capabilities=declared)
        )
        result = await router.route("checkout", {"order": "A-1"})
        (first, *_) = router.explain(result.task_id).attempts
        assert (first.agent_id, first.delivered) == ("shop:checkout:remote", False)
        assert result.agent_id == "shop:checkout:local"
        assert charged == ["A-1"]
