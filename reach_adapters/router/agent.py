"""The agent protocol, and `FunctionAgent` for plain Python callables."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import is_dataclass
from functools import partial
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from pydantic import BaseModel, JsonValue, TypeAdapter, ValidationError

from middleware import ReachMessage, ReachResult, ResultStatus, ensure_json
from middleware.fast import ZERO_TIMINGS, build_trusted
from reach_adapters.errors import InvalidDeclarationError, InvalidMessageError, describe_validation_error
from reach_adapters.router.capability import Capability, validate_capabilities
from reach_adapters.router.hops import current_hop
from reach_adapters.router.identity import parse_agent_id
from reach_adapters.router.outcomes import ErrorKind

__all__ = ["Agent", "CallStyle", "FunctionAgent", "close_agent", "input_required_result", "ok_result"]

logger = logging.getLogger(__name__)

CallStyle = Literal["kwargs", "payload", "message"]
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
    capabilities, one is derived from the function's name, docstring and signature.

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
        self._style: CallStyle = call_style or _call_style(fn)
        self._takes, self._requires = _keywords(fn) if self._style == "kwargs" else (None, _NONE)
        # Parameters before a "/" are passed by position: their names and defaults, in order.
        self._positional = _positional_only(fn) if self._style == "kwargs" else ()
        self._made = _made_arguments(fn) if self._style == "kwargs" else {}
        if capabilities is None:
            capabilities = [_derive_capability(fn, self._style)]
        self._capabilities = validate_capabilities(agent_id, capabilities)
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

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
            value = await self._in_thread(partial(self._fn, *args, **kwargs))
            if inspect.isawaitable(value):
                value = await value
        return ok_result(message, self._agent_id, ensure_json(value, where="output"))

    async def aclose(self) -> None:
        """Stop the thread pool; calls still queued are dropped, running ones finish on their own."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    async def _in_thread(self, call: Callable[[], Any]) -> Any:
        pool = self._pool
        if pool is None:
            workers = sum(cap.max_concurrency for cap in self._capabilities)
            pool = self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix=f"reach {self._agent_id}"
            )
        loop = asyncio.get_running_loop()
        work = pool.submit(contextvars.copy_context().run, call)
        try:
            return await asyncio.wrap_future(work, loop=loop)
        except asyncio.CancelledError:
            hop = current_hop()
            # A thread cannot be stopped: its slot stays taken until it ends, so a hung function
            # holds its own agent's capacity, not everyone's.
            if not work.done() and hop is not None:
                release = hop.linger()
                work.add_done_callback(lambda _: _call_on(loop, release))
            raise

    def _arguments(self, message: ReachMessage) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self._style == "message":
            return (message,), {}
        if self._style == "payload":
            return (message.raw_payload,), {}
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
                try:
                    made[name] = adapter.validate_python(made[name], strict=False)
                except ValidationError as exc:
                    msg = f"agent {self._agent_id}: argument {name!r}: {describe_validation_error(exc)}"
                    raise InvalidMessageError(msg) from None
        return made


def _by_position(
    payload: dict[str, Any], positional: tuple[tuple[str, Any], ...]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`payload` as positional arguments for the positional-only parameters (their defaults for
    those left out before one given) and keyword arguments for the rest."""
    names = [name for name, _ in positional]
    last = max((i for i, name in enumerate(names) if name in payload), default=-1)
    args = tuple(payload.get(name, default) for name, default in positional[: last + 1])
    return args, {key: value for key, value in payload.items() if key not in names}


def _call_on(loop: asyncio.AbstractEventLoop, release: Callable[[], None]) -> None:
    """Run `release` on `loop` from a worker thread; a loop already closed needs no release."""
    if not loop.is_closed():
        try:
            loop.call_soon_threadsafe(release)
        except RuntimeError:
            logger.debug("the router's loop closed before a stuck call ended")


def _made_arguments(fn: Callable[..., Any]) -> dict[str, TypeAdapter[Any]]:
    """A validator for each parameter whose annotation holds a pydantic model or a dataclass
    (``order: Order``, ``items: list[Item]``); other arguments pass as JSON gives them, untouched."""
    try:
        params = inspect.signature(fn, eval_str=True).parameters.values()
    except (NameError, TypeError, ValueError):
        return {}
    return {
        p.name: TypeAdapter(p.annotation)
        for p in params
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and _holds_model(p.annotation)
    }


def _holds_model(annotation: Any) -> bool:
    if isinstance(annotation, type) and (issubclass(annotation, BaseModel) or is_dataclass(annotation)):
        return True
    return any(_holds_model(arg) for arg in get_args(annotation))


def _keywords(fn: Callable[..., Any]) -> tuple[frozenset[str] | None, frozenset[str]]:
    """The keyword arguments `fn` takes (None: any, it has ``**kwargs``) and those it requires."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None, frozenset()
    named = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    takes = None if any(p.kind is p.VAR_KEYWORD for p in params) else frozenset(p.name for p in named)
    return takes, frozenset(p.name for p in named if p.default is p.empty) or _NONE


def _positional_only(fn: Callable[..., Any]) -> tuple[tuple[str, Any], ...]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple((p.name, p.default) for p in params if p.kind is p.POSITIONAL_ONLY)


def _call_style(fn: Callable[..., Any]) -> CallStyle:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return "payload"
    if len(params) == 1 and params[0].kind in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        only = params[0]
        if only.annotation in (ReachMessage, "ReachMessage") or only.name == "message":
            return "message"
        if only.name == "payload":
            return "payload"
    return "kwargs"


def _derive_capability(fn: Callable[..., Any], style: CallStyle) -> Capability:
    name = getattr(fn, "__name__", type(fn).__name__)
    description = inspect.getdoc(fn) or ""
    if style != "kwargs":
        # A function of the payload or message takes any payload: no schema of its own.
        return Capability(name=name, description=description)
    return Capability(name=name, description=description, input_schema=_signature_schema(fn))


def _signature_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The JSON Schema of a function's keyword arguments, through pydantic."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    defs: dict[str, Any] = {}
    try:
        signature = inspect.signature(fn, eval_str=True)
    except (NameError, TypeError):
        signature = inspect.signature(fn)
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = Any if param.annotation is param.empty else param.annotation
        try:
            described = TypeAdapter(annotation).json_schema()
        except Exception:  # noqa: BLE001 - an annotation pydantic cannot express accepts anything
            described = {}
        # A model holding models refers to their definitions from the schema's root, so they
        # move there; two parameters' unlike namesakes cannot share it, and take anything.
        own = described.pop("$defs", {})
        if any(defs.get(name, body) != body for name, body in own.items()):
            described, own = {}, {}
        defs.update(own)
        properties[param.name] = described
        if param.default is param.empty:
            required.append(param.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if defs:
        schema["$defs"] = defs
    if not any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        # Fields the function cannot take are the caller's mistake, found before delivery.
        schema["additionalProperties"] = False
    return schema


async def close_agent(agent: Agent) -> None:
    """Close an agent that holds something open (an MCP session, a server process); log, never
    raise, if closing fails, so one agent cannot keep the others from closing."""
    aclose = getattr(agent, "aclose", None)
    if callable(aclose):
        try:
            await aclose()
        except Exception:
            logger.exception("closing agent %s failed", agent.agent_id)
