"""Agent ids, capability declarations and policies: bad ones fail loudly, naming the field."""

from __future__ import annotations

import dataclasses
import enum
import json
import types

import pytest
from pydantic import BaseModel, Field

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from reach_adapters import (
    AgentHandle,
    AgentId,
    BreakerSettings,
    BreakerState,
    Capability,
    FunctionAgent,
    InvalidDeclarationError,
    InvalidPolicyError,
    Router,
    RoutingPolicy,
    Trigger,
    parse_agent_id,
)
from reach_adapters.router import ok_result
from tests.core.conftest import Down, agent_info


def test_agent_id_parts() -> None:
    ident = parse_agent_id("legal:contract-review:01")
    assert ident == AgentId("legal", "contract-review", "01")
    assert ident.kind == "legal:contract-review"
    assert str(ident) == "legal:contract-review:01"


@pytest.mark.parametrize("bad", ["legal:review", "a:b:c:d", ":b:c", "a b:c:d", "", "a:b:"])
def test_bad_agent_ids_are_rejected_with_an_example(bad: str) -> None:
    with pytest.raises(InvalidDeclarationError, match="namespace:type:instance"):
        parse_agent_id(bad)


def test_agent_id_must_be_a_string() -> None:
    with pytest.raises(InvalidDeclarationError, match="got int"):
        parse_agent_id(7)


def test_invalid_input_schema_names_capability_and_field() -> None:
    with pytest.raises(
        InvalidDeclarationError, match=r"capability 'polish'.*'input_schema'.*not a valid JSON Schema"
    ):
        Capability(name="polish", input_schema={"type": "objekt"})


def test_wrong_field_type_names_the_field() -> None:
    with pytest.raises(InvalidDeclarationError, match=r"capability 'polish': field 'timeout_ms'"):
        Capability(name="polish", timeout_ms=-5)
    with pytest.raises(InvalidDeclarationError, match=r"field 'max_concurrency'"):
        Capability(name="polish", max_concurrency=0)
    with pytest.raises(InvalidDeclarationError, match=r"field 'name'"):
        Capability(name="has space")


def test_agent_declaration_error_names_the_agent() -> None:
    async def fn(payload: object) -> object:
        return payload

    with pytest.raises(InvalidDeclarationError, match=r"agent w:polish:01: capability 'p'.*output_schema"):
        FunctionAgent(fn, agent_id="w:polish:01", capabilities=[{"name": "p", "output_schema": {"type": 5}}])
    with pytest.raises(InvalidDeclarationError, match="declared twice"):
        FunctionAgent(fn, agent_id="w:polish:01", capabilities=[Capability(name="p"), Capability(name="p")])
    with pytest.raises(InvalidDeclarationError, match="declares no capabilities"):
        FunctionAgent(fn, agent_id="w:polish:01", capabilities=[])
    with pytest.raises(InvalidDeclarationError, match="needs a callable"):
        FunctionAgent("not callable", agent_id="w:polish:01")  # type: ignore[arg-type]


def test_capability_derived_from_signature() -> None:
    async def text_polish(content: str, style: str = "formal") -> str:
        """Polish Chinese text in a formal or casual style."""
        return content

    agent = FunctionAgent(text_polish, agent_id="writer:polish:01")
    (cap,) = agent.capabilities
    assert cap.name == "text_polish"
    assert cap.description.startswith("Polish Chinese text")
    assert cap.input_schema["required"] == ["content"]
    assert cap.input_schema["properties"]["content"] == {"type": "string"}
    assert cap.checks_input


def test_validators_are_compiled_once_per_schema() -> None:
    a = Capability(name="a", input_schema={"type": "object", "required": ["x"]})
    b = Capability(name="b", input_schema={"required": ["x"], "type": "object"})
    assert a.input_validator is b.input_validator
    assert not Capability(name="c").checks_input


@pytest.mark.parametrize(
    ("trigger", "attributes", "expected"),
    [
        (Trigger(field="user_intent", op="eq", value="refund"), {"user_intent": "refund"}, True),
        (Trigger(field="order_amount", op="gt", value=100), {"order_amount": 150}, True),
        (Trigger(field="order_amount", op="gt", value=100), {"order_amount": 50}, False),
        (Trigger(field="order_amount", op="gt", value=100), {"order_amount": "lots"}, False),
        (Trigger(field="lang", op="in", value=["zh", "en"]), {"lang": "zh"}, True),
        (Trigger(field="tags", op="contains", value="vip"), {"tags": ["vip"]}, True),
        (Trigger(field="region", op="exists"), {}, False),
        (Trigger(field="region", op="exists", value=False), {}, True),
    ],
)
def test_triggers(trigger: Trigger, attributes: dict[str, object], expected: bool) -> None:
    assert trigger.test(attributes) is expected


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_retries": 4}, "max_retries"),
        ({"max_retries": -1}, "max_retries"),
        ({"weights": {"weight": "0.4"}}, "weights.weight"),
        ({"weights": {"load": -0.2}}, "weights.load"),
        ({"backoff_ms": -1.0}, "backoff_ms"),
        ({"probe_timeout_s": 0.0}, "probe_timeout_s"),
        ({"breaker": {"quarantine_s": -30.0}}, "breaker.quarantine_s"),
        ({"strategy": "fastest"}, "strategy"),
        ({"unknown_knob": 1}, "unknown_knob"),
    ],
)
def test_invalid_policy_values_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidPolicyError, match=f"field '{field}'"):
        RoutingPolicy(**kwargs)  # type: ignore[arg-type]


def test_policy_defaults_follow_the_design() -> None:
    policy = RoutingPolicy()
    assert (policy.weights.weight, policy.weights.health, policy.weights.load, policy.weights.affinity) == (
        0.4,
        0.3,
        0.2,
        0.1,
    )
    assert policy.max_retries == 2
    assert policy.backoff_ms == 200
    assert policy.max_depth == 5
    assert policy.breaker == BreakerSettings()
    assert policy.breaker.quarantine_s == 30
    assert policy.breaker.error_rate == 0.3
    assert policy.dedupe_window_s == 300


def test_message_style_function_agent() -> None:
    async def handler(message: ReachMessage) -> object:
        return message.meta_info.capability

    agent = FunctionAgent(handler, agent_id="a:b:c", capabilities=[Capability(name="x")])
    assert agent.capabilities[0].name == "x"


def _lookup_by_id(order_id: str) -> str:
    return f"order {order_id}"


def _lookup_by_number(number: int) -> str:
    return f"invoice {number}"


async def test_namesakes_with_other_schemas_are_kept_apart(caplog: pytest.LogCaptureFixture) -> None:
    router = Router()
    orders = FunctionAgent(
        _lookup_by_id, agent_id="shop:orders:0", capabilities=[_named("lookup", "order_id", "string")]
    )
    invoices = FunctionAgent(
        _lookup_by_number, agent_id="shop:invoices:0", capabilities=[_named("lookup", "number", "integer")]
    )
    twin = FunctionAgent(
        _lookup_by_number, agent_id="shop:invoices:1", capabilities=[_named("lookup", "number", "integer")]
    )
    router.register(orders)
    router.register(invoices)
    router.register(twin)
    # The first keeps the name; the namesake gets one that is the same on every start, and its
    # replica joins it there.
    assert sorted(router.reachable()) == ["lookup", "lookup_invoices"]
    assert "serves it as 'lookup_invoices'" in caplog.text
    assert (await router.route("lookup", {"order_id": "7"})).payload == "order 7"
    served = {info.agent_id: [cap.name for cap in info.capabilities] for info in router.catalog()}
    assert served == {
        "shop:orders:0": ["lookup"],
        "shop:invoices:0": ["lookup_invoices"],
        "shop:invoices:1": ["lookup_invoices"],
    }
    assert (await router.route("lookup_invoices", {"number": 7})).payload == "invoice 7"
    # A payload for one is never sent to the other.
    assert (await router.route("lookup", {"number": 7})).status == "invalid"
    # The renamed agents keep their name when the first leaves and comes back.
    await router.deregister("shop:orders:0")
    router.register(orders)
    assert (await router.route("lookup", {"order_id": "8"})).agent_id == "shop:orders:0"
    assert sorted(router.reachable()) == ["lookup", "lookup_invoices"]
    # An explicit version is the intended way to keep namesakes apart: no renaming then.
    versioned = FunctionAgent(
        _lookup_by_number,
        agent_id="shop:ledger:0",
        capabilities=[Capability(**{**_named("lookup", "number", "integer").model_dump(), "version": "2"})],
    )
    router.register(versioned)
    assert (await router.route("lookup", {"number": 1}, version="2")).agent_id == "shop:ledger:0"
    await router.aclose()


def _declaring(*tools: tuple[str, str, str]) -> Router:
    """A router of agents (id, capability, its one string field) registered in that order."""
    router = Router()
    for agent_id, name, field in tools:
        tool = _named(name, field, "string")
        router.register(FunctionAgent(lambda **_: None, agent_id=agent_id, capabilities=[tool]))
    return router


def _named(name: str, field: str, kind: str) -> Capability:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return Capability(name=name, input_schema=schema)


async def test_a_made_up_name_never_merges_with_another_agents_own_tool_of_that_name() -> None:
    """`search` renamed `search_code` (its agent's type) is not the `search_code` another agent
    declares itself, however alike their schemas: that one is renamed in turn, as the made-up
    name came first."""
    router = _declaring(
        ("dev:docs:0", "search", "query"),
        ("dev:code:0", "search", "limit"),
        ("dev:github:0", "search_code", "limit"),
    )
    served = {info.agent_id: [cap.name for cap in info.capabilities] for info in router.catalog()}
    assert served == {
        "dev:docs:0": ["search"],
        "dev:code:0": ["search_code"],
        "dev:github:0": ["search_code_github"],
    }
    assert (await router.route("search_code_github", {"limit": "1"})).agent_id == "dev:github:0"
    assert (await router.route("search_code", {"limit": "1"})).agent_id == "dev:code:0"
    await router.aclose()


async def test_a_made_up_name_never_takes_the_name_its_own_agent_declares() -> None:
    """`code` serves `search` (a namesake of `docs`') and its own `search_code`: the made-up name
    steps aside for the agent's own tool, which a client of that server knows by that name, and
    is the same for every replica of `code`, so that they stand in for each other."""
    router = Router()
    router.register(
        FunctionAgent(
            lambda **_: None, agent_id="dev:docs:0", capabilities=[_named("search", "query", "string")]
        )
    )
    tools = [_named("search", "limit", "string"), _named("search_code", "x", "string")]
    for instance in ("0", "1"):
        router.register(
            FunctionAgent(lambda **_: "code", agent_id=f"dev:code:{instance}", capabilities=tools)
        )
    served = {info.agent_id: [cap.name for cap in info.capabilities] for info in router.catalog()}
    assert served == {
        "dev:docs:0": ["search"],
        "dev:code:0": ["search_code_2", "search_code"],
        "dev:code:1": ["search_code_2", "search_code"],
    }
    assert router.declarations()["search_code"].input_schema["required"] == ["x"]
    await router.aclose()


class _Growing(FunctionAgent):
    def attach(self, handle: AgentHandle) -> None:
        self.handle = handle


async def test_a_name_clients_know_keeps_its_tool_when_the_agent_declares_that_name_later() -> None:
    """An update of an agent's capabilities (an MCP server's tools/list_changed) never points a
    served name at another tool: a payload for the one might fit the other."""
    router = Router()
    router.register(
        FunctionAgent(
            lambda **_: None, agent_id="dev:docs:0", capabilities=[_named("search", "query", "string")]
        )
    )
    code = _Growing(
        lambda **_: "code", agent_id="dev:code:0", capabilities=[_named("search", "limit", "string")]
    )
    router.register(code)
    assert [cap.name for cap in router.catalog()[1].capabilities] == ["search_code"]
    code.handle.set_capabilities([_named("search_code", "x", "string"), _named("search", "limit", "string")])
    assert [cap.name for cap in router.catalog()[1].capabilities] == ["search_code_code", "search_code"]
    assert router.declarations()["search_code"].input_schema["required"] == ["limit"]
    await router.aclose()


async def test_a_namesake_whose_made_up_names_are_all_taken_is_still_kept_apart() -> None:
    router = _declaring(
        ("dev:docs:0", "search", "query"),
        ("dev:github:0", "search_code", "y"),
        ("dev:gitlab:0", "search_code_0", "z"),
        ("dev:code:0", "search", "limit"),
    )
    served = {info.agent_id: [cap.name for cap in info.capabilities] for info in router.catalog()}
    assert served["dev:code:0"] == ["search_code_0_2"]
    assert (await router.route("search", {"limit": "1"})).status == ResultStatus.INVALID
    await router.aclose()


async def test_a_made_up_name_gives_way_to_the_own_name_once_the_namesake_left() -> None:
    """Then a replica that joins later serves the capability under the same name."""
    router = Router()
    docs = FunctionAgent(
        lambda **_: None, agent_id="dev:docs:0", capabilities=[_named("search", "query", "string")]
    )
    router.register(docs)
    tools = [_named("search", "limit", "string")]
    code = _Growing(lambda **_: "code", agent_id="dev:code:0", capabilities=tools)
    router.register(code)
    await router.deregister("dev:docs:0")
    code.handle.set_capabilities(tools)
    router.register(FunctionAgent(lambda **_: "code", agent_id="dev:code:1", capabilities=tools))
    served = {info.agent_id: [cap.name for cap in info.capabilities] for info in router.catalog()}
    assert served == {"dev:code:0": ["search"], "dev:code:1": ["search"]}
    await router.aclose()


async def test_namesakes_in_other_namespaces_keep_their_names() -> None:
    router = Router()
    router.register(
        FunctionAgent(
            _lookup_by_id, agent_id="shop:lookup:0", capabilities=[_named("lookup", "order_id", "string")]
        )
    )
    billing = _named("lookup", "number", "integer")
    router.register(FunctionAgent(_lookup_by_number, agent_id="billing:lookup:0", capabilities=[billing]))
    # Namespaces already keep them apart: nothing is renamed.
    assert (await router.route("lookup", {"number": 2}, namespace="billing")).payload == "invoice 2"
    await router.aclose()


async def test_a_renamed_agent_is_still_reached_by_its_own_name() -> None:
    router = Router()
    router.register(
        FunctionAgent(
            _lookup_by_id, agent_id="shop:orders:0", capabilities=[_named("lookup", "order_id", "string")]
        )
    )
    router.register(
        FunctionAgent(
            _lookup_by_number,
            agent_id="shop:invoices:0",
            capabilities=[_named("lookup", "number", "integer")],
        )
    )
    sent = await router.send("shop:invoices:0", {"number": 5}, capability="lookup")
    assert sent.payload == "invoice 5"
    await router.aclose()


async def test_replicas_whose_schemas_differ_only_in_wording_stay_replicas() -> None:
    router = Router()
    for instance, words in (("a", "What to look for."), ("b", "The text to search for.")):
        schema = {"type": "object", "properties": {"order_id": {"type": "string", "description": words}}}
        capability = Capability(name="lookup", input_schema=schema)
        router.register(
            FunctionAgent(_lookup_by_id, agent_id=f"shop:orders:{instance}", capabilities=[capability])
        )
    assert sorted(router.reachable()) == ["lookup"]
    assert {info.agent_id: [cap.name for cap in info.capabilities] for info in router.catalog()} == {
        "shop:orders:a": ["lookup"],
        "shop:orders:b": ["lookup"],
    }
    await router.aclose()


class Item(BaseModel):
    sku: str


class Order(BaseModel):
    order_id: str
    item: Item


@dataclasses.dataclass
class Parcel:
    weight_kg: float


async def ship(order: Order, parcels: list[Parcel], note: str = "") -> str:
    """Ship an order."""
    return f"shipped {order.item.sku} in {len(parcels)} parcel(s) of {parcels[0].weight_kg} kg{note}"


async def test_a_function_over_models_that_hold_models_is_declared_and_given_its_models() -> None:
    """Each parameter's model definitions move to the schema's root, where its references point
    (a model holding a model could not be registered), and the function gets its models made of
    the payload, as its annotations say, not the dicts JSON carries."""
    agent = FunctionAgent(ship, agent_id="shop:ship:01")
    (capability,) = agent.capabilities
    assert capability.input_schema is not None
    assert set(capability.input_schema["$defs"]) == {"Item", "Parcel"}
    async with Router() as router:
        router.register(agent)
        order = {"order_id": "1", "item": {"sku": "kettle"}}
        shipped = await router.route("ship", {"order": order, "parcels": [{"weight_kg": 2}]})
        assert (shipped.status, shipped.payload) == (
            ResultStatus.OK,
            "shipped kettle in 1 parcel(s) of 2.0 kg",
        )
        refused = await router.route("ship", {"order": {"order_id": "1", "item": {}}, "parcels": []})
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error


async def shout(payload: str) -> str:
    """Shout a text."""
    return payload.upper()


async def pack(payload: Parcel) -> float:
    return payload.weight_kg


async def echo(payload: object) -> object:
    return payload


async def test_a_payload_function_declares_its_annotation_and_is_given_its_type() -> None:
    """A function of ``payload`` takes what its annotation says: the derived capability declares
    it, so anything else is the caller's mistake, not an `AttributeError` of the agent's, and a
    dataclass or model is made of the payload."""
    agents = [FunctionAgent(fn, agent_id=f"t:{fn.__name__}:01") for fn in (shout, pack, echo)]
    assert [a.capabilities[0].input_schema for a in agents[:2]] == [
        {"type": "string"},
        {
            "type": "object",
            "title": "Parcel",
            "properties": {"weight_kg": {"title": "Weight Kg", "type": "number"}},
            "required": ["weight_kg"],
        },
    ]
    async with Router() as router:
        for agent in agents:
            router.register(agent)
        assert (await router.route("shout", "hi")).payload == "HI"
        refused = await router.route("shout", {"words": "hi"})
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
        # A text task's object (an A2A message of text parts) is its text.
        assert (await router.route("shout", {"text": "hi"})).payload == "HI"
        assert (await router.route("pack", {"weight_kg": 2})).payload == 2.0
        refused = await router.route("pack", {"weight_kg": "heavy"})
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
        # `object` (or no annotation, or Any) takes any payload, as before.
        for payload in ("hi", 3, [1], {"a": 1}):
            assert (await router.route("echo", payload)).payload == payload


async def test_a_capability_given_no_input_schema_still_gets_the_payload_annotation() -> None:
    """``Capability("shout")`` over ``shout(payload: str)``: the declaration stays as given (a
    replica declaring the same stays one), but a dict is refused as the caller's mistake, never
    given to the function to fail on (and quarantine it), and a text task's text reaches it."""
    agent = FunctionAgent(
        shout, agent_id="t:shout:01", capabilities=[Capability(name="shout"), {"name": "yell"}]
    )
    assert [cap.input_schema for cap in agent.capabilities] == [{"type": "object"}] * 2
    async with Router() as router:
        router.register(agent)
        for _ in range(3):
            refused = await router.route("shout", {"words": "hi"})
            assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
            assert "not what the function takes" in (refused.error or "")
        info = agent_info(router, "t:shout:01")
        assert (info.breaker, info.calls, info.failures) == (BreakerState.CLOSED, 0, 0)
        assert (await router.route("yell", "hi")).payload == "HI"
        assert (await router.route("yell", {"text": "hi"})).payload == "HI"


async def greet(payload: str | None = None) -> str:
    return f"hello {payload or 'world'}"


async def test_a_payload_function_checks_its_annotation_whatever_name_reaches_it() -> None:
    """A fallback to it carries the caller's capability name, not one of its own: the function
    still refuses what its annotation does not take, and no payload under a capability declared
    without a schema (the router's ``{}``) is None for ``payload: str | None = None``."""
    async with Router() as router:
        router.register(FunctionAgent(shout, agent_id="t:shout:01", capabilities=[Capability(name="shout")]))
        router.register(FunctionAgent(greet, agent_id="t:greet:01", capabilities=[Capability(name="greet")]))
        for _ in range(3):
            refused = await router.route("translate", {"words": "hi"}, fallback=["t:shout:01"])
            assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
        assert (await router.route("translate", {"text": "hi"}, fallback=["t:shout:01"])).payload == "HI"
        assert (await router.send("t:greet:01")).payload == "hello world"
        assert agent_info(router, "t:shout:01").failures == 0


async def test_a_lower_match_reaches_the_function_under_its_own_capability() -> None:
    """The top match declares a schema that refuses the payload; the next one, declared without
    a schema, serves it. The function is told that capability, not the top match's, so it checks
    its annotation itself instead of trusting a check the router never made."""
    counted = Capability(
        name="count_parcels", keywords=["parcel", "late", "lost"], input_schema={"type": "integer"}
    )
    spoken = Capability(name="say_parcel", keywords=["parcel"])
    policy = RoutingPolicy(match_direct=0.9, match_confirm=0.7)
    async with Router(policy) as router:
        router.register(FunctionAgent(shout, agent_id="t:shout:01", capabilities=[counted, spoken]))
        for _ in range(3):
            refused = await router.route(None, {"parcel": 1}, text="my parcel is late")
            assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
        info = agent_info(router, "t:shout:01")
        assert (info.breaker, info.failures) == (BreakerState.CLOSED, 0)
        said = await router.route(None, "my parcel is late")
        assert (said.capability, said.payload) == ("say_parcel", "MY PARCEL IS LATE"), said.error


async def test_a_failed_lower_match_leaves_the_fallback_the_capability_asked_for() -> None:
    async def down(message: ReachMessage) -> None:
        msg = "down"
        raise Down(msg)

    async def where(message: ReachMessage) -> str | None:
        return message.meta_info.capability

    counted = Capability(name="count_parcels", keywords=["parcel", "late", "lost"])
    spoken = Capability(name="say_parcel", keywords=["parcel"])
    policy = RoutingPolicy(
        match_direct=0.9, match_confirm=0.7, default_agent="t:where:01", backoff_ms=0.0, max_retries=1
    )
    async with Router(policy) as router:
        router.register(FunctionAgent(down, agent_id="t:count:01", capabilities=[counted]))
        router.register(FunctionAgent(down, agent_id="t:say:01", capabilities=[spoken]))
        router.register(FunctionAgent(where, agent_id="t:where:01", capabilities=[Capability(name="where")]))
        result = await router.route(None, text="my parcel is late")
        record = router.explain(result.task_id)
    assert [attempt.agent_id for attempt in record.attempts] == ["t:count:01", "t:say:01", "t:where:01"]
    assert (result.served_by, result.payload) == ("default", "count_parcels"), result.error
    assert result.capability == record.capability == "count_parcels"


async def test_no_payload_made_an_object_is_the_slots_own_reading() -> None:
    """No payload is ``{}`` for a capability that takes an object, for that delivery only: the
    fallback, whose schema takes text or null, still gets none."""

    async def down(payload: object) -> object:
        msg = "down"
        raise Down(msg)

    maybe_text = Capability(name="hello", input_schema={"anyOf": [{"type": "string"}, {"type": "null"}]})
    async with Router(RoutingPolicy(max_retries=0)) as router:
        router.register(FunctionAgent(down, agent_id="t:down:01", capabilities=[Capability(name="greet")]))
        router.register(FunctionAgent(greet, agent_id="t:greet:01", capabilities=[maybe_text]))
        answered = await router.route("greet", None, fallback=["t:greet:01"])
    assert (answered.agent_id, answered.payload) == ("t:greet:01", "hello world"), answered.error


class Note(BaseModel):
    text: str = Field(min_length=5)


async def note_kind(payload: str | Note) -> str:
    return type(payload).__name__


async def test_a_text_task_is_read_as_its_text_only_when_the_schema_refuses_it_as_it_is() -> None:
    """Decided per payload: a constrained text schema takes a long enough text task's text, and
    a schema that takes an object as well keeps a valid one as the object."""
    long_text = Capability(name="long", input_schema={"type": "string", "minLength": 5})
    async with Router() as router:
        router.register(FunctionAgent(echo, agent_id="t:long:01", capabilities=[long_text]))
        router.register(FunctionAgent(note_kind, agent_id="t:note:01"))
        assert (await router.route("long", {"text": "hello world"})).payload == "hello world"
        short = await router.route("long", {"text": "hi"})
        assert (short.status, short.fault) == (ResultStatus.INVALID, Fault.CALLER), short.error
        # The text is refused too: the error says why the text is, not that an object is no text.
        assert "shorter than 5" in (short.error or ""), short.error
        # ... only where the schema takes text at all: a number's refuses the object as sent.
        integer = Capability(name="count", input_schema={"type": "integer"})
        router.register(FunctionAgent(echo, agent_id="t:count:01", capabilities=[integer]))
        counted = await router.route("count", {"text": "hi"})
        assert '{"text":"hi"} is not of type "integer"' in (counted.error or ""), counted.error
        answer = Capability(name="answer", input_schema={"type": "string", "enum": ["yes", "no"]})
        router.register(FunctionAgent(echo, agent_id="t:answer:01", capabilities=[answer]))
        maybe = await router.route("answer", {"text": "maybe"})
        assert '"maybe" is not one of "yes" or "no"' in (maybe.error or ""), maybe.error
        # A schema of values with no type: the text is what they were sent as.
        colours = Capability(name="colours", input_schema={"anyOf": [{"const": "red"}, {"const": "blue"}]})
        router.register(FunctionAgent(echo, agent_id="t:colours:01", capabilities=[colours]))
        green = await router.route("colours", {"text": "green"})
        assert '"green" is not valid under any' in (green.error or ""), green.error
        # One value: what was sent instead is said too.
        red = Capability(name="red", input_schema={"const": "red"})
        router.register(FunctionAgent(echo, agent_id="t:red:01", capabilities=[red]))
        blue = await router.route("red", {"text": "blue"})
        assert '"red" was expected, got a string "blue"' in (blue.error or ""), blue.error
        assert (await router.route("note_kind", {"text": "hello world"})).payload == "Note"
        assert (await router.route("note_kind", "hello world")).payload == "str"


async def maybe_note(payload: Note | None = None) -> str:
    return type(payload).__name__


async def number_kind(payload: int | Note) -> str:
    return type(payload).__name__


class Colour(enum.StrEnum):
    RED = "red"


async def colour_kind(payload: Note | Colour) -> str:
    return type(payload).__name__


async def test_a_payload_model_reads_text_and_no_payload_under_a_capability_without_schema() -> None:
    """The readings a function of ``payload: str`` gets, for annotations pydantic builds: a text
    task refused as the model is its text, and the router's ``{}`` for no payload is None."""
    async with Router() as router:
        router.register(
            FunctionAgent(note_kind, agent_id="t:note:01", capabilities=[Capability(name="kind")])
        )
        router.register(
            FunctionAgent(maybe_note, agent_id="t:maybe:01", capabilities=[Capability(name="maybe")])
        )
        number = Capability(name="number")
        router.register(FunctionAgent(number_kind, agent_id="t:number:01", capabilities=[number]))
        colour = Capability(name="colour")
        router.register(FunctionAgent(colour_kind, agent_id="t:colour:01", capabilities=[colour]))
        # ... as JSON text: an enum's value, a date, a UUID read as they would from JSON.
        assert (await router.route("colour", {"text": "red"})).payload == "Colour"
        # A text JSON cannot encode (a lone surrogate) is read as it is.
        assert (await router.route("kind", {"text": "ab\ud800"})).payload == "str"
        assert (await router.route("kind", {"text": "hi"})).payload == "str"
        assert (await router.route("kind", {"text": "hello world"})).payload == "Note"
        assert (await router.route("maybe")).payload == "NoneType"
        assert (await router.route("maybe", {"text": "hello world"})).payload == "Note"
        refused = await router.route("maybe", {"text": 3})
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
        # A text is read as text, strictly: never as the number it spells.
        for refused in (
            await router.route("maybe", {"text": 3}),
            await router.route("number", {"text": "5"}),
        ):
            assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error


class Plain:
    """An agent of a text capability whose own reading renders any object as its JSON text."""

    agent_id = "t:plain:01"
    capabilities = (Capability(name="plain", input_schema={"type": "string"}),)

    def adapt_payload(self, capability: str, payload: object) -> object:
        return payload if isinstance(payload, str) else json.dumps(payload)

    async def invoke(self, message: ReachMessage) -> ReachResult:
        return ok_result(message, self.agent_id, message.raw_payload)


async def test_a_text_capability_reads_a_text_task_after_its_agent_reads_it() -> None:
    async with Router() as router:
        router.register(Plain())
        assert (await router.route("plain", {"text": "hi"})).payload == '{"text": "hi"}'


def test_a_nested_forward_reference_is_read_in_the_functions_module() -> None:
    """``list["Capability"]`` written in a module of its own names that module's `Capability`,
    not the library's namesake (pydantic alone would look the text up where it is called)."""
    from tests.core import forward_refs

    schema = FunctionAgent(forward_refs.sizes, agent_id="t:sizes:01").capabilities[0].input_schema
    assert schema["items"] == {"$ref": "#/$defs/Capability"}
    assert schema["$defs"]["Capability"]["properties"] == {"size": {"title": "Size", "type": "integer"}}
    keyed = FunctionAgent(forward_refs.total, agent_id="t:total:01").capabilities[0].input_schema
    assert keyed["$defs"]["Capability"]["properties"] == {"size": {"title": "Size", "type": "integer"}}


async def test_a_forward_reference_typing_shares_across_modules_is_read_in_each() -> None:
    """``Optional["Order"]`` in two modules is one object to `typing`, and an inherited
    ``__call__`` names its own module's classes: each agent gets its own module's `Order`."""
    from tests.core import forward_refs, forward_refs_other

    agents = [
        FunctionAgent(forward_refs.ordered, agent_id="t:mine:01"),
        FunctionAgent(forward_refs_other.ordered, agent_id="t:other:01"),
        FunctionAgent(forward_refs_other.ShopHandler(), agent_id="t:handler:01"),
    ]
    async with Router() as router:
        for agent in agents:
            router.register(agent)
        mine = await router.send("t:mine:01", {"qty": 1})
        other = await router.send("t:other:01", {"sku": "A"})
        handled = await router.send("t:handler:01", {"qty": 1})
    assert mine.payload == handled.payload == "tests.core.forward_refs", (mine.error, handled.error)
    assert other.payload == "tests.core.forward_refs_other", other.error


def test_an_agents_annotations_are_evaluated_once() -> None:
    """Evaluating an annotation runs its code: building the agent does it once, not once for the
    schema and again for the payload's validator."""
    from tests.core import forward_refs

    evaluated = forward_refs.EVALUATED
    evaluated.clear()
    FunctionAgent(forward_refs.noted, agent_id="t:noted:01")
    assert evaluated == [str]


def worded(payload: "a list of words") -> str:  # type: ignore[valid-type]  # noqa: F722
    """An annotation that is no Python expression: evaluating it raises SyntaxError."""
    return type(payload).__name__


def _typed_as_capability(payload: Capability) -> str:
    return type(payload).__name__


# A function whose module has no `Capability`, as when it is imported only for type checkers: its
# annotation stays the text "Capability", which must not be looked up among the library's names.
elsewhere = types.FunctionType(_typed_as_capability.__code__, {}, "elsewhere")
elsewhere.__annotations__ = dict(_typed_as_capability.__annotations__)


async def test_a_payload_annotation_that_cannot_be_evaluated_takes_any_payload() -> None:
    """The function is served as before, taking any payload, rather than failing to be built."""
    agents = [FunctionAgent(fn, agent_id=f"t:{fn.__name__}:01") for fn in (worded, elsewhere)]
    async with Router() as router:
        for agent in agents:
            assert "input_schema" not in agent.capabilities[0].model_fields_set
            router.register(agent)
        assert (await router.route("worded", "hi")).payload == "str"
        assert (await router.route("elsewhere", {"x": 1})).payload == "dict"
