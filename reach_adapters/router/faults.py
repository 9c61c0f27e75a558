"""Who is to blame for an outcome, decided once (DESIGN §6); the breaker, health, retries,
fallback and metrics all read `Fault` instead of judging statuses and error names themselves.

| fault  | examples                                             | health  | tried elsewhere        |
|--------|------------------------------------------------------|---------|------------------------|
| caller | bad payload, loop, reused task id                    | no      | no                     |
| task   | the agent answered with an error (MCP ``isError``)   | no      | no                     |
| agent  | it raised, hung past its deadline, broke its schema  | counts  | if transient and safe  |
| router | queued past the deadline, no capacity, agent busy    | no      | yes                    |
"""

from __future__ import annotations

from collections.abc import Sequence

from middleware import Fault, ReachResult, ResultStatus

__all__ = [
    "TRANSIENT_STATUS_CODES",
    "Fault",
    "counts_against_agent",
    "fault_of_returned",
    "is_transient",
]

# HTTP statuses that say "try again, maybe elsewhere": rate limited, or a gateway in the way failed.
TRANSIENT_STATUS_CODES = frozenset({429, 502, 503, 504})

# Class names, anywhere in an exception's MRO, of the transport, timeout and rate-limit errors
# of common HTTP clients (httpx, httpcore) and LLM provider SDKs (OpenAI, Anthropic, Mistral,
# LiteLLM, Cohere...). Matched by name so the core depends on none of them.
_TRANSIENT_NAMES = frozenset(
    {
        "TransportError",
        "NetworkError",
        "TimeoutException",
        "APIConnectionError",
        "APITimeoutError",
        "RateLimitError",
        "ServiceUnavailableError",
        "OverloadedError",
    }
)
_STATUS_ATTRIBUTES = ("status_code", "status", "code", "http_status")

# What an agent's own error result means when the agent did not say whose fault it is.
_RETURNED: dict[ResultStatus, Fault] = {
    ResultStatus.ERROR: Fault.TASK,
    ResultStatus.PARTIAL: Fault.TASK,
    ResultStatus.TIMEOUT: Fault.AGENT,
    ResultStatus.INVALID: Fault.CALLER,
    ResultStatus.REJECTED: Fault.CALLER,
    ResultStatus.CANCELLED: Fault.CALLER,
    ResultStatus.NO_CANDIDATE: Fault.ROUTER,
}


def counts_against_agent(result: ReachResult) -> bool:
    """Whether the outcome is the agent's own: only these move its breaker and health."""
    return result.fault is Fault.AGENT


def fault_of_returned(result: ReachResult) -> Fault | None:
    """The fault of a result an agent returned: its own word, else what its status implies.

    An error the agent answers with, rather than raises, is the task's (an application error by
    design, such as "file not found"): the agent worked, the task could not be done. One it marks
    ``retryable`` ("another agent might succeed") is its own failure.
    """
    if result.fault is not None or result.status is ResultStatus.OK:
        return result.fault
    if result.retryable and result.status is ResultStatus.ERROR:
        return Fault.AGENT
    return _RETURNED.get(result.status, Fault.TASK)


def is_transient(exc: BaseException, extra: Sequence[type[BaseException]] = ()) -> bool:
    """Whether another agent, or a later try, may well succeed where `exc` failed.

    Built-in timeouts and connection errors; anything with ``retryable = True``; HTTP 429, 502,
    503 and 504, whether the exception carries the status itself or on its ``response``; the
    transport and rate-limit errors of HTTP clients and LLM SDKs, recognised by class name; and
    the types the policy adds (`RoutingPolicy.transient_errors`).
    """
    if isinstance(exc, TimeoutError | ConnectionError) or (extra and isinstance(exc, tuple(extra))):
        return True
    if getattr(exc, "retryable", False) is True:
        return True
    if any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__):
        return True
    return _status_code(exc) in TRANSIENT_STATUS_CODES


def _status_code(exc: BaseException) -> int | None:
    for holder in (exc, getattr(exc, "response", None)):
        if holder is None:
            continue
        for name in _STATUS_ATTRIBUTES:
            value = getattr(holder, name, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None
