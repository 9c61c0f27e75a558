"""Which messages a task takes: only an input-required task takes another, one answer at a time;
a principal's threads are its own; what a refused message keeps, and what a task never stores."""

from __future__ import annotations

import asyncio
import operator
import uuid
from typing import Annotated, Any

import httpx
import pytest
from a2a.types.a2a_pb2 import TaskState
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from typing_extensions import TypedDict

from reach_adapters.langchain import LangChainAgent
from tests.a2a_serve.agents import Held, approval_graph, shout
from tests.a2a_serve.conftest import Serve, message, request

pytestmark = pytest.mark.timeout(60)

V1 = {"A2A-Version": "1.0"}
ASK = {"messages": [{"role": "user", "content": "refund order 42"}]}


class Who(TypedDict):
    user_id: str


TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789", "ops": "ops-token-0123456789"}
SECURITY = """\
principals:
  alice: {token_env: REACH_TEST_ALICE, allow: [refund]}
  bob: {token_env: REACH_TEST_BOB, allow: ["*"]}
  ops: {token_env: REACH_TEST_OPS, allow: ["*"], role: admin}
"""


def as_(principal: str | None) -> dict[str, str]:
    if principal is None:
        return V1
    return {**V1, "Authorization": f"Bearer {TOKENS[principal]}"}


def msg(
    text: str | None = None,
    *,
    data: Any = None,
    skill: str | None = None,
    task_id: str = "",
    context_id: str = "",
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    part: dict[str, Any] = {"text": text} if data is None else {"data": data, "mediaType": "application/json"}
    out: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [part]}
    meta = {**(metadata or {}), **({"skill": skill} if skill else {})}
    if meta:
        out["metadata"] = meta
    if task_id:
        out["taskId"], out["contextId"] = task_id, context_id
    elif context_id:
        out["contextId"] = context_id
    return out


async def call(url: str, method: str, params: dict[str, Any], who: str | None = None) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=30, headers=as_(who)) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer: dict[str, Any] = (await http.post(f"{url}/a2a", json=body)).json()
        return answer


def task(answer: dict[str, Any]) -> dict[str, Any]:
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    found: dict[str, Any] = result.get("task", result)
    return found


def texts(one: dict[str, Any]) -> list[str]:
    return [part.get("text", "") for artifact in one.get("artifacts", []) for part in artifact["parts"]]


async def test_a_message_for_a_working_or_ended_task_is_refused(served: Serve) -> None:
    server = await served()
    held, calls = Held(), list[str]()
    server.gateway.router.register(held)
    server.gateway.router.register(shout(calls))
    sent = await call(
        server.url,
        "SendMessage",
        {"message": msg("go", skill="held"), "configuration": {"returnImmediately": True}},
    )
    first = task(sent)
    async with asyncio.timeout(10):
        await held.started.wait()
    follow = msg("again", skill="shout", task_id=first["id"], context_id=first["contextId"])
    busy = await call(server.url, "SendMessage", {"message": follow})
    held.release.set()
    async with asyncio.timeout(10):
        while (stored := task(await call(server.url, "GetTask", {"id": first["id"]})))["status"]["state"] != (
            "TASK_STATE_COMPLETED"
        ):
            await asyncio.sleep(0.02)
    ended = await call(server.url, "SendMessage", {"message": {**follow, "messageId": uuid.uuid4().hex}})
    assert "is working" in busy["error"]["message"], busy
    assert "is completed" in ended["error"]["message"], ended
    assert calls == []
    assert stored["metadata"]["agent-reach/agent_id"] == "util:held:01"
    assert len(stored["artifacts"]) == 1


async def test_two_answers_at_once_resume_the_task_once(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(LangChainAgent(approval_graph(), agent_id="support:refund:01"))
    asked = task(await call(server.url, "SendMessage", {"message": msg(data=ASK, skill="refund")}))
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    answers = await asyncio.gather(
        *(
            call(
                server.url,
                "SendMessage",
                {"message": msg(word, task_id=asked["id"], context_id=asked["contextId"])},
            )
            for word in ("yes", "no")
        )
    )
    done = [answer for answer in answers if "result" in answer]
    refused = [answer for answer in answers if "error" in answer]
    assert len(done) == 1, answers
    assert len(refused) == 1, answers
    stored = task(await call(server.url, "GetTask", {"id": asked["id"]}))
    assert stored["status"]["state"] == "TASK_STATE_COMPLETED"
    assert texts(stored) == texts(task(done[0]))


async def test_a_principal_cannot_enter_or_resume_anothers_thread(
    served: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, token in TOKENS.items():
        monkeypatch.setenv(f"REACH_TEST_{name.upper()}", token)
    server = await served(SECURITY)
    server.gateway.router.register(LangChainAgent(approval_graph(), agent_id="support:refund:01"))
    ask = msg(data=ASK, skill="refund", context_id="ctx-alice")
    alices = task(await call(server.url, "SendMessage", {"message": ask}, "alice"))
    assert alices["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    # Bob names alice's contextId, and a resume in the metadata: a new conversation of his own.
    intrude = msg("x", skill="refund", context_id="ctx-alice", metadata={"agent-reach/resume": "yes, by bob"})
    bobs = task(await call(server.url, "SendMessage", {"message": intrude}, "bob"))
    answer = msg("no", task_id=alices["id"], context_id=alices["contextId"])
    answered = task(await call(server.url, "SendMessage", {"message": answer}, "alice"))
    assert bobs["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", bobs
    assert answered["status"]["state"] == "TASK_STATE_COMPLETED", answered
    assert texts(answered) == ["refund no"]


async def test_an_admin_sees_every_task_without_redis(served: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, token in TOKENS.items():
        monkeypatch.setenv(f"REACH_TEST_{name.upper()}", token)
    server = await served(SECURITY)
    server.gateway.router.register(LangChainAgent(approval_graph(), agent_id="support:refund:01"))
    alices = task(await call(server.url, "SendMessage", {"message": msg(data=ASK, skill="refund")}, "alice"))
    by_admin = await call(server.url, "GetTask", {"id": alices["id"]}, "ops")
    by_bob = await call(server.url, "GetTask", {"id": alices["id"]}, "bob")
    listed = {name: (await call(server.url, "ListTasks", {}, name))["result"] for name in ("ops", "bob")}
    assert task(by_admin)["id"] == alices["id"]
    assert "error" in by_bob
    assert [one["id"] for one in listed["ops"]["tasks"]] == [alices["id"]]
    assert listed["bob"].get("tasks", []) == []


async def test_a_refused_message_keeps_the_callers_ids_and_no_hop_token_is_stored(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(shout([]))
    hop = {"agent-reach/task_id": "upstream-42", "agent-reach/trace_id": "trace-7"}
    refused = task(
        await call(server.url, "SendMessage", {"message": msg(data=[1], skill="shout", metadata=hop)})
    )
    token = {"agent-reach/caller_token": "a-signed-hop-token"}
    sent = task(await call(server.url, "SendMessage", {"message": msg("hi", skill="shout", metadata=token)}))
    stored = task(await call(server.url, "GetTask", {"id": sent["id"]}))
    assert refused["status"]["state"] == "TASK_STATE_REJECTED"
    assert (refused["metadata"]["agent-reach/task_id"], refused["metadata"]["agent-reach/trace_id"]) == (
        "upstream-42",
        "trace-7",
    )
    assert stored["history"], stored
    assert "a-signed-hop-token" not in str(stored)


async def test_a_streamed_message_to_a_graph_that_asks_ends_input_required(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(LangChainAgent(approval_graph(), agent_id="support:refund:01"))
    states: list[int] = []
    task_id = context_id = ""
    async with server.client(streaming=True) as client:
        async with asyncio.timeout(20):
            async for event in client.send_message(request(message(ASK, skill="refund"))):
                if event.HasField("task"):
                    task_id, context_id = event.task.id, event.task.context_id
                    states.append(event.task.status.state)
                elif event.HasField("status_update"):
                    task_id, context_id = event.status_update.task_id, event.status_update.context_id
                    states.append(event.status_update.status.state)
        assert states[-1] == TaskState.TASK_STATE_INPUT_REQUIRED, states
        answer = message("yes", task_id=task_id, context_id=context_id)
        async with asyncio.timeout(20):
            async for event in client.send_message(request(answer)):
                if event.HasField("task"):
                    states.append(event.task.status.state)
                elif event.HasField("status_update"):
                    states.append(event.status_update.status.state)
    assert states[-1] == TaskState.TASK_STATE_COMPLETED, states


async def test_an_answer_resumes_the_thread_the_first_message_named(served: Serve) -> None:
    server = await served()
    router = server.gateway.router
    router.register(LangChainAgent(approval_graph(), agent_id="support:refund:01"))
    named = {"agent-reach/configurable": {"thread_id": "alice-1"}}
    asked = task(
        await call(server.url, "SendMessage", {"message": msg(data=ASK, skill="refund", metadata=named)})
    )
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
    # The answer names no thread: it goes on the one the agent asked on, not the contextId's.
    answer = msg("yes", task_id=asked["id"], context_id=asked["contextId"])
    answered = task(await call(server.url, "SendMessage", {"message": answer}))
    assert answered["status"]["state"] == "TASK_STATE_COMPLETED", answered
    assert texts(answered) == ["refund yes"]
    after = await router.route("refund", None, configurable={"thread_id": "alice-1"}, resume="again")
    assert "waits on no interrupt" in (after.error or "")


def asking_with_context() -> Any:
    """A checkpointed graph that asks, and whose node reads the run's context before and after."""

    def review(state: MessagesState, runtime: Runtime[Who]) -> dict[str, Any]:
        decision = interrupt(f"approve, {runtime.context['user_id']}?")
        return {"messages": [AIMessage(f"refund {decision} for {runtime.context['user_id']}")]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState, context_schema=Who)
    builder.add_node("review", review)
    builder.add_edge(START, "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=InMemorySaver())


async def test_an_answer_is_run_in_the_context_the_first_message_gave(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(LangChainAgent(asking_with_context(), agent_id="support:refund:01"))
    first = {
        "agent-reach/configurable": {"thread_id": "alice-1"},
        "agent-reach/context": {"user_id": "alice"},
    }
    asked = task(
        await call(server.url, "SendMessage", {"message": msg(data=ASK, skill="refund", metadata=first)})
    )
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
    answer = msg("yes", task_id=asked["id"], context_id=asked["contextId"])
    answered = task(await call(server.url, "SendMessage", {"message": answer}))
    assert answered["status"]["state"] == "TASK_STATE_COMPLETED", answered
    assert texts(answered) == ["refund yes for alice"]


async def test_a_principals_thread_is_scoped_once_and_shown_as_named(
    served: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The router scopes the thread (`alice/alice-1`); the task's metadata, which the caller reads,
    keeps the thread as the caller named it, and the answer is not scoped a second time."""
    for name, token in TOKENS.items():
        monkeypatch.setenv(f"REACH_TEST_{name.upper()}", token)
    server = await served(SECURITY)
    router = server.gateway.router
    router.register(LangChainAgent(approval_graph(), agent_id="support:refund:01"))
    named = {"agent-reach/configurable": {"thread_id": "alice-1"}}
    ask = msg(data=ASK, skill="refund", metadata=named)
    asked = task(await call(server.url, "SendMessage", {"message": ask}, "alice"))
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
    assert asked["metadata"]["agent-reach/configurable"] == {"thread_id": "alice-1"}
    answer = msg("yes", task_id=asked["id"], context_id=asked["contextId"])
    answered = task(await call(server.url, "SendMessage", {"message": answer}, "alice"))
    assert texts(answered) == ["refund yes"], answered
    # The owner of the router reaches the thread by its one scoped name: it waits no more.
    after = await router.route("refund", None, configurable={"thread_id": "alice/alice-1"}, resume="again")
    assert "thread 'alice/alice-1' of agent support:refund:01 waits on no interrupt" in (after.error or "")


class Logged(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def noting_then_asking() -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Logged)
    builder.add_node("note", lambda state: {"log": ["noted"]})
    builder.add_node("approve", lambda state: {"log": [f"approved {interrupt('ok?')}"]})
    builder.add_edge(START, "note")
    builder.add_edge("note", "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=InMemorySaver())


async def sent(url: str, message: dict[str, Any]) -> dict[str, Any]:
    return task(await call(url, "SendMessage", {"message": message}))


async def test_an_answer_to_a_replay_goes_to_the_question_the_replay_asked(served: Serve) -> None:
    server = await served()
    graph = noting_then_asking()
    server.gateway.router.register(LangChainAgent(graph, agent_id="desk:approve:01"))
    thread = {"configurable": {"thread_id": "t-1"}}
    first = await sent(
        server.url,
        msg(data={}, skill="approve", metadata={"agent-reach/configurable": thread["configurable"]}),
    )
    done = await sent(server.url, msg("yes", task_id=first["id"], context_id=first["contextId"]))
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    snapshots = [snapshot async for snapshot in graph.aget_state_history(thread)]
    before = dict(next(s for s in snapshots if s.next == ("approve",)).config["configurable"])
    # LangGraph's replay from the checkpoint before the question: it asks again, at a new one.
    asked = await sent(
        server.url, msg(data={}, skill="approve", metadata={"agent-reach/configurable": before})
    )
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
    done = await sent(server.url, msg("again", task_id=asked["id"], context_id=asked["contextId"]))
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    # Answered at the named checkpoint, the old question there would have taken its old answer.
    assert (await graph.aget_state(thread)).values["log"] == ["noted", "approved again"]
