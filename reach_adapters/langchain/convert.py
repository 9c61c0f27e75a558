"""`LangChainConverter`: a runnable's native input and output to and from the intermediate format.

Inputs arrive as JSON; role/content dicts in a list (at the top level, or as a value of the
payload object, e.g. ``{"messages": [...]}``) become `BaseMessage` objects, since every chat
runnable accepts those. Outputs leave as JSON; for chat outputs (a message, a message list, or a
state with ``messages``) the text of the last AI message the run added is the payload (None when
it added none) and the whole output is kept in ``result.extra["output"]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage
from pydantic import BaseModel, JsonValue, RootModel, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from middleware import MetaInfo, NotJsonSafeError, ReachMessage, ReachResult, ensure_json, is_json
from reach_adapters.errors import InvalidMessageError, describe_validation_error
from reach_adapters.langchain.graph_input import GraphInput
from reach_adapters.langchain.graphs import INTERRUPT_KEY, interrupts
from reach_adapters.langchain.messages import (
    final_text,
    is_message_dict,
    is_message_list,
    message_from_dict,
    message_to_dict,
    messages_input,
    run_messages,
)
from reach_adapters.langchain.review import review_json_schema
from reach_adapters.router import input_required_result, ok_result

__all__ = ["ChunkConverter", "LangChainConverter", "interrupted_result", "to_json"]


def interrupted_result(asked: list[Any], message: ReachMessage, state: Any = None) -> ReachResult:
    """The ``input_required`` result of a graph stopped at ``interrupt()``: the payload is what it
    asks (the interrupt's value, or a list of them); `extra` has each interrupt's id and value,
    its ``response_schema`` when it has one, and the graph's `state` so far when there is one."""
    values = [to_json(getattr(item, "value", item), where="interrupt") for item in asked]
    extra: dict[str, JsonValue] = {
        "interrupts": [_interrupt_entry(item, value) for item, value in zip(asked, values, strict=True)]
    }
    if state is not None:
        extra["output"] = to_json(state, where="output")
    return input_required_result(message, None, values[0] if len(values) == 1 else values, extra=extra)


def _interrupt_entry(item: Any, value: JsonValue) -> dict[str, JsonValue]:
    """One interrupt as the result shows it. Its ``response_schema`` (HumanInTheLoopMiddleware
    puts the decisions it allows there) is kept: the answer must match it, so the one answering
    must see it."""
    entry: dict[str, JsonValue] = {"id": str(getattr(item, "id", "")), "value": value}
    schema = getattr(item, "response_schema", None)
    if schema is None:
        # A batched HumanInTheLoopMiddleware interrupt gives none; the answer it takes is known
        # (see `review`), and the adapter checks it before LangGraph saves it.
        schema = review_json_schema(getattr(item, "value", None))
    # LangGraph surfaces it as JSON Schema, a dict, whatever type the graph gave.
    if isinstance(schema, dict):
        entry["response_schema"] = to_json(schema, where="interrupt.response_schema")
    return entry


@runtime_checkable
class ChunkConverter(Protocol):
    """A converter that also turns one streamed chunk into JSON (see `LangChainAgent.astream`)."""

    def chunk_to_middleware(self, chunk: Any, message: ReachMessage) -> JsonValue: ...


_LEAVES = frozenset({str, int, float, bool, type(None)})


def to_json(value: Any, *, where: str) -> JsonValue:
    """`value` as JSON data, chat messages in their role/content form; raises `NotJsonSafeError`."""
    if is_json(value):
        # Most outputs: nothing to convert, and no copy to make.
        return value
    return ensure_json(_with_message_dicts(value), where=where)


def _with_message_dicts(value: Any, streamed: bool = False) -> Any:
    kind = type(value)
    # Exact types first: this runs on every output, and isinstance on pydantic classes is slow.
    if kind in _LEAVES:
        return value
    if kind is dict:
        return {key: _with_message_dicts(item, streamed) for key, item in value.items()}
    if kind is list:
        return [_with_message_dicts(item, streamed) for item in value]
    if isinstance(value, BaseMessage):
        return _with_message_dicts(message_to_dict(value, streamed=streamed))
    if isinstance(value, dict):
        return {key: _with_message_dicts(item, streamed) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_with_message_dicts(item, streamed) for item in value]
    if isinstance(value, BaseModel):
        return _model_with_message_dicts(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # asdict() would copy the messages as they are, to be dumped in LangChain's own form.
        return {
            field.name: _with_message_dicts(getattr(value, field.name)) for field in dataclasses.fields(value)
        }
    if isinstance(value, BaseException):
        # An error a runnable answers with as data (`with_structured_output(include_raw=True)`'s
        # ``parsing_error``): said as it would be raised.
        return f"{type(value).__name__}: {value}"
    return value


def _model_with_message_dicts(model: BaseModel) -> Any:
    """`model` dumped, except that the fields holding messages have them as role/content dicts.

    A plain dump gives LangChain's ``{"type": ...}`` form, which the derived schemas (a prompt's
    ChatPromptValue, say) do not describe; the dump is kept for the rest, as it knows how the
    model serialises its own fields (dates, aliases, excluded fields, custom serializers...).
    """
    if isinstance(model, RootModel):
        root = model.root
        return (
            to_jsonable_python(_with_message_dicts(root))
            if _holds_message(root)
            else model.model_dump(mode="json")
        )
    dumped: dict[str, Any] = model.model_dump(mode="json")
    serialized = {
        name
        for decorator in type(model).__pydantic_decorators__.field_serializers.values()
        for name in decorator.info.fields
    }
    for name in _field_names(model):
        if name in dumped and name not in serialized:
            item = getattr(model, name)
            if _holds_message(item):
                # Messages become dicts here; whatever else the field holds (dates, UUIDs...)
                # gets pydantic's JSON form, as in the dump.
                dumped[name] = to_jsonable_python(_with_message_dicts(item))
    return dumped


def _holds_message(value: Any) -> bool:
    if isinstance(value, BaseMessage):
        return True
    if isinstance(value, dict):
        return any(_holds_message(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_message(item) for item in value)
    if isinstance(value, BaseModel):
        return any(_holds_message(getattr(value, name)) for name in _field_names(value))
    return False


def _field_names(model: BaseModel) -> tuple[str, ...]:
    return (*type(model).model_fields, *(model.model_extra or {}))


def _chat_messages(value: Any) -> list[BaseMessage] | None:
    """The messages of a chat output, or None when `value` is not one."""
    if isinstance(value, dict):
        messages = value.get("messages")
        if isinstance(messages, list) and all(isinstance(item, BaseMessage) for item in messages):
            return messages
        return None
    if isinstance(value, list):
        return value if value and all(isinstance(item, BaseMessage) for item in value) else None
    return [value] if isinstance(value, BaseMessage) else None


def _from_json(value: JsonValue, *, single: bool, where: str) -> Any:
    if single and is_message_dict(value):
        return message_from_dict(value, where=where)
    if is_message_list(value):
        return [message_from_dict(item, where=f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict) and any(
        type(item) is list and is_message_list(item) for item in value.values()
    ):
        return {
            key: _from_json(item, single=False, where=f"{where}.{key}") if isinstance(item, list) else item
            for key, item in value.items()
        }
    return value


class LangChainConverter:
    """The default converter of `LangChainAgent`; subclass it to change one direction only.

    `plain_fields` says where the runnable's input declares something other than chat messages:
    the names of such top-level fields, ``""`` for the input itself, ``"*"`` for every key of an
    input object. Lists of role/content
    dicts stay as they are there, and become `BaseMessage` objects anywhere else (where the
    schema wants messages, or says nothing). `message_fields` names the top-level fields that
    LangGraph's ``add_messages`` reduces: all it reads there (one message dict too, and pairs)
    becomes messages, and what LangChain cannot read is an `InvalidMessageError` naming the
    field. `one_message` says that the input is one chat message (a runnable typed
    ``f(m: HumanMessage)``): a message dict becomes that message. `input_type` is the model the
    runnable is typed to take, made of the payload, or a graph's `GraphInput`, which only checks
    it. `LangChainAgent` sets them all from the runnable (see `derive.input_type`).
    """

    def __init__(
        self,
        *,
        plain_fields: frozenset[str] = frozenset(),
        message_fields: frozenset[str] = frozenset(),
        one_message: bool = False,
        input_type: TypeAdapter[Any] | GraphInput | None = None,
        message_keys: frozenset[str] = frozenset(),
    ) -> None:
        self.plain_fields = plain_fields
        self.message_fields = message_fields
        self.one_message = one_message
        self.input_type = input_type
        self.message_keys = message_keys

    def to_middleware(self, native: Any, meta: MetaInfo | None = None) -> ReachMessage:
        """A message carrying `native` (str, dict, messages, pydantic models...) as JSON."""
        try:
            raw = to_json(native, where="input")
        except NotJsonSafeError as exc:
            msg = f"cannot send this input: {exc}"
            raise InvalidMessageError(msg) from None
        return ReachMessage(raw_payload=raw, meta_info=meta or MetaInfo())

    def from_middleware(self, message: ReachMessage) -> Any:
        """The runnable's input: the payload, with role/content message lists as `BaseMessage`,
        made the runnable's input model when it is typed to take one (checked against a graph's,
        which the graph makes itself)."""
        native = self._from_payload(message)
        if native is message.raw_payload and isinstance(native, dict | list):
            # A run may change its input in place (LangChain's `with_fallbacks(exception_key=...)`
            # adds the error to it): a retry of the task, on a replica, gets the task as sent.
            native = native.copy()
        made = self.input_type
        if made is None:
            return native
        keys = self.message_keys
        if keys and isinstance(native, dict):
            # A message field in the role/content form, which the type's own union of message
            # classes cannot tell apart.
            native = {
                key: message_from_dict(item, where=f"payload.{key}")
                if key in keys and isinstance(item, Mapping)
                else item
                for key, item in native.items()
            }
        if isinstance(made, GraphInput):
            # A graph builds its state itself, from the dict; only what its model refuses is
            # refused here, before the run, as the caller's.
            made.check(native)
            return native
        try:
            # Not strict: JSON carries a datetime or an enum member as text.
            return made.validate_python(native, strict=False)
        except ValidationError as exc:
            # What the router's check of the schema let through, the type may still refuse (its
            # validators): the caller's payload, not the runnable's failure.
            problem = describe_validation_error(exc)
            msg = f"payload does not make the input the runnable is typed to take: {problem}"
            raise InvalidMessageError(msg) from None

    def _from_payload(self, message: ReachMessage) -> Any:
        plain = self.plain_fields
        payload = message.raw_payload
        if self.one_message and isinstance(payload, Mapping):
            # What LangChain cannot read is the caller's mistake, named here, not an
            # AttributeError in the runnable counted against it.
            return message_from_dict(payload, where="payload")
        if self.message_fields and isinstance(payload, dict) and self.message_fields & payload.keys():
            # All that LangGraph's add_messages reads, one message dict too, made messages here,
            # where a message LangChain cannot read is the caller's mistake, not the graph's.
            payload = {
                key: messages_input(item, where=f"payload.{key}") if key in self.message_fields else item
                for key, item in payload.items()
            }
        if not plain:
            return _from_json(payload, single=False, where="payload")
        if isinstance(payload, dict):
            if "*" in plain:
                return payload
            return {
                key: item
                if key in plain or type(item) is not list
                else _from_json(item, single=False, where=f"payload.{key}")
                for key, item in payload.items()
            }
        return payload if "" in plain else _from_json(payload, single=False, where="payload")

    def result_to_middleware(self, native: Any, message: ReachMessage) -> ReachResult:
        """An ok result for the runnable's output; raises `NotJsonSafeError` naming what has no JSON.

        A graph that stopped at ``interrupt()`` gives an ``input_required`` result instead: the
        payload is what it asks (the interrupt's value, or a list of them).
        """
        asked = interrupts(native)
        if asked is not None:
            state = {key: value for key, value in native.items() if key != INTERRUPT_KEY}
            return interrupted_result(asked, message, state)
        extra: dict[str, JsonValue] = {}
        if isinstance(native, str):
            payload: JsonValue = str.__str__(native)
        else:
            output = to_json(native, where="output")
            messages = _chat_messages(native)
            if messages is None:
                payload = output
            else:
                extra["output"] = output
                structured = output.get("structured_response") if isinstance(output, Mapping) else None
                # A create_agent agent with a response_format answers with that, not with prose.
                if structured is not None:
                    payload = structured
                elif isinstance(native, BaseMessage):
                    payload = final_text(messages)
                else:
                    # A state or history holds the caller's messages too; only the run's own
                    # answer this task, not an earlier turn's.
                    payload = final_text(run_messages(messages, message.raw_payload))
        # The agent id is the agent's to stamp: a converter does not know it.
        return ok_result(message, None, payload, extra=extra)

    def result_from_middleware(self, result: ReachResult) -> Any:
        """The native output back: the whole chat output when it was kept, else the payload."""
        if "output" in result.extra:
            return _from_json(result.extra["output"], single=True, where="output")
        return _from_json(result.payload, single=False, where="payload")

    def chunk_to_middleware(self, chunk: Any, message: ReachMessage) -> JsonValue:
        """A message chunk as its text (tokens), unless it carries part of a tool call: then the
        chunk as a message dict with its ``tool_call_chunks``. Anything else as JSON, messages
        inside included (a LangGraph ``stream_mode`` gives tuples and states)."""
        if isinstance(chunk, BaseMessage):
            if getattr(chunk, "tool_call_chunks", None):
                return to_json(message_to_dict(chunk, streamed=True), where="chunk")
            return str(chunk.text)
        if is_json(chunk):
            return chunk
        return ensure_json(_with_message_dicts(chunk, streamed=True), where="chunk")
