"""The router served as an A2A agent, in process: its card, and messages routed by skill or by
text, answered as tasks by the wire contract (docs/a2a-serve.md)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, StreamResponse, TaskState

from middleware import Fault, MetaInfo, ReachMessage, ResultStatus
from reach_adapters import Capability, FunctionAgent, ReachError, Router
from reach_adapters.a2a import A2AAgent, A2ACardError
from reach_adapters.a2a.hop import unpack
from reach_adapters.langchain import LangChainAgent
from tests.a2a_serve.agents import TEXT_IN, Words, approval_graph, echo_graph, shout, steps_graph
from tests.a2a_serve.conftest import Serve, message, meta_of, request, task_of, text_of
from tests.gateway.agents import localised_graph

pytestmark = pytest.mark.timeout(60)


def adder() -> FunctionAgent:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }
    return FunctionAgent(
        lambda a, b: {"sum": a + b},
        agent_id="math:add:01",
        capabilities=[Capability(name="add", description="add two integers", input_schema=schema)],
    )


def reverser() -> FunctionAgent:
    capability = Capability(
        name="reverse",
        description="reverse the letters of a text",
        keywords=["reverse", "backwards"],
        input_schema=TEXT_IN,
    )
    return FunctionAgent(lambda text: text[::-1], agent_id="util:reverse:01", capabilities=[capability])


async def test_the_card_lists_a_skill_per_capability_and_follows_the_catalog(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(shout())
    card = await server.card()
    assert [skill.id for skill in card.skills] == ["shout"]
    assert card.skills[0].description == "upper-case the text"
    assert {(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces} == {
        ("JSONRPC", "1.0"),
        ("JSONRPC", "0.3"),
    }
    assert card.supported_interfaces[0].url == f"{server.url}/a2a"
    assert card.capabilities.streaming
    assert card.capabilities.push_notifications
    assert not card.security_schemes
    server.gateway.router.register(adder())
    assert sorted(skill.id for skill in (await server.card()).skills) == ["add", "shout"]
    await server.gateway.router.deregister("util:shout:01", drain_timeout=1)
    assert [skill.id for skill in (await server.card()).skills] == ["add"]


async def test_a_skill_is_called_with_text_and_with_json(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(shout())
    server.gateway.router.register(adder())
    async with server.client() as client:
        shouted = await task_of(client, request(message("hello", skill="shout")))
        added = await task_of(client, request(message({"a": 2, "b": 3}, metadata={"capability": "add"})))
    assert shouted.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(shouted) == "HELLO"
    meta = meta_of(shouted)
    assert (meta["agent-reach/status"], meta["agent-reach/agent_id"]) == ("ok", "util:shout:01")
    assert added.status.state == TaskState.TASK_STATE_COMPLETED
    [part] = added.artifacts[0].parts
    assert (part.media_type, dict(part.data.struct_value)) == ("application/json", {"sum": 5.0})


async def test_text_without_a_skill_is_matched_and_the_hop_metadata_continues(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(shout())
    server.gateway.router.register(reverser())
    carried = {"agent-reach/task_id": "upstream-7", "agent-reach/trace_id": "trace-7", "agent-reach/depth": 1}
    async with server.client() as client:
        task = await task_of(client, request(message("reverse backwards: abc", metadata=carried)))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task.status
    assert text_of(task) == "cba :sdrawkcab esrever"
    meta = meta_of(task)
    assert (meta["agent-reach/task_id"], meta["agent-reach/trace_id"]) == ("upstream-7", "trace-7")
    assert meta["agent-reach/agent_id"] == "util:reverse:01"


async def test_text_reaches_a_function_of_a_text_payload_named_or_matched(served: Serve) -> None:
    def whisper(payload: str) -> str:
        return payload.lower()

    capability = Capability(name="whisper", description="lower-case a text", keywords=["whisper"])
    server = await served()
    server.gateway.router.register(
        FunctionAgent(whisper, agent_id="util:whisper:01", capabilities=[capability])
    )
    async with server.client() as client:
        named = await task_of(client, request(message("QUIET Please", skill="whisper")))
        matched = await task_of(client, request(message("WHISPER this")))
        data = await task_of(client, request(message({"text": 3}, skill="whisper")))
    assert named.status.state == TaskState.TASK_STATE_COMPLETED, named.status
    assert text_of(named) == "quiet please"
    assert matched.status.state == TaskState.TASK_STATE_COMPLETED, matched.status
    assert text_of(matched) == "whisper this"
    # Only a text is unboxed: anything else is still the caller's mistake.
    assert data.status.state == TaskState.TASK_STATE_REJECTED
    assert (meta_of(data)["agent-reach/status"], meta_of(data)["agent-reach/fault"]) == ("invalid", "caller")


async def test_the_packed_hop_metadata_continues_and_a_malformed_one_is_refused(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(shout())
    deep = {
        "agent-reach/task_id": "upstream-9",
        "agent-reach": json.dumps({"depth": 9, "lineage": ["a:b:c"]}),
    }
    garbled = {"agent-reach": "{not json"}
    async with server.client() as client:
        looped = await task_of(client, request(message("hi", skill="shout", metadata=deep)))
        broken = await task_of(client, request(message("hi", skill="shout", metadata=garbled)))
    # The depth came from the packed key: past max_depth, the reach is refused as a loop.
    assert looped.status.state == TaskState.TASK_STATE_REJECTED
    assert meta_of(looped)["agent-reach/task_id"] == "upstream-9"
    assert "depth 9 exceeds max_depth" in looped.status.message.parts[0].text
    assert broken.status.state == TaskState.TASK_STATE_REJECTED
    assert "'agent-reach' must be a JSON object" in broken.status.message.parts[0].text


async def test_hop_metadata_over_the_routers_size_limits_is_refused_as_the_callers(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(shout())
    long = {"agent-reach": json.dumps({"lineage": [f"x:y:{n}" for n in range(300)]})}
    async with server.client() as client:
        refused = await task_of(client, request(message("hi", skill="shout", metadata=long)))
    assert refused.status.state == TaskState.TASK_STATE_REJECTED
    assert (meta_of(refused)["agent-reach/status"], meta_of(refused)["agent-reach/fault"]) == (
        "invalid",
        "caller",
    )
    assert "lineage" in refused.status.message.parts[0].text


async def test_a_unary_mark_that_is_no_boolean_or_misspelt_is_refused(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(shout())
    said = {"agent-reach": json.dumps({"unary": "true"})}
    misspelt = {"agent-reach/unray": True}
    async with server.client() as client:
        string = await task_of(client, request(message("hi", skill="shout", metadata=said)))
        typo = await task_of(client, request(message("hi", skill="shout", metadata=misspelt)))
    assert string.status.state == TaskState.TASK_STATE_REJECTED
    assert "'agent-reach/unary' must be true or false" in string.status.message.parts[0].text
    assert typo.status.state == TaskState.TASK_STATE_REJECTED
    assert "did you mean 'agent-reach/unary'" in typo.status.message.parts[0].text


async def test_a_reach_client_continues_its_task_on_a_reach_server(served: Serve) -> None:
    """The router's own A2A client packs the whole hop into one metadata value; the served
    router reads it back: the same task and trace, one level deeper, the hop in the lineage."""
    server = await served()
    seen: list[MetaInfo] = []

    def record(message: ReachMessage) -> str:
        seen.append(message.meta_info)
        return "recorded"

    server.gateway.router.register(
        FunctionAgent(record, agent_id="test:record:01", capabilities=[Capability(name="record")])
    )
    async with Router() as near:
        agent = await A2AAgent.connect(server.url)
        near.register(agent)
        result = await near.route("record", {"text": "x"}, task_id="t-over-a2a", trace_id="trace-over-a2a")
    assert result.ok, result.error
    [meta] = seen
    assert (meta.task_id, meta.trace_id, meta.depth) == ("t-over-a2a", "trace-over-a2a", 1)
    assert meta.lineage == [agent.agent_id]
    assert meta.deadline is not None


async def test_a_reach_client_streams_a_graph_on_a_reach_server_in_the_modes_it_asks(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(LangChainAgent(steps_graph(), agent_id="calc:steps:01"))
    async with Router() as near, asyncio.timeout(30):
        near.register(await A2AAgent.connect(server.url))
        here = [c async for c in server.gateway.router.stream("steps", {"n": 1}, stream_mode="values")]
        over = [c async for c in near.stream("steps", {"n": 1}, stream_mode="values")]
        modes = ["updates", "values"]
        both = [c async for c in near.stream("steps", {"n": 1}, stream_mode=modes)]
        both_here = [c async for c in server.gateway.router.stream("steps", {"n": 1}, stream_mode=modes)]
        nested = [c async for c in near.stream("steps", {"n": 1}, stream_mode="values", subgraphs=True)]
    assert here == [{"n": 1}, {"n": 2}, {"n": 4}]
    assert over == here
    assert both == both_here
    assert ["updates", {"double": {"n": 4}}] in both
    assert nested == [[[], chunk] for chunk in here]


async def test_a_reach_client_gives_a_graph_on_a_reach_server_its_runs_context(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(LangChainAgent(localised_graph(), agent_id="chat:say:01"))
    said = {"messages": [{"role": "user", "content": "hi"}]}
    async with Router() as near, asyncio.timeout(30):
        near.register(await A2AAgent.connect(server.url))
        over = await near.route("say", said, context={"lang": "fr"})
        german = {"lang": "de"}
        chunks = near.stream("say", said, context=german, stream_mode="values")
        streamed: list[Any] = [c async for c in chunks]
        missing = await near.route("say", said)
    assert over.payload == "fr: hi", over.error
    assert streamed[-1]["messages"][-1]["content"] == "de: hi"
    assert (missing.status, missing.fault) == (ResultStatus.INVALID, Fault.CALLER), missing.error


async def test_a_reach_clients_call_of_a_streaming_agent_answers_as_in_process(served: Serve) -> None:
    """The router's A2A client streams every call to a card that offers streaming; a call it
    wants one answer of is routed as a call over there: the graph's output, not its chunks."""
    server = await served()
    server.gateway.router.register(LangChainAgent(steps_graph(), agent_id="calc:steps:01"))
    async with Router() as near, asyncio.timeout(30):
        near.register(await A2AAgent.connect(server.url))
        here = await server.gateway.router.route("steps", {"n": 1})
        over = await near.route("steps", {"n": 1})
        chunks = [c async for c in near.stream("steps", {"n": 1})]
    assert (here.payload, over.payload) == ({"n": 4}, {"n": 4}), over.error
    assert chunks == [{"add": {"n": 2}}, {"double": {"n": 4}}]


async def test_a_reach_servers_word_on_a_refused_payload_survives_the_hop(served: Serve) -> None:
    """Over there the payload broke the skill's schema, which the card does not carry: the
    caller's mistake, said in the stream's final status; not the A2A agent's rejection, nor a
    refusal of this router's that another declaration (or a fallback) would get past."""
    server = await served()
    server.gateway.router.register(adder())
    bad = {"a": "x", "b": 2}
    async with Router() as near, asyncio.timeout(30):
        agent = await A2AAgent.connect(server.url)
        near.register(agent)
        near.register(reverser())
        sent = await near.send(agent.agent_id, bad, capability="add")
        routed = await near.route("add", bad, fallback=["util:reverse:01"])
        with pytest.raises(ReachError) as streamed:
            _ = [c async for c in near.stream("add", bad)]
        broadcast = await near.broadcast("add", bad)
        [info] = [each for each in near.catalog() if each.agent_id == agent.agent_id]
        # A replica of the agent that refused would refuse too: one round trip, not one each.
        near.register(await A2AAgent.connect(server.url, options={"instance": "2"}))
        replicated = await near.route("add", bad)
        attempts = near.explain(replicated.task_id).attempts
    for result in (sent, routed, streamed.value.result, broadcast, replicated):
        assert result is not None
        assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER), result.error
        assert result.error_type == "PayloadValidationError"
        assert "is not of type" in (result.error or "")
    assert info.failures == 0
    assert len(attempts) == 1


async def test_a_payload_a_reach_server_refused_goes_to_a_declaration_that_takes_it(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(adder())
    loose = {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"]}
    here = Capability(name="add", input_schema=loose, weight=1)
    async with Router() as near, asyncio.timeout(30):
        near.register(await A2AAgent.connect(server.url, options={"weight": 100}))
        near.register(FunctionAgent(lambda a, b: f"{a}{b}", agent_id="loc:add:01", capabilities=[here]))
        result = await near.route("add", {"a": "x", "b": 2})
        attempts = [attempt.agent_id for attempt in near.explain(result.task_id).attempts]
    assert (result.status, result.payload, result.agent_id) == (ResultStatus.OK, "x2", "loc:add:01")
    assert len(attempts) == 2


async def test_a_reach_client_reads_a_secured_servers_skills_from_its_extended_card(
    served: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secured router lists only the matching skill in public; a client with credentials takes
    the caller's skills from the extended card, and calls them."""
    monkeypatch.setenv("REACH_TEST_ALICE", "alice-token-0123456789")
    server = await served("principals:\n  alice: {token_env: REACH_TEST_ALICE, allow: [shout]}\n")
    server.gateway.router.register(shout())
    server.gateway.router.register(adder())
    headers = {"Authorization": "Bearer alice-token-0123456789"}
    async with Router() as near:
        agent = await A2AAgent.connect(server.url, headers=headers)
        assert [cap.name for cap in agent.capabilities] == ["shout"]
        near.register(agent)
        result = await near.route("shout", {"text": "hi"})
    assert result.payload == "HI", result.error


async def test_refused_credentials_leave_the_public_card_and_say_so(
    served: Serve, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("REACH_TEST_ALICE", "alice-token-0123456789")
    server = await served("principals:\n  alice: {token_env: REACH_TEST_ALICE, allow: [shout]}\n")
    server.gateway.router.register(shout())
    # The public card offers only the matching skill, which no capability can be named after.
    with pytest.raises(A2ACardError, match="agent-reach:match"):
        await A2AAgent.connect(server.url, headers={"Authorization": "Bearer wrong-token-0123456789"})
    assert "extended agent card" in caplog.text
    assert "refused (HTTP 401)" in caplog.text


def test_a_hop_token_counts_only_as_a_key_of_its_own() -> None:
    # The handler takes the flat key out before the task stores the message; a token inside the
    # packed string would stay in the task's history, so it is not read from there.
    metadata = {"agent-reach": json.dumps({"task_id": "t-9", "caller_token": "secret"})}
    unpack(metadata)
    assert metadata == {"agent-reach/task_id": "t-9"}


async def test_an_invalid_payload_is_rejected_with_the_reason(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(adder())
    async with server.client() as client:
        wrong = await task_of(client, request(message({"a": "two", "b": 3}, skill="add")))
        untexted = await task_of(client, request(message({"a": 1, "b": 3})))
        unnamed = await task_of(client, request(message("hi", metadata={"skill": 7})))
    assert wrong.status.state == TaskState.TASK_STATE_REJECTED
    meta = meta_of(wrong)
    assert (meta["agent-reach/status"], meta["agent-reach/fault"]) == ("invalid", "caller")
    assert meta["agent-reach/delivered"] is False
    assert 'field \'a\': "two" is not of type "integer"' in wrong.status.message.parts[0].text
    assert untexted.status.state == TaskState.TASK_STATE_REJECTED
    assert "names no skill and carries no text" in untexted.status.message.parts[0].text
    assert "must name a skill id" in unnamed.status.message.parts[0].text
    assert not wrong.artifacts


async def test_an_unknown_skill_is_rejected_not_answered(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(adder())
    async with server.client() as client:
        task = await task_of(client, request(message("hi", skill="nowhere")))
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert meta_of(task)["agent-reach/status"] == "no_candidate"


async def test_a_stream_sends_each_chunk_as_it_comes(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(Words())
    events: list[StreamResponse] = []
    async with server.client(streaming=True) as client:
        async with asyncio.timeout(20):
            async for event in client.send_message(request(message("one two three", skill="words"))):
                events.append(event)
    chunks = [
        part.text
        for event in events
        if event.HasField("artifact_update")
        for part in event.artifact_update.artifact.parts
    ]
    assert chunks == ["one", "two", "three"]
    # The spec wants at least one part in every artifact update.
    assert all(event.artifact_update.artifact.parts for event in events if event.HasField("artifact_update"))
    last = events[-1]
    assert last.HasField("status_update")
    assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    async with server.client() as client:
        stored = await client.get_task(GetTaskRequest(id=last.status_update.task_id))
    assert [part.text for part in stored.artifacts[0].parts] == ["one", "two", "three"]
    assert meta_of(stored)["agent-reach/agent_id"] == "util:words:01"


async def test_text_reaches_a_messages_graph_as_a_user_message(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(LangChainAgent(echo_graph(), agent_id="chat:echo:01"))
    async with server.client() as client:
        echoed = await task_of(client, request(message("hello there", skill="echo")))
    assert echoed.status.state == TaskState.TASK_STATE_COMPLETED, echoed.status
    assert text_of(echoed) == "echo: hello there"


async def test_a_retried_stream_is_answered_from_its_first_delivery(served: Serve) -> None:
    """A reach client's retry of a streamed message (same packed task id, a new message id) gets
    the first stream's chunks; the agent streams once."""
    server = await served()
    opened: list[str] = []

    class Counted(Words):
        async def astream(self, message: ReachMessage) -> AsyncIterator[Any]:
            opened.append(message.meta_info.task_id)
            async for word in super().astream(message):
                yield word

    server.gateway.router.register(Counted())
    hop = {"agent-reach": json.dumps({"task_id": "t-retried"})}
    answers = []
    async with server.client(streaming=True) as client, asyncio.timeout(20):
        for _ in range(2):
            events = [
                e async for e in client.send_message(request(message("a b", skill="words", metadata=hop)))
            ]
            answers.append(
                [
                    p.text
                    for e in events
                    if e.HasField("artifact_update")
                    for p in e.artifact_update.artifact.parts
                ]
            )
            assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert answers == [["a", "b"], ["a", "b"]]
    assert opened == ["t-retried"]
    # A message without a task id of its caller's has nothing to repeat: its chunks are not kept.
    kept = server.gateway.router._dispatcher.dedupe
    assert len(kept) == 1
    async with server.client(streaming=True) as client, asyncio.timeout(20):
        [e async for e in client.send_message(request(message("a b", skill="words")))]
    assert len(opened) == 2
    assert len(kept) == 1


async def test_input_required_then_resumed_on_the_same_task(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(LangChainAgent(approval_graph(), agent_id="support:refund:01"))
    ask = {"messages": [{"role": "user", "content": "refund order 42"}]}
    async with server.client() as client:
        asked = await task_of(client, request(message(ask, skill="refund")))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, asked.status
        [part] = asked.status.message.parts
        assert dict(part.data.struct_value) == {"question": "approve the refund of order 42?"}
        answer = message("yes", task_id=asked.id, context_id=asked.context_id)
        done = await task_of(client, request(answer))
    assert done.id == asked.id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, done.status
    assert "refund yes" in str(done.artifacts[0].parts)


async def test_a_raw_json_rpc_0_3_call(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(shout())
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": "m-1",
                "role": "user",
                "parts": [{"kind": "text", "text": "hello"}],
                "metadata": {"skill": "shout"},
            }
        },
    }
    async with httpx.AsyncClient(timeout=30) as http:
        answer = (await http.post(f"{server.url}/a2a", json=body)).json()
    result = answer["result"]
    assert (result["kind"], result["status"]["state"]) == ("task", "completed"), answer
    assert result["artifacts"][0]["parts"] == [{"kind": "text", "text": "HELLO"}]
    assert result["metadata"]["agent-reach/status"] == "ok"
