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
    "ANSWERED",
    "REFUSED_STATUS_CODES",
    "RETRIED",
    "TRANSIENT_STATUS_CODES",
    "Fault",
    "counts_against_agent",
    "fault_of_returned",
    "is_transient",
    "never_started",
    "refused",
]

# Failures another agent may not share, so worth trying elsewhere: the agent's own, or a lack of room.
RETRIED = frozenset({Fault.AGENT, Fault.ROUTER})
# Outcomes in which the agent answered: done, or stopped to ask for input. Neither is a failure.
ANSWERED = frozenset({ResultStatus.OK, ResultStatus.INPUT_REQUIRED})

# HTTP statuses that say "try again, maybe elsewhere": rate limited, or a gateway in the way failed.
TRANSIENT_STATUS_CODES = frozenset({429, 502, 503, 504})

# Transport errors of the HTTP clients agents are built on, by (package, class name) anywhere in
# the exception's MRO, so the core depends on neither; a bare name such as "TransportError" is
# too common (elasticsearch-py calls its 404 that).
_HTTP_TRANSPORT = frozenset(
    {("httpx", "TransportError"), ("httpcore", "NetworkError"), ("httpcore", "TimeoutException")}
)
# The connection, timeout and rate-limit errors of LLM provider SDKs (OpenAI, Anthropic, Mistral,
# LiteLLM, Cohere...), by class name: distinctive enough to need no package.
_PROVIDER_TRANSIENT = frozenset(
    {"APIConnectionError", "APITimeoutError", "RateLimitError", "ServiceUnavailableError", "OverloadedError"}
)
# Refusals that come before any work: nothing ran, so even work unsafe to repeat may go elsewhere.
_REFUSED_NAMES = frozenset(
    {
        "ConnectError",
        "ConnectTimeout",
        "RateLimitError",
        "OverloadedError",
        "ModelRateLimitError",
    }
)
REFUSED_STATUS_CODES = frozenset({429, 503})
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
    if result.fault is not None or result.status in ANSWERED:
        return result.fault
    if result.retryable and result.status is ResultStatus.ERROR:
        return Fault.AGENT
    return _RETURNED.get(result.status, Fault.TASK)


def is_transient(exc: BaseException, extra: Sequence[type[BaseException]] = ()) -> bool:
    """Whether another agent, or a later try, may well succeed where `exc` failed.

    Built-in timeouts and connection errors; anything with ``retryable = True`` (or
    ``is_retryable``, as langchain-core's model errors have); HTTP 429, 502,
    503 and 504, whether the exception carries the status itself or on its ``response``; the
    transport and rate-limit errors of HTTP clients and LLM SDKs, recognised by class name; and
    the types the policy adds (`RoutingPolicy.transient_errors`).
    """
    if isinstance(exc, TimeoutError | ConnectionError) or (extra and isinstance(exc, tuple(extra))):
        return True
    # ``is_retryable``: langchain-core's model errors say so of themselves (a rate limit, a 5xx).
    if getattr(exc, "retryable", False) is True or getattr(exc, "is_retryable", False) is True:
        return True
    for cls in type(exc).__mro__:
        if cls.__name__ in _PROVIDER_TRANSIENT:
            return True
        if (cls.__module__.partition(".")[0], cls.__name__) in _HTTP_TRANSPORT:
            return True
    return _status_code(exc) in TRANSIENT_STATUS_CODES


def never_started(exc: BaseException) -> bool:
    """Whether `exc` says the agent never received the task: it carries ``delivered = False``,
    set by whoever knows that the request never reached the agent (an adapter whose connection
    was refused, `refused`).

    Nothing else does: an agent's code that raises a refused connection or a rate limit may have
    done work before it (charged a card, then failed to reach its mail server), so only work
    safe to repeat is tried again.
    """
    return getattr(exc, "delivered", None) is False


def refused(exc: BaseException) -> bool:
    """Whether `exc`, raised by one request, says that request was refused before any work: a
    refused connection (`ConnectionRefusedError`, a plain `ConnectionError`, httpx's
    ``ConnectError``/``ConnectTimeout``), a rate limit or overload (HTTP 429, 503, an LLM SDK's
    ``RateLimitError``). For adapters whose whole delivery is that one request, which then mark
    it ``delivered = False`` (`never_started`).
    """
    if isinstance(exc, ConnectionRefusedError) or type(exc) is ConnectionError:
        return True
    if any(cls.__name__ in _REFUSED_NAMES for cls in type(exc).__mro__):
        return True
    if _status_code(exc) in REFUSED_STATUS_CODES:
        return True
    # An SDK's own error around its HTTP client's (openai's APIConnectionError from httpx's
    # ConnectError): the error it was raised from says what happened.
    cause = exc.__cause__
    return cause is not None and cause is not exc and refused(cause)


def _status_code(exc: BaseException) -> int | None:
    for holder in (exc, getattr(exc, "response", None)):
        if holder is None:
            continue
        for name in _STATUS_ATTRIBUTES:
            value = getattr(holder, name, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None
