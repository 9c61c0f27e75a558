"""An input schema declared as exactly ``{"type": "object"}`` takes JSON objects only, checked by
type alone (no validator); a capability declared without a schema (the same text, by default)
still takes any payload. The difference survives copies, dumps and replica checks."""

from __future__ import annotations

from typing import Any

import pytest

from middleware import Fault, ResultStatus
from reach_adapters import AgentState, Capability, Chain, FunctionAgent, Router, Step
from reach_adapters.gateway.overrides import patch_capabilities
from tests.core.conftest import Handled

pytestmark = pytest.mark.timeout(30)

OBJECT = {"type": "object"}


def recording(agent_id: str, capability: Capability) -> tuple[FunctionAgent, list[Any]]:
    seen: list[Any] = []

    async def take(payload: Any) -> Any:
        seen.append(payload)
        return {"got": payload}

    return FunctionAgent(take, agent_id=agent_id, capabilities=[capability]), seen


@pytest.mark.parametrize(
    ("payload", "said"),
    [("PX-7", 'a string "PX-7"'), (5, "an integer 5"), ([1], "an array [1]"), (True, "a boolean true")],
)
async def test_a_declared_object_schema_refuses_what_is_not_an_object(
    router: Router, payload: Any, said: str
) -> None:
    agent, seen = recording("util:echo:01", Capability(name="echo", input_schema=OBJECT))
    router.register(agent)
    result = await router.route("echo", payload)
    assert (result.status, result.fault, result.error_type) == (
        ResultStatus.INVALID,
        Fault.CALLER,
        "PayloadValidationError",
    )
    assert f"'echo' at util:echo:01: it takes a JSON object, got {said}" in (result.error or "")
    assert (result.delivered, seen) == (False, [])
    # The caller's mistake: the agent's health is untouched.
    assert router.catalog()[0].breaker.value == "closed"


async def test_a_declared_object_schema_takes_objects_and_no_payload(router: Router) -> None:
    agent, seen = recording("util:echo:01", Capability(name="echo", input_schema=OBJECT))
    router.register(agent)
    assert (await router.route("echo", {"a": 1})).ok
    assert (await router.route("echo")).ok
    assert seen == [{"a": 1}, {}]


async def test_the_default_schema_still_takes_any_payload(router: Router) -> None:
    agent, seen = recording("util:echo:01", Capability(name="echo"))
    router.register(agent)
    for payload in ("PX-7", 5, [1], {"a": 1}):
        assert (await router.route("echo", payload)).ok
    assert seen == ["PX-7", 5, [1], {"a": 1}]


async def test_no_candidate_left_still_refuses_a_non_object_before_any_fallback(router: Router) -> None:
    echo = Handled("util:echo:01", "echo", input_schema=OBJECT)
    fallback, fallen = recording("util:any:01", Capability(name="anything"))
    router.register(echo)
    router.register(fallback)
    echo.handle.set_state(AgentState.OFFLINE, "down for a test")
    result = await router.route("echo", "PX-7", fallback=["util:any:01"])
    assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert fallen == []


def test_object_only_is_a_type_check_not_a_validator() -> None:
    declared, default = Capability(name="a", input_schema=OBJECT), Capability(name="b")
    assert (declared.object_only, declared.checks_input) == (True, False)
    assert (default.object_only, default.checks_input) == (False, False)
    assert not Capability(name="c", input_schema={}).object_only
    assert not Capability(name="d", input_schema={"type": "object", "required": ["x"]}).object_only


def test_copies_and_dumps_keep_whether_the_schema_was_given() -> None:
    declared, default = Capability(name="a", input_schema=OBJECT), Capability(name="b")
    assert declared.model_copy(update={"name": "a2"}).object_only
    assert not default.model_copy(update={"name": "b2", "weight": 9.0}).object_only
    # A dump leaves out a schema that was not given, so a copy rebuilt from it (another node's
    # view of the agent, a catalog read back) takes what the original takes.
    assert "input_schema" not in default.model_dump()
    assert not Capability(**default.model_dump(mode="json")).object_only
    assert declared.model_dump()["input_schema"] == OBJECT
    assert Capability(**declared.model_dump(mode="json")).object_only
    # Config overrides are laid over the declaration, not over all its defaults.
    (patched,) = patch_capabilities("util:x:01", [default], {"b": {"timeout_ms": 1000}})
    assert (patched.timeout_ms, patched.object_only) == (1000, False)


def test_a_declared_object_schema_and_the_default_are_not_replicas() -> None:
    declared, default = Capability(name="echo", input_schema=OBJECT), Capability(name="echo")
    assert not declared.same_schemas(default)
    assert declared.same_schemas(Capability(name="echo", input_schema=OBJECT, description="other"))
    assert default.same_schemas(Capability(name="echo", description="other"))


async def test_namesakes_that_differ_in_taking_text_are_kept_apart(router: Router) -> None:
    lenient, _ = recording("util:lenient:01", Capability(name="echo"))
    strict, _ = recording("util:strict:01", Capability(name="echo", input_schema=OBJECT))
    router.register(lenient)
    router.register(strict)
    names = {info.agent_id: [cap.name for cap in info.capabilities] for info in router.catalog()}
    assert names == {"util:lenient:01": ["echo"], "util:strict:01": ["echo_strict"]}
    assert (await router.route("echo", "text")).ok


def test_functions_of_the_payload_and_chains_without_a_schema_declare_none() -> None:
    async def take(payload: Any) -> Any:
        return payload

    (derived,) = FunctionAgent(take, agent_id="util:take:01").capabilities
    assert not derived.object_only
    chain = Chain(name="twice", steps=[Step("a", "echo")])
    declared = Chain(name="strict", steps=[Step("a", "echo")], input_schema=OBJECT)
    router = Router()
    router.add_chain(chain)
    router.add_chain(declared)
    caps = {cap.name: cap for info in router.catalog() for cap in info.capabilities}
    assert (caps["twice"].object_only, caps["strict"].object_only) == (False, True)
