"""Decision logs, log context, OpenTelemetry spans and Prometheus metrics on a real router."""

from __future__ import annotations

import gc
import json
import logging
import math
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import generate_latest

from middleware import ReachMessage
from reach_adapters import Capability, FunctionAgent, ReachError, Router
from reach_adapters.errors import InvalidMessageError
from reach_adapters.observability import JsonFormatter, ReachLogFilter
from reach_adapters.observability.metrics import ReachMetrics
from reach_adapters.router import tracing
from tests.core.conftest import FAST, Down, echo_agent, failing_agent

pytestmark = pytest.mark.timeout(20)


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.addFilter(ReachLogFilter())

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def captured() -> Iterator[Capture]:
    handler = Capture()
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield handler
    root.removeHandler(handler)
    root.setLevel(old)


async def test_one_decision_record_per_reach(captured: Capture) -> None:
    router = Router(FAST)
    router.register(failing_agent("svc:work:01", Down("down"), capability="w", weight=100))
    router.register(echo_agent("svc:work:02", capability="w", weight=1))
    retried = await router.route("w", {})
    plain = await router.send("svc:work:02", {})
    missing = await router.route("nothing", {})
    decisions = [r for r in captured.records if r.name == "reach_adapters.decisions"]
    by_task = {r.task_id: r for r in decisions}  # type: ignore[attr-defined]
    assert len(decisions) == 3
    assert by_task[retried.task_id].decision_type == "retried"  # type: ignore[attr-defined]
    assert by_task[retried.task_id].agent_id == "svc:work:02"  # type: ignore[attr-defined]
    assert by_task[plain.task_id].decision_type == "selected"  # type: ignore[attr-defined]
    assert by_task[missing.task_id].decision_type == "filtered"  # type: ignore[attr-defined]
    assert "NoCandidateError" in by_task[missing.task_id].reason  # type: ignore[attr-defined]
    line = json.loads(JsonFormatter().format(by_task[retried.task_id]))
    assert line["decision_type"] == "retried"
    assert line["trace_id"] == retried.trace_id
    assert line["score"] is not None


async def test_log_lines_inside_an_agent_carry_the_task_and_trace(captured: Capture) -> None:
    agent_log = logging.getLogger("tests.some_agent")

    async def chatty(message: ReachMessage) -> Any:
        agent_log.info("working on it")
        return "done"

    router = Router()
    router.register(FunctionAgent(chatty, agent_id="svc:chatty:01", capabilities=[Capability(name="c")]))
    result = await router.route("c", {})
    (line,) = [r for r in captured.records if r.name == "tests.some_agent"]
    assert line.task_id == result.task_id  # type: ignore[attr-defined]
    assert line.trace_id == result.trace_id  # type: ignore[attr-defined]
    assert line.agent_id == "svc:chatty:01"  # type: ignore[attr-defined]
    outside = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    ReachLogFilter().filter(outside)
    assert outside.task_id == "-"  # type: ignore[attr-defined]


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # The global provider can be set once per process: ours stands in for it during the test,
    # as if the application had set it up after the router was built.
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    monkeypatch.setattr(tracing, "_checked_at", -math.inf)
    yield exporter
    provider.shutdown()
    monkeypatch.undo()
    tracing.active_tracer()


async def test_spans_for_dispatch_selection_and_each_attempt(spans: InMemorySpanExporter) -> None:
    router = Router(FAST)
    router.register(failing_agent("svc:work:01", Down("down"), capability="w", weight=100))
    router.register(echo_agent("svc:work:02", capability="w", weight=1))
    result = await router.route("w", {})
    finished = {s.name: s for s in spans.get_finished_spans()}
    names = [s.name for s in spans.get_finished_spans()]
    assert names.count("reach.attempt") == 2
    dispatch = finished["reach.dispatch"]
    assert dispatch.attributes is not None
    assert dispatch.attributes["reach.task_id"] == result.task_id
    assert dispatch.attributes["reach.agent_id"] == "svc:work:02"
    select = finished["reach.select"]
    assert select.parent is not None
    assert select.parent.span_id == dispatch.context.span_id
    assert all(s.context.trace_id == dispatch.context.trace_id for s in spans.get_finished_spans())


def test_without_a_provider_no_tracer_is_used() -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert tracing.active_tracer() is None


def test_the_tracer_follows_the_provider_set_later_or_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = TracerProvider(), TracerProvider()
    monkeypatch.setattr(tracing, "_checked_at", -math.inf)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", first)
    found = tracing.active_tracer()
    assert found is not None
    assert tracing.active_tracer() is found  # cached while the provider stays
    # Once a provider is known it is read on every reach, so a replacement is seen at once.
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", second)
    replaced = tracing.active_tracer()
    assert replaced is not None
    assert replaced is not found
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    assert tracing.active_tracer() is None


async def test_prometheus_metrics() -> None:
    router = Router(FAST)
    metrics = ReachMetrics(router)
    router.register(failing_agent("svc:work:01", Down("down"), capability="w", weight=100))
    router.register(echo_agent("svc:work:02", capability="w", weight=1))
    await router.route("w", {})
    await router.route("w", {})
    await router.route("missing", {})
    await router.route("w", {"extra": 1}, strategy="no-such")
    text = generate_latest(metrics.registry).decode()
    assert 'reach_retries_total{capability="w"} 2.0' in text
    assert 'reach_match_failures_total{capability="<unknown>"} 1.0' in text
    assert 'reach_reaches_total{capability="w",fault="",served_by="candidate",status="ok"} 2.0' in text
    assert (
        'reach_reaches_total{capability="<unknown>",fault="router",'
        'served_by="none",status="no_candidate"} 1.0' in text
    )
    assert 'reach_reaches_total{capability="w",fault="caller",served_by="none",status="invalid"} 1.0' in text
    assert 'reach_agent_breaker_state{agent_id="svc:work:01"} 2.0' in text
    assert 'reach_agent_in_flight{agent_id="svc:work:02"} 0.0' in text
    assert "reach_routing_latency_seconds_count" in text
    assert "reach_agent_idle_rate 1.0" in text


class Seen:
    def __init__(self) -> None:
        self.reaches: list[tuple[str, str, str | None]] = []

    def on_reach(self, record: Any, result: Any) -> None:
        self.reaches.append((record.mode, str(result.status), result.agent_id))


async def test_streams_are_observed_like_any_reach() -> None:
    class Streaming:
        agent_id = "w:gen:01"
        capabilities = [Capability(name="gen")]

        async def invoke(self, message: ReachMessage) -> Any:
            raise AssertionError("streams use astream")

        async def astream(self, message: ReachMessage) -> Any:
            yield "a"
            yield "b"

    router = Router()
    seen = Seen()
    router.add_observer(seen)
    router.register(Streaming())
    assert [chunk async for chunk in router.stream("gen", {})] == ["a", "b"]
    with pytest.raises(ReachError):
        [chunk async for chunk in router.stream("nothing", {})]
    assert seen.reaches == [("unicast", "ok", "w:gen:01"), ("unicast", "no_candidate", None)]


async def test_an_agents_exception_is_one_warning_line_and_a_debug_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    router = Router(FAST)
    router.register(failing_agent("svc:work:01", RuntimeError("boom")))
    with caplog.at_level(logging.WARNING, logger="reach_adapters.router.outcomes"):
        result = await router.route("work", {})
    (line,) = [r for r in caplog.records if r.name == "reach_adapters.router.outcomes"]
    assert line.levelno == logging.WARNING
    assert line.exc_info is None
    assert line.getMessage() == f"agent svc:work:01 raised on task {result.task_id}: RuntimeError: boom"
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="reach_adapters.router.outcomes"):
        await router.route("work", {})
    traced = [r for r in caplog.records if r.exc_info is not None]
    assert len(traced) == 1
    assert traced[0].levelno == logging.DEBUG
    assert "raise exc" in caplog.text  # the agent's own frame, from the traceback


async def test_a_callers_mistake_the_agent_reports_is_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    router = Router(FAST)
    router.register(failing_agent("svc:work:01", InvalidMessageError("no such thread")))
    with caplog.at_level(logging.INFO, logger="reach_adapters.router.outcomes"):
        assert (await router.route("work", {})).status == "invalid"
    assert not [r for r in caplog.records if r.name == "reach_adapters.router.outcomes"]


async def test_a_kept_record_holds_no_empty_containers_of_its_own() -> None:
    # The log keeps thousands of records, and every container in them is one more object each
    # full garbage collection scans: the fields a plain call leaves empty allocate nothing.
    router = Router()
    router.register(echo_agent("svc:echo:01"))
    result = await router.route("echo", {"text": "x"})
    record = router.explain(result.task_id)
    for name in ("matches", "best_matches", "steps", "compensations", "votes"):
        value = getattr(record, name)
        assert not value, name
        assert not gc.is_tracked(value), name
