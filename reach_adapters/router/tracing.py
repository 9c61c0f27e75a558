"""OpenTelemetry spans for dispatch, selection and each attempt, when tracing is configured.

Only `opentelemetry-api` is needed; without an SDK provider set, no span is created at all, so an
untraced router pays one cached check per reach. The provider is looked for again at most once a
second, because applications usually set it up after the router is built.
"""

from __future__ import annotations

import time

from opentelemetry import trace

__all__ = ["active_tracer"]

_RECHECK_S = 1.0
_tracer: trace.Tracer | None = None
_checked_at = -_RECHECK_S


def active_tracer() -> trace.Tracer | None:
    """The project's tracer when a real tracer provider is installed, else None."""
    global _tracer, _checked_at
    if _tracer is not None:
        return _tracer
    now = time.monotonic()
    if now - _checked_at < _RECHECK_S:
        return None
    _checked_at = now
    provider = trace.get_tracer_provider()
    if not isinstance(provider, trace.ProxyTracerProvider):
        _tracer = provider.get_tracer("agent-reach")
    return _tracer
