"""Fault attribution: only an agent's own failures count against it (issue 10, items 1, 4 and 6)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import pytest

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from middleware.fast import build_trusted
from reach_adapters import (
    AgentState,
    BreakerState,
    Capability,
    FunctionAgent,
    InvalidMessageError,
    Router,
    RoutingPolicy,
)
from reach_adapters.router import error_result
from reach_adapters.router.faults import is_transient, never_started, refused
from tests.core.conftest import FAST, Down, Gate, Handled, agent_info, echo_agent, failing_agent

pytestmark = pytest.mark.timeout(30)


def untouched(router: Router, agent_id: str) -> None:
    agent = agent_info(router, agent_id)
    assert (agent.breaker, agent.calls, agent.failures) == (BreakerState.CLOSED, 0, 0)


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


# -- caller mistakes -------------------------------------------------------------------------


async def test_a_field_the_function_does_not_take_is_invalid_and_never_counted() -> None:
    router = Router(FAST)
    router.register(FunctionAgent(add, agent_id="math:add:01"))
    for _ in range(5):
        result = await router.route("add", {"a": 1, "b": 2, "c": 3})
        assert result.status is ResultStatus.INVALID
        assert (result.fault, result.delivered, result.error_type) == (
            Fault.CALLER,
            False,
            "PayloadValidationError",
        )
        assert "'c'" in (result.error or "")
    untouched(router, "math:add:01")
    assert (await router.route("add", {"a": 1, "b": 2})).payload == 3


async def test_derived_schemas_refuse_unknown_fields_unless_the_function_takes_kwargs() -> None:
    def anything(name: str, **rest: Any) -> Any:
        return rest

    strict = FunctionAgent(add, agent_id="math:add:01").capabilities[0].input_schema
    loose = FunctionAgent(anything, agent_id="any:thing:01").capabilities[0].input_schema
    assert strict["additionalProperties"] is False
    assert "additionalProperties" not in loose
    router = Router(FAST)
    router.register(FunctionAgent(anything, agent_id="any:thing:01"))
    assert (await router.route("anything", {"name": "x", "more": 1})).payload == {"more": 1}


async def test_binding_mistakes_under_an_open_schema_are_the_callers_too() -> None:
    # A declared capability that accepts any object: the function's own signature decides.
    open_cap = Capability(name="add")
    router = Router(FAST)
    router.register(FunctionAgent(add, agent_id="math:add:01", capabilities=[open_cap]))
    unknown = await router.route("add", {"a": 1, "b": 2, "c": 3})
    missing = await router.route("add", {"a": 1})
    assert (unknown.status, unknown.fault, unknown.error_type) == (
        ResultStatus.INVALID,
        Fault.CALLER,
        "InvalidMessageError",
    )
    assert "takes no argument 'c'" in (unknown.error or "")
    assert missing.status is ResultStatus.INVALID
    assert "needs the argument(s) 'b'" in (missing.error or "")
    untouched(router, "math:add:01")


async def test_wrong_types_are_invalid() -> None:
    router = Router(FAST)
    router.register(FunctionAgent(add, agent_id="math:add:01"))
    result = await router.route("add", {"a": "one", "b": 2})
    assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER)
    untouched(router, "math:add:01")


# -- application errors ----------------------------------------------------------------------


class ByDesign:
    """An agent that answers some tasks with an error payload by design ("no such order")."""

    agent_id = "shop:orders:01"
    capabilities = (Capability(name="order"),)

    def __init__(self, *, retryable: bool = False) -> None:
        self.retryable = retryable

    async def invoke(self, message: ReachMessage) -> ReachResult:
        return error_result(
            message, ResultStatus.ERROR, "NoSuchOrder", "order 42 does not exist", retryable=self.retryable
        )


async def test_an_error_the_agent_answers_with_is_the_tasks_and_never_opens_the_breaker() -> None:
    router = Router(FAST, default_agent="ops:human:01")
    router.register(ByDesign())
    router.register(echo_agent("ops:human:01", "anything"))
    for _ in range(12):
        result = await router.route("order", {"id": 42})
        assert (result.status, result.fault, result.delivered) == (ResultStatus.ERROR, Fault.TASK, True)
        assert result.error == "order 42 does not exist"
        # The agent served it with an answer: no fallback does the task again.
        assert (result.served_by, result.attempts) == ("candidate", 1)
    untouched(router, "shop:orders:01")


async def test_an_error_the_agent_marks_retryable_is_its_own() -> None:
    router = Router(FAST)
    router.register(ByDesign(retryable=True))
    result = await router.route("order", {"id": 42})
    assert result.fault is Fault.AGENT
    assert agent_info(router, "shop:orders:01").failures == result.attempts >= 1


async def test_exceptions_still_count_against_the_agent() -> None:
    router = Router(FAST)
    router.register(failing_agent("svc:bad:01", ValueError("bug")))
    first = await router.route("work", {})
    second = await router.route("work", {})
    assert (first.fault, first.delivered) == (Fault.AGENT, True)
    assert second.fault is Fault.AGENT
    assert agent_info(router, "svc:bad:01").breaker is BreakerState.OPEN


# -- the router's own queue ------------------------------------------------------------------


async def test_a_call_that_timed_out_in_the_queue_says_so_and_is_no_agents_fault() -> None:
    gate = Gate("svc:gate:01", max_concurrency=1)
    router = Router(FAST)
    router.register(gate.agent)
    holder = asyncio.create_task(router.route("work", "first"))
    while not gate.running:
        await asyncio.sleep(0.01)
    for _ in range(3):
        queued = await router.route("work", "second", timeout_ms=200)
        assert (queued.status, queued.fault, queued.delivered) == (ResultStatus.TIMEOUT, Fault.ROUTER, False)
        assert "for capacity, never delivered" in (queued.error or "")
        assert re.search(r"waited 0\.[23] s", queued.error or "")
    gate.release.set()
    assert (await holder).ok
    agent = agent_info(router, "svc:gate:01")
    assert (agent.breaker, agent.calls, agent.failures) == (BreakerState.CLOSED, 1, 0)


# -- transient failures ----------------------------------------------------------------------


class Status503Error(Exception):
    status_code = 503


class RateLimitError(Exception):
    """Shaped like the rate-limit errors of LLM provider SDKs (openai.RateLimitError, ...)."""


class Flaky(Exception):
    """Transient only because the policy says so."""


class WithResponse(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.response = httpx.Response(status)


def test_transient_failures_are_recognised_by_type_status_and_shape() -> None:
    request = httpx.Request("GET", "http://127.0.0.1:1/")
    assert is_transient(httpx.ConnectError("refused", request=request))
    assert is_transient(httpx.ReadTimeout("slow", request=request))
    assert is_transient(Status503Error())
    assert is_transient(WithResponse(429))
    assert is_transient(WithResponse(502))
    assert not is_transient(WithResponse(500))
    assert not is_transient(WithResponse(404))
    assert is_transient(RateLimitError())
    assert not is_transient(ValueError())
    assert not is_transient(Flaky())
    assert is_transient(Flaky(), [Flaky])


REFUSALS = [
    httpx.ConnectError("refused", request=httpx.Request("GET", "http://127.0.0.1:1/")),
    Status503Error("unavailable"),
    RateLimitError("slow down"),
    ConnectionRefusedError("refused"),
    ConnectionError("cannot reach the backend"),
]
REFUSAL_IDS = ["httpx", "status-503", "llm-sdk-shape", "refused", "connection"]


@pytest.mark.parametrize("exc", REFUSALS, ids=REFUSAL_IDS)
async def test_transient_failures_go_to_the_next_replica_when_safe_to_repeat(exc: Exception) -> None:
    router = Router(FAST)
    router.register(failing_agent("svc:work:01", exc, weight=100, idempotent=True))
    router.register(echo_agent("svc:work:02", "work", weight=1, idempotent=True))
    result = await router.route("work", {"n": 1})
    assert result.ok
    assert result.agent_id == "svc:work:02"
    assert result.attempts == 2


@pytest.mark.parametrize("exc", REFUSALS, ids=REFUSAL_IDS)
async def test_a_refusal_raised_by_the_agents_code_may_come_after_its_work(exc: Exception) -> None:
    """A card charged, then the mail server refusing: what the agent's code raises says nothing
    of the work done before it, so work unsafe to repeat is not sent again."""
    charged: list[str] = []

    async def charge_then_mail(payload: Any) -> Any:
        charged.append("01")
        raise exc

    router = Router(FAST)
    router.register(
        FunctionAgent(
            charge_then_mail, agent_id="pay:charge:01", capabilities=[Capability(name="charge", weight=100)]
        )
    )
    router.register(echo_agent("pay:charge:02", "charge", weight=1))
    result = await router.route("charge", {})
    assert (result.ok, result.delivered, result.attempts, charged) == (False, True, 1, ["01"])
    assert "outcome is unknown" in (result.error or "")


async def test_an_agent_that_says_it_never_took_the_task_goes_to_the_next_replica() -> None:
    router = Router(FAST)
    router.register(failing_agent("pay:charge:01", Down("refused"), "charge", weight=100))
    router.register(echo_agent("pay:charge:02", "charge", weight=1))
    result = await router.route("charge", {})
    assert (result.ok, result.agent_id) == (True, "pay:charge:02")
    (first, _) = router.explain(result.task_id).attempts
    assert (first.error_type, first.delivered) == ("Down", False)


@pytest.mark.parametrize("exc", REFUSALS, ids=REFUSAL_IDS)
def test_refusals_of_one_request(exc: Exception) -> None:
    assert refused(exc)
    assert not never_started(exc)


def test_an_sdk_error_raised_from_a_refused_connection_is_a_refusal() -> None:
    request = httpx.Request("POST", "http://127.0.0.1:1/")

    class APIConnectionError(Exception):
        """Shaped like openai.APIConnectionError: raised from the httpx error it wraps."""

    def wrapped(cause: Exception) -> APIConnectionError:
        error = APIConnectionError("Connection error.")
        error.__cause__ = cause
        return error

    assert refused(wrapped(httpx.ConnectError("refused", request=request)))
    assert not refused(wrapped(httpx.ReadError("reset", request=request)))


@pytest.mark.parametrize(
    "exc", [ConnectionResetError("reset"), ValueError("boom"), WithResponse(500)], ids=["reset", "bug", "500"]
)
def test_other_failures_are_no_refusal(exc: Exception) -> None:
    assert not refused(exc)


async def test_the_policy_adds_transient_exception_types_by_import_path() -> None:
    async def run(policy: RoutingPolicy) -> ReachResult:
        router = Router(policy)
        router.register(failing_agent("svc:work:01", Flaky("again"), weight=100, read_only=True))
        router.register(echo_agent("svc:work:02", "work", weight=1, read_only=True))
        return await router.route("work", {})

    assert not (await run(FAST)).ok
    assert (await run(FAST.model_copy(update={"transient_errors": (f"{__name__}:Flaky",)}))).ok
    assert (await run(RoutingPolicy(backoff_ms=0.0, transient_errors=[f"{__name__}:Flaky"]))).ok


@pytest.mark.parametrize(
    "exc",
    [
        ConnectionResetError("reset by peer"),
        httpx.ReadTimeout("no answer", request=httpx.Request("POST", "http://127.0.0.1:1/")),
        TimeoutError("upstream took too long"),
    ],
    ids=["reset", "httpx-read-timeout", "timeout"],
)
async def test_work_that_may_have_started_is_not_sent_again_unless_safe(exc: Exception) -> None:
    charged: list[str] = []

    async def charge(payload: Any) -> Any:
        charged.append("02")
        return "charged"

    for safe in (False, True):
        charged.clear()
        router = Router(FAST)
        router.register(failing_agent("pay:charge:01", exc, "charge", weight=100, idempotent=safe))
        router.register(
            FunctionAgent(
                charge, agent_id="pay:charge:02", capabilities=[Capability(name="charge", idempotent=safe)]
            )
        )
        result = await router.route("charge", {})
        assert result.delivered
        assert (result.ok, charged) == ((True, ["02"]) if safe else (False, []))
        if not safe:
            assert "outcome is unknown" in (result.error or "")


# -- unknown outcomes ------------------------------------------------------------------------


async def test_a_timeout_after_delivery_says_the_outcome_is_unknown() -> None:
    async def hang(payload: Any) -> Any:
        await asyncio.sleep(5)

    router = Router(FAST)
    router.register(
        FunctionAgent(hang, agent_id="svc:hang:01", capabilities=[Capability(name="h", timeout_ms=100)])
    )
    result = await router.route("h", {})
    assert (result.status, result.fault, result.delivered) == (ResultStatus.TIMEOUT, Fault.AGENT, True)
    assert "the outcome is unknown: the agent may have done the work" in (result.error or "")
    attempt = router.explain(result.task_id).attempts[0]
    assert (attempt.delivered, attempt.fault) == (True, Fault.AGENT)


async def test_a_lost_connection_after_delivery_says_the_outcome_is_unknown() -> None:
    router = Router(FAST)
    router.register(failing_agent("svc:net:01", ConnectionResetError("peer went away")))
    result = await router.route("work", {})
    assert result.delivered
    assert "outcome is unknown" in (result.error or "")


# -- fallback never hides an invalid request -------------------------------------------------


NEEDS_TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


async def test_an_invalid_payload_is_not_handed_to_the_default_agent() -> None:
    router = Router(FAST, default_agent="ops:human:01")
    router.register(echo_agent("text:upper:01", "upper", input_schema=NEEDS_TEXT))
    router.register(echo_agent("ops:human:01", "anything"))
    result = await router.route("upper", {"txt": "typo"})
    assert (result.status, result.fault, result.served_by) == (ResultStatus.INVALID, Fault.CALLER, "none")
    assert "field 'text'" in (result.error or "")
    assert not any(a.agent_id == "ops:human:01" for a in router.explain(result.task_id).attempts)


async def test_an_invalid_payload_is_invalid_even_when_no_candidate_could_serve() -> None:
    upper = Handled("text:upper:01", "upper", input_schema=NEEDS_TEXT)
    router = Router(FAST, default_agent="ops:human:01")
    router.register(upper)
    router.register(echo_agent("ops:human:01", "anything"))
    upper.handle.set_state(AgentState.OFFLINE, "down for a test")
    # Its only agent is offline: the default agent serves a good payload, never a bad one.
    bad = await router.route("upper", {"txt": "typo"})
    assert (bad.status, bad.fault, bad.served_by) == (ResultStatus.INVALID, Fault.CALLER, "none")
    good = await router.route("upper", {"text": "fine"})
    assert (good.ok, good.served_by) == (True, "default")


async def test_no_agent_declares_is_said_only_when_true() -> None:
    router = Router(FAST)
    router.register(echo_agent("sales:quote:01", "quote"))
    other_namespace = await router.route("quote", {}, namespace="legal")
    assert "no agent in namespace 'legal' declares capability 'quote'" in (other_namespace.error or "")
    assert "no agent declares" not in (other_namespace.error or "")
    missing = await router.route("qoute", {})
    assert "no agent declares capability 'qoute'" in (missing.error or "")


def test_results_built_by_agents_default_to_no_fault() -> None:
    built = build_trusted(ReachResult, {"status": ResultStatus.OK, "task_id": "t"})
    assert (built.fault, built.delivered) == (None, False)


# -- streaming reads the same faults ---------------------------------------------------------


class Streamer:
    """A streaming agent that fails before its first chunk with `exc`, or streams two chunks."""

    def __init__(self, agent_id: str, exc: Exception | None = None, **cap: Any) -> None:
        self.agent_id = agent_id
        self.capabilities = (Capability(name="talk", **cap),)
        self.exc = exc

    async def invoke(self, message: ReachMessage) -> ReachResult:
        raise AssertionError("streamed, not invoked")

    async def astream(self, message: ReachMessage) -> AsyncIterator[Any]:
        if self.exc is not None:
            raise self.exc
        yield "hello"
        yield self.agent_id


async def test_a_stream_the_agent_refuses_as_malformed_is_the_callers_mistake() -> None:
    router = Router(FAST)
    router.register(Streamer("chat:talk:01", InvalidMessageError("no such thread id")))
    for _ in range(3):
        with pytest.raises(InvalidMessageError, match="no such thread id"):
            async for _chunk in router.stream("talk", {}):
                pass
    untouched(router, "chat:talk:01")


async def test_a_transient_stream_failure_moves_to_the_next_replica() -> None:
    router = Router(FAST)
    router.register(Streamer("chat:talk:01", RateLimitError("slow down"), weight=100, read_only=True))
    router.register(Streamer("chat:talk:02", weight=1, read_only=True))
    chunks = [chunk async for chunk in router.stream("talk", {})]
    assert chunks == ["hello", "chat:talk:02"]
    assert agent_info(router, "chat:talk:01").failures == 1


# -- found by a review: broadcasts, versions, signatures ---------------------------------------


async def test_a_broadcast_payload_that_fits_no_declaration_is_invalid_like_a_route() -> None:
    router = Router(FAST)
    for n in (1, 2):
        router.register(echo_agent(f"b:n{n}:01", "s", input_schema={"type": "integer"}))
    result = await router.broadcast("s", "bad")
    assert (result.status, result.fault, result.error_type) == (
        ResultStatus.INVALID,
        Fault.CALLER,
        "PayloadValidationError",
    )
    for n in (1, 2):
        untouched(router, f"b:n{n}:01")


async def test_broadcast_targets_stopped_by_the_merge_were_delivered_and_are_recorded() -> None:
    router = Router(FAST)
    slow = Gate("b:slow:01", capability="s")
    router.register(slow.agent)
    router.register(echo_agent("b:fast:01", "s"))
    result = await asyncio.wait_for(router.broadcast("s", "x", merge="first"), 5)
    assert result.status is ResultStatus.OK
    stopped = next(r for r in result.results or [] if r.agent_id == "b:slow:01")
    assert (stopped.status, stopped.fault, stopped.delivered) == (ResultStatus.CANCELLED, Fault.ROUTER, True)
    assert "may have done the work" in (stopped.error or "")
    attempts = {a.agent_id: (a.status, a.delivered) for a in router.explain(result.task_id).attempts}
    assert attempts == {"b:fast:01": (ResultStatus.OK, True), "b:slow:01": (ResultStatus.CANCELLED, True)}
    assert slow.calls["x"] == 1


async def test_a_payload_one_candidate_refuses_goes_to_another_whose_declaration_takes_it() -> None:
    router = Router(FAST)
    strict = {"type": "object", "properties": {"text": {}, "lang": {}}, "required": ["text", "lang"]}
    loose = {"type": "object", "properties": {"text": {}}, "required": ["text"]}
    router.register(echo_agent("t:v2:01", "translate", input_schema=strict, version="2.0.0", weight=100))
    router.register(echo_agent("t:v1:01", "translate", input_schema=loose, version="1.0.0", weight=1))
    result = await router.route("translate", {"text": "hallo"})
    assert (result.status, result.agent_id) == (ResultStatus.OK, "t:v1:01")
    assert [a.agent_id for a in router.explain(result.task_id).attempts] == ["t:v2:01", "t:v1:01"]
    # None takes it: the best candidate's complaint, the caller's, and one attempt only.
    refused = await router.route("translate", {"lang": "de"})
    assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert "t:v2:01" in (refused.error or "")
    untouched(router, "t:v2:01")


class _AddThenSum:
    async def match(self, text: str, capabilities: Mapping[str, Capability]) -> list[tuple[str, float]]:
        return [("add", 0.8), ("sum", 0.75)]


async def test_a_refusal_under_one_capability_leaves_the_agents_other_declaration_that_takes_it() -> None:
    """A task matched from its text: its top match takes the payload but is busy, the agent's
    other match refuses it. The payload fits a declaration that cannot serve now: the router's
    failure, which the fallback then serves, not the caller's mistake."""
    router = Router(FAST, matcher=_AddThenSum())
    ints = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    release = asyncio.Event()

    async def work(a: Any) -> Any:
        await release.wait()
        return a

    busy = Capability(name="add", input_schema={"type": "object"}, max_concurrency=1)
    sums = Capability(name="sum", input_schema=ints)
    router.register(FunctionAgent(work, agent_id="calc:multi:01", capabilities=[busy, sums]))
    router.register(echo_agent("fb:any:01", "other"))
    holding = asyncio.create_task(router.send("calc:multi:01", {"a": 1}, capability="add"))
    await asyncio.sleep(0.05)
    result = await router.route(None, {"a": "x"}, text="add these", fallback=["fb:any:01"], timeout_ms=500)
    release.set()
    await holding
    assert (result.status, result.agent_id) == (ResultStatus.OK, "fb:any:01"), result.error


async def test_a_payload_only_a_busy_declaration_takes_is_the_routers_to_serve_not_invalid() -> None:
    router = Router(FAST)
    cents = {"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]}
    text = {"type": "object", "properties": {"text": {}}, "required": ["text"], "additionalProperties": False}
    router.register(echo_agent("p:v1:01", "pay", input_schema=text, weight=10))
    busy = Gate("p:v2:01", capability="pay", input_schema=cents, version="2", max_concurrency=1)
    router.register(busy.agent)
    holding = asyncio.create_task(router.send("p:v2:01", {"cents": 1}, capability="pay"))
    await asyncio.sleep(0.05)
    result = await router.route("pay", {"cents": 5}, timeout_ms=500)
    assert (result.status, result.fault) == (ResultStatus.NO_CANDIDATE, Fault.ROUTER)
    assert "cannot take it now" in (result.error or "")
    busy.release.set()
    assert (await holding).ok
    assert (await router.route("pay", {"cents": 5})).agent_id == "p:v2:01"


async def test_positional_only_parameters_are_passed_by_position() -> None:
    def scale(x: int, factor: int = 2, /, *, offset: int = 0) -> int:
        return x * factor + offset

    router = Router(FAST)
    router.register(FunctionAgent(scale, agent_id="m:scale:01"))
    assert (await router.route("scale", {"x": 3})).payload == 6
    assert (await router.route("scale", {"x": 3, "factor": 3, "offset": 1})).payload == 10
    assert (await router.route("scale", {"x": 3, "offset": 1})).payload == 7
    missing = await router.route("scale", {"factor": 3})
    assert (missing.status, missing.fault) == (ResultStatus.INVALID, Fault.CALLER)
