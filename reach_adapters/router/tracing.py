"""OpenTelemetry spans for dispatch, selection and each attempt, when tracing is configured.

Only `opentelemetry-api` is needed; without an SDK provider set, no span is created at all, so an
untraced router pays one clock read per reach. Applications usually set the provider up after the
router is built: while there is none, it is looked for again at most once a second (the lookup
reads the environment then); once there is one, it is read on every reach (one global read), so
a provider set or replaced later is noticed at once.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import trace
from opentelemetry.trace import StatusCode
from opentelemetry.util.types import Attributes

from middleware import ReachMessage, ReachResult

if TYPE_CHECKING:
    from reach_adapters.router.decisions import DecisionRecord
    from reach_adapters.router.planning import Plan
    from reach_adapters.router.state import Slot

__all__ = ["ATTEMPT", "DISPATCH", "SELECT", "Step", "active_tracer", "spanned"]

T = TypeVar("T")

_RECHECK_S = 1.0
_provider: trace.TracerProvider | None = None
_tracer: trace.Tracer | None = None
_checked_at = -_RECHECK_S


def active_tracer() -> trace.Tracer | None:
    """The project's tracer when a real tracer provider is installed, else None."""
    global _provider, _tracer, _checked_at
    if _provider is not None:
        provider = trace.get_tracer_provider()
        if provider is _provider:
            return _tracer
    else:
        now = time.monotonic()
        if now - _checked_at < _RECHECK_S:
            return None
        _checked_at = now
        provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        _provider = _tracer = None
    else:
        _provider, _tracer = provider, provider.get_tracer("agent-reach")
    return _tracer


@dataclass(frozen=True, slots=True)
class Step:
    """A traced step of a reach: its span's name, the attributes it opens with, and what it adds
    when the step is done; both read the step's value and the two objects it is about."""

    name: str
    done: Callable[[trace.Span, Any, Any, Any], None]
    opening: Callable[[Any, Any], Attributes] | None = None


def spanned(
    tracer: trace.Tracer | None, step: Step, work: Awaitable[T], about: Any = None, within: Any = None
) -> Awaitable[T]:
    """`work` inside a span for `step` when tracing is on; `work` itself (no frame more) when not."""
    if tracer is None:
        return work
    return _in_span(tracer, step, work, about, within)


async def _in_span(tracer: trace.Tracer, step: Step, work: Awaitable[T], about: Any, within: Any) -> T:
    attributes = step.opening(about, within) if step.opening is not None else None
    with tracer.start_as_current_span(step.name, attributes=attributes) as span:
        value = await work
        step.done(span, value, about, within)
        return value


def _dispatch_opening(message: ReachMessage, _: None) -> Attributes:
    meta = message.meta_info
    return {
        "reach.task_id": meta.task_id,
        "reach.trace_id": meta.trace_id,
        "reach.capability": meta.capability or "",
        "reach.mode": message.routing_hint.mode,
    }


def _dispatch_done(span: trace.Span, result: ReachResult, _: ReachMessage, __: None) -> None:
    span.set_attributes(
        {
            "reach.status": str(result.status),
            "reach.agent_id": result.agent_id or "",
            "reach.attempts": result.attempts,
            "reach.served_by": result.served_by,
            "reach.fault": str(result.fault or ""),
        }
    )
    if not result.ok:
        span.set_status(StatusCode.ERROR, f"{result.error_type}: {result.error}")


def _select_done(span: trace.Span, plan: Plan, record: DecisionRecord, _: None) -> None:
    span.set_attributes({"reach.candidates": len(plan.slots), "reach.exclusions": len(record.exclusions)})


def _attempt_done(
    span: trace.Span, outcome: tuple[ReachResult, float], slot: Slot, record: DecisionRecord
) -> None:
    span.set_attributes(
        {
            "reach.agent_id": slot.runtime.agent_id,
            "reach.attempt": len(record.attempts) + 1,
            "reach.status": str(outcome[0].status),
        }
    )


# The steps of every reach: `Dispatcher.dispatch` (about the message), selection (about the plan's
# decision record), and each attempt (about its slot, within the decision record).
DISPATCH = Step("reach.dispatch", _dispatch_done, _dispatch_opening)
SELECT = Step("reach.select", _select_done)
ATTEMPT = Step("reach.attempt", _attempt_done)
