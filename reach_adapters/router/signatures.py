"""What a function's signature tells `FunctionAgent`: how it takes the payload, the capability
it declares when it is given none, and which arguments are made into models."""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Callable
from dataclasses import is_dataclass
from functools import partial
from types import SimpleNamespace
from typing import Any, Literal, get_args, get_type_hints

from pydantic import BaseModel, TypeAdapter

from middleware import ReachMessage
from reach_adapters.router.capability import Capability

__all__ = [
    "CallStyle",
    "derive_capability",
    "input_schema",
    "keywords",
    "made_arguments",
    "payload_type",
    "positional_only",
    "read_parameters",
    "style_of",
]

logger = logging.getLogger(__name__)

CallStyle = Literal["kwargs", "payload", "message"]
_NONE: frozenset[str] = frozenset()


def style_of(fn: Callable[..., Any]) -> CallStyle:
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


def derive_capability(
    fn: Callable[..., Any], style: CallStyle, params: list[inspect.Parameter]
) -> Capability:
    """The capability of a function given none: its name, docstring and `input_schema`."""
    name = getattr(fn, "__name__", type(fn).__name__)
    description = inspect.getdoc(fn) or ""
    schema = input_schema(style, params)
    if schema is None:
        return Capability(name=name, description=description)
    return Capability(name=name, description=description, input_schema=schema)


def input_schema(style: CallStyle, params: list[inspect.Parameter]) -> dict[str, Any] | None:
    """What a function of `params` takes, as a JSON Schema; None when it takes anything.

    A function of the whole message takes any payload. A ``payload`` function takes its
    annotation (``payload: str``): declaring it lets the router refuse anything else as the
    caller's mistake, and lets tools show it. Otherwise the keyword arguments are an object's.
    """
    if style == "message":
        return None
    if style == "payload":
        return _payload_schema(params)
    return _signature_schema(params)


def read_parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    """`fn`'s parameters, their annotations evaluated in `fn`'s module, one by one, nested
    forward references (``list["Order"]``) included: one that cannot be evaluated (a name imported
    for type checkers only) takes anything and leaves the others typed. None for a callable
    without a signature. Read once per agent: evaluating an annotation runs its code."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    scope = _scope(fn)
    return [p.replace(annotation=_evaluated(p.annotation, scope, fn)) for p in params]


def _scope(fn: Callable[..., Any]) -> dict[str, Any]:
    """The names `fn`'s annotations were written among: the module of the function whose
    signature it is (a partial's function, a callable object's ``__call__``, a class's
    ``__init__``, inherited ones included), else of its class."""
    target = inspect.unwrap(fn)
    while isinstance(target, partial):
        target = inspect.unwrap(target.func)
    written: Any = target
    if isinstance(target, type):
        init = getattr(target, "__init__", None)
        written = init if init is not object.__init__ else target.__new__
    elif not inspect.isroutine(target):
        written = type(target).__call__
    scope = getattr(inspect.unwrap(written), "__globals__", None)
    if isinstance(scope, dict):
        return scope
    module = sys.modules.get(getattr(target, "__module__", None) or type(target).__module__)
    return vars(module) if module is not None else {}


def _evaluated(annotation: Any, scope: dict[str, Any], fn: Callable[..., Any]) -> Any:
    """An annotation evaluated in the function's module, as ``typing.get_type_hints`` would (and
    with it any text nested in it, which pydantic would otherwise look up in this module)."""
    if annotation is inspect.Parameter.empty:
        return annotation
    holder = SimpleNamespace(__annotations__={"annotation": annotation})
    try:
        # Locals of their own: `typing` caches some annotations (``Optional["Order"]``) across
        # modules and, were they the globals, would keep the first module's answer for all.
        return get_type_hints(holder, globalns=scope, localns={}, include_extras=True)["annotation"]
    except Exception as exc:  # noqa: BLE001 - evaluating an annotation runs any code it holds
        logger.debug("an annotation of %r takes anything, as it cannot be evaluated: %r", fn, exc)
        return Any


def _payload_parameter(params: list[inspect.Parameter]) -> inspect.Parameter | None:
    """The parameter a ``payload`` call passes the payload to: the first, unless it gathers
    several (``*args``, ``**kwargs``)."""
    if not params or params[0].kind in (params[0].VAR_POSITIONAL, params[0].VAR_KEYWORD):
        return None
    return params[0]


def _described(annotation: Any) -> dict[str, Any] | None:
    """pydantic's JSON Schema of an annotation; None for one that takes anything: none, ``Any``,
    ``object``, or one pydantic cannot express."""
    if annotation in (inspect.Parameter.empty, Any, object):
        return None
    try:
        return TypeAdapter(annotation).json_schema() or None
    except Exception:  # noqa: BLE001 - an annotation pydantic cannot express accepts anything
        return None


def _payload_schema(params: list[inspect.Parameter]) -> dict[str, Any] | None:
    """The JSON Schema of a ``payload`` parameter's annotation, None when it takes anything. A
    recursive model's (a root ``$ref``) is its definition, so that it reads as the object it is."""
    param = _payload_parameter(params)
    if param is None:
        return None
    schema = _described(param.annotation)
    if schema is None or set(schema) != {"$ref", "$defs"}:
        return schema
    defs = schema["$defs"]
    target = defs.get(str(schema["$ref"]).removeprefix("#/$defs/"))
    if isinstance(target, dict) and target.get("type") == "object":
        return {**target, "$defs": defs}
    return schema


def _signature_schema(params: list[inspect.Parameter]) -> dict[str, Any]:
    """The JSON Schema of a function's keyword arguments, through pydantic."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    defs: dict[str, Any] = {}
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        described = _described(param.annotation) or {}
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
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        # Fields the function cannot take are the caller's mistake, found before delivery.
        schema["additionalProperties"] = False
    return schema


def made_arguments(params: list[inspect.Parameter]) -> dict[str, TypeAdapter[Any]]:
    """A validator for each parameter whose annotation holds a pydantic model or a dataclass
    (``order: Order``, ``items: list[Item]``); other arguments pass as JSON gives them, untouched."""
    return {
        p.name: TypeAdapter(p.annotation)
        for p in params
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and _holds_model(p.annotation)
    }


def payload_type(params: list[inspect.Parameter]) -> TypeAdapter[Any] | None:
    """A validator for a ``payload`` parameter annotated with a model or a dataclass, else None."""
    param = _payload_parameter(params)
    return TypeAdapter(param.annotation) if param is not None and _holds_model(param.annotation) else None


def _holds_model(annotation: Any) -> bool:
    if isinstance(annotation, type) and (issubclass(annotation, BaseModel) or is_dataclass(annotation)):
        return True
    return any(_holds_model(arg) for arg in get_args(annotation))


def keywords(fn: Callable[..., Any]) -> tuple[frozenset[str] | None, frozenset[str]]:
    """The keyword arguments `fn` takes (None: any, it has ``**kwargs``) and those it requires."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None, frozenset()
    named = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    takes = None if any(p.kind is p.VAR_KEYWORD for p in params) else frozenset(p.name for p in named)
    return takes, frozenset(p.name for p in named if p.default is p.empty) or _NONE


def positional_only(fn: Callable[..., Any]) -> tuple[tuple[str, Any], ...]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple((p.name, p.default) for p in params if p.kind is p.POSITIONAL_ONLY)
