"""The agent protocol, and `FunctionAgent` for plain Python callables."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol, runtime_checkable

import orjson
from pydantic import JsonValue, TypeAdapter, ValidationError

from middleware import ReachMessage, ReachResult, ResultStatus, ensure_json
from middleware.fast import ZERO_TIMINGS, build_trusted
from reach_adapters.errors import InvalidDeclarationError, InvalidMessageError, describe_validation_error
from reach_adapters.router.capability import Capability, validate_capabilities
from reach_adapters.router.identity import parse_agent_id
from reach_adapters.router.outcomes import ErrorKind
from reach_adapters.router.schemas import (
    CompiledSchema,
    compiled_validator,
    first_error,
    schema_key,
    text_of_task,
)
from reach_adapters.router.signatures import (
    CallStyle,
    derive_capability,
    input_schema,
    keywords,
    made_arguments,
    payload_type,
    positional_only,
    read_parameters,
    style_of,
)
from reach_adapters.router.workers import WorkerPool

__all__ = ["Agent", "CallStyle", "FunctionAgent", "close_agent", "input_required_result", "ok_result"]

logger = logging.getLogger(__name__)

_NONE: frozenset[str] = frozenset()


@runtime_checkable
class Agent(Protocol):
    """Anything that takes a task and returns a result.

    `invoke` may raise: the router turns exceptions into error results, so an agent never has to
    guard itself to keep the router alive. Optional methods the router uses when present:
    ``attach(handle)``, ``async probe() -> bool``, ``astream(message)``, ``aclose()``, and
    ``adapt_payload(capability, payload) -> payload``, which reads a payload of another shape
    (a plain text for a chat agent) before it is checked against the input schema, and
    ``async compensate(message)``, which undoes what a cancelled call to a ``compensable``
    capability may have done (see `compensation`).
    """

    @property
    def agent_id(self) -> str: ...

    @property
    def capabilities(self) -> Sequence[Capability]: ...

    async def invoke(self, message: ReachMessage) -> ReachResult: ...


def ok_result(
    message: ReachMessage, agent_id: str | None, payload: Any, *, extra: dict[str, JsonValue] | None = None
) -> ReachResult:
    """A successful result for `message`; built without re-validation because the router made it."""
    return _answered(message, agent_id, payload, extra, {"status": ResultStatus.OK})


def input_required_result(
    message: ReachMessage, agent_id: str | None, payload: Any, *, extra: dict[str, JsonValue] | None = None
) -> ReachResult:
    """The agent stopped to ask for input: `payload` says what it needs (a LangGraph interrupt's
    value, an A2A ``input-required`` message). The caller answers with ``resume=`` on the same
    thread. Not a failure: the agent worked, and nothing is retried or counted against it."""
    return _answered(
        message,
        agent_id,
        payload,
        extra,
        {
            "status": ResultStatus.INPUT_REQUIRED,
            "error_type": ErrorKind.INPUT_REQUIRED,
            "error": "the agent needs input to go on: answer with resume=... on the same thread",
        },
    )


def _answered(
    message: ReachMessage,
    agent_id: str | None,
    payload: Any,
    extra: dict[str, JsonValue] | None,
    values: dict[str, Any],
) -> ReachResult:
    values.update(
        task_id=message.meta_info.task_id,
        payload=payload,
        agent_id=agent_id,
        delivered=True,
        timings=ZERO_TIMINGS,
    )
    if extra is not None:
        values["extra"] = extra
    return build_trusted(ReachResult, values)


class FunctionAgent:
    """Wraps a sync or async callable as an agent.

    How the payload reaches the function (``call_style``), chosen once from its signature:
    ``message`` when its only parameter is annotated `ReachMessage` or named ``message``;
    ``payload`` when it is named ``payload``; otherwise ``kwargs``: the payload object's fields
    become keyword arguments, and a field the function does not take, or a missing required
    one, is the caller's mistake (`InvalidMessageError`), never the agent's failure. Without
    capabilities, one is derived from the function's name, docstring and signature (for
    ``payload``, its annotation, which the function checks itself under a capability given
    without an input schema, reading a text task's ``{"text": ...}`` as its text for
    ``payload: str``).
    Arguments, or a payload, annotated with a pydantic model or a dataclass are
    made one of their JSON.

    Sync functions run in a thread pool of the agent's own, as large as its capabilities'
    `max_concurrency` together, so a hung function can starve no other agent. A call past its
    deadline keeps its slot until its thread really ends (the catalog counts it as stuck).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        agent_id: str,
        capabilities: Sequence[Capability | Mapping[str, Any]] | None = None,
        call_style: CallStyle | None = None,
        compensate: Callable[[ReachMessage], Any] | None = None,
    ) -> None:
        """`compensate`: a sync or async function of the cancelled call's `ReachMessage` that
        undoes its side effects, for capabilities declared ``compensable``."""
        if not callable(fn):
            msg = f"agent {agent_id}: FunctionAgent needs a callable, got {type(fn).__name__}"
            raise InvalidDeclarationError(msg)
        if compensate is not None and not callable(compensate):
            msg = f"agent {agent_id}: compensate must be a callable, got {type(compensate).__name__}"
            raise InvalidDeclarationError(msg)
        self._compensate = compensate
        parse_agent_id(agent_id)
        self._agent_id = agent_id
        self._fn = fn
        self._is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - async callable objects
        )
        self._style: CallStyle = call_style or style_of(fn)
        self._takes, self._requires = keywords(fn) if self._style == "kwargs" else (None, _NONE)
        # Parameters before a "/" are passed by position: their names and defaults, in order.
        self._positional = positional_only(fn) if self._style == "kwargs" else ()
        params = read_parameters(fn)
        self._made = made_arguments(params) if self._style == "kwargs" else {}
        self._payload_type = payload_type(params) if self._style == "payload" else None
        if capabilities is None:
            capabilities = [derive_capability(fn, self._style, params)]
        self._capabilities = validate_capabilities(agent_id, capabilities)
        # A payload annotation pydantic does not build (``payload: str``), as a schema: the
        # function checks it itself unless the call names a capability whose schema the router
        # checked (one declared without a schema, or another's name: a fallback, a lower match).
        unbuilt = self._style == "payload" and self._payload_type is None
        annotated = input_schema("payload", params) if unbuilt else None
        self._annotation = None if annotated is None else compiled_validator(schema_key(annotated))
        self._checked = frozenset(
            cap.name for cap in self._capabilities if "input_schema" in cap.model_fields_set
        )
        self._workers = WorkerPool(agent_id, sum(cap.max_concurrency for cap in self._capabilities))

    @property
    def agent_id(self) -> str:
        return self._agent_id

    @property
    def capabilities(self) -> Sequence[Capability]:
        return self._capabilities

    def __repr__(self) -> str:
        return f"FunctionAgent({getattr(self._fn, '__qualname__', self._fn)!r}, agent_id={self._agent_id!r})"

    async def compensate(self, message: ReachMessage) -> None:
        """Undo a cancelled call with the `compensate` function given, if any."""
        if self._compensate is None:
            return
        if inspect.iscoroutinefunction(self._compensate):
            await self._compensate(message)
        else:
            await asyncio.to_thread(self._compensate, message)

    async def invoke(self, message: ReachMessage) -> ReachResult:
        args, kwargs = self._arguments(message)
        if self._is_async:
            value = await self._fn(*args, **kwargs)
        else:
            value = await self._workers.run(partial(self._fn, *args, **kwargs))
            if inspect.isawaitable(value):
                value = await value
        return ok_result(message, self._agent_id, ensure_json(value, where="output"))

    async def aclose(self) -> None:
        """Stop the thread pool; calls still queued are dropped, running ones finish on their own."""
        self._workers.close()

    def _arguments(self, message: ReachMessage) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self._style == "message":
            return (message,), {}
        if self._style == "payload":
            payload = message.raw_payload
            unchecked = message.meta_info.capability not in self._checked
            if self._payload_type is not None:
                return (self._made_payload(self._payload_type, payload, unchecked),), {}
            annotation = self._annotation
            if annotation is not None and unchecked and not annotation.is_valid(payload):
                payload = self._annotated(annotation, payload)
            return (payload,), {}
        payload = message.raw_payload
        if payload is None:
            payload = {}
        if not isinstance(payload, dict):
            msg = (
                f"agent {self._agent_id} takes keyword arguments, so the payload must be a JSON "
                f"object, got {type(payload).__name__}"
            )
            raise InvalidMessageError(msg)
        takes = self._takes
        if takes is not None and not payload.keys() <= takes:
            unknown = sorted(payload.keys() - takes)
            msg = (
                f"agent {self._agent_id} takes no argument {', '.join(map(repr, unknown))}; "
                f"it takes {sorted(takes) or 'no arguments'}"
            )
            raise InvalidMessageError(msg)
        if not self._requires <= payload.keys():
            missing = sorted(self._requires - payload.keys())
            msg = f"agent {self._agent_id} needs the argument(s) {', '.join(map(repr, missing))}"
            raise InvalidMessageError(msg)
        if self._made:
            payload = self._make(payload)
        if self._positional:
            return _by_position(payload, self._positional)
        return (), payload

    def _make(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The arguments typed as pydantic models or dataclasses made so: JSON carries them as
        objects, and the function reads their attributes. One that does not make one is the
        caller's mistake."""
        made = dict(payload)
        for name, adapter in self._made.items():
            if name in made:
                made[name] = self._made_one(f"argument {name!r}", adapter, made[name])
        return made

    def _annotated(self, annotation: CompiledSchema, payload: Any) -> Any:
        """A payload its annotation refused, as the function takes it (`_readings`) when the
        annotation takes that; else the caller's mistake."""
        for reading in _readings(payload):
            if annotation.is_valid(reading):
                return reading
        problem = first_error(annotation, payload)
        msg = f"agent {self._agent_id}: the payload is not what the function takes: {problem}"
        raise InvalidMessageError(msg)

    def _made_payload(self, adapter: TypeAdapter[Any], payload: Any, unchecked: bool) -> Any:
        """The payload made its annotation's type; one it refuses is read as `_annotated` reads
        it when the router checked no schema of the capability."""
        try:
            return self._made_one("payload", adapter, payload)
        except InvalidMessageError:
            for reading in _readings(payload) if unchecked else ():
                try:
                    return _read_strictly(adapter, reading)
                except ValidationError:
                    continue
            raise

    def _made_one(self, what: str, adapter: TypeAdapter[Any], value: Any) -> Any:
        try:
            return adapter.validate_python(value, strict=False)
        except ValidationError as exc:
            msg = f"agent {self._agent_id}: {what}: {describe_validation_error(exc)}"
            raise InvalidMessageError(msg) from None


def _read_strictly(adapter: TypeAdapter[Any], reading: Any) -> Any:
    """`reading` as JSON, strictly: a text is text (an enum's value, a date), never the number
    or yes/no it spells. A text JSON cannot encode (a lone surrogate) is read as it is."""
    try:
        text = orjson.dumps(reading)
    except orjson.JSONEncodeError:
        return adapter.validate_python(reading, strict=True)
    return adapter.validate_json(text, strict=True)


def _readings(payload: Any) -> tuple[Any, ...]:
    """What else a payload the function's annotation refused may mean: a text task's
    ``{"text": ...}`` its text, and the router's ``{}`` for no payload None."""
    text = text_of_task(payload)
    if text is not None:
        return (text,)
    return (None,) if payload == {} else ()


def _by_position(
    payload: dict[str, Any], positional: tuple[tuple[str, Any], ...]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`payload` as positional arguments for the positional-only parameters (their defaults for
    those left out before one given) and keyword arguments for the rest."""
    names = [name for name, _ in positional]
    last = max((i for i, name in enumerate(names) if name in payload), default=-1)
    args = tuple(payload.get(name, default) for name, default in positional[: last + 1])
    return args, {key: value for key, value in payload.items() if key not in names}


async def close_agent(agent: Agent) -> None:
    """Close an agent that holds something open (an MCP session, a server process); log, never
    raise, if closing fails, so one agent cannot keep the others from closing."""
    aclose = getattr(agent, "aclose", None)
    if callable(aclose):
        try:
            await aclose()
        except Exception:
            logger.exception("closing agent %s failed", agent.agent_id)
