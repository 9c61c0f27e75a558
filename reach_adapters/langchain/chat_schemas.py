"""Where JSON Schemas describe chat messages: one role/content message schema, which inputs take
messages, and the schema of the payload a chat output becomes.

LangChain describes chat messages with one JSON Schema per message class under ``oneOf``, which
rejects the plain role/content dicts that LangChain itself accepts (they match several classes
at once). Those parts are replaced by one role/content message schema, which is also what the
converter turns into messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import JsonValue

from reach_adapters.langchain.messages import DUMP_TYPES, ROLES

__all__ = [
    "DEFS",
    "MESSAGE_SCHEMA",
    "MODEL_MESSAGE_SCHEMA",
    "chat_input",
    "lists_messages",
    "message_fields",
    "message_keys",
    "model_message_list",
    "one_message",
    "plain_fields",
    "text_to_chat",
    "with_message_schema",
    "without_prompt_values",
]

# What models are shown of a message (`for_models`): the role/content form only, which strict
# function calling can describe (every property required).
MODEL_MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A chat message: role is user, assistant, system or tool.",
    "properties": {
        "role": {"type": "string", "enum": list(ROLES)},
        # Text: what a model writes in a tool call. Content blocks (objects of any shape) have no
        # form OpenAI's strict mode takes, which wants every object's properties listed.
        "content": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["role", "content"],
    "additionalProperties": False,
}
# What callers may send: the role/content form, or LangChain's own dump form with a "type" in
# place of the role (`message.model_dump()`), which the converter reads as well; a `ChatMessage`
# (type "chat") carries a role of its own choosing, as the converter gives it back. Content is
# text, content blocks (text or objects; every array declares its items), or null as in OpenAI's
# assistant message with tool calls, which LangChain reads as "".
MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A chat message: role is user, assistant, system or tool (or LangChain's type).",
    "properties": {
        "role": {"type": "string"},
        "content": {
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "object"}]}},
                {"type": "null"},
            ]
        },
        "type": {"enum": [*DUMP_TYPES, "chat"]},
    },
    "required": ["content"],
    "anyOf": [{"required": ["role"]}, {"required": ["type"]}],
    "if": {"properties": {"type": {"const": "chat"}}, "required": ["type"]},
    "then": {"required": ["role"]},
    "else": {"properties": {"role": {"enum": list(ROLES)}}},
}
# A message as LangGraph's `add_messages` also reads it: a [role, content] pair (the tuples of
# LangGraph's docs, as JSON).
_MESSAGE_PAIR: dict[str, Any] = {
    "type": "array",
    "prefixItems": [{"enum": list(ROLES)}, MODEL_MESSAGE_SCHEMA["properties"]["content"]],
    "minItems": 2,
    "maxItems": 2,
}
# An item of what `add_messages` reads: a message dict or a pair. if/then/else rather than anyOf,
# so that a wrong role is refused as such ("field 'messages.0.role': ..."), not as "no option".
_CHAT_ITEM: dict[str, Any] = {
    "type": ["object", "array"],
    "if": {"type": "object"},
    "then": MESSAGE_SCHEMA,
    "else": _MESSAGE_PAIR,
}
# What a list of chat messages may hold: message dicts, or also pairs where `add_messages` reads it.
_MESSAGE_ITEMS = (MESSAGE_SCHEMA, _CHAT_ITEM)

# The $defs LangChain's schemas give messages, which the role/content form replaces.
_MESSAGE_DEFS = frozenset(
    {
        "AIMessage",
        "AIMessageChunk",
        "BaseMessage",
        "ChatMessage",
        "ChatMessageChunk",
        "FunctionMessage",
        "FunctionMessageChunk",
        "HumanMessage",
        "HumanMessageChunk",
        "RemoveMessage",
        "SystemMessage",
        "SystemMessageChunk",
        "ToolMessage",
        "ToolMessageChunk",
    }
)
# Where the refs of LangChain's schemas point.
DEFS = "#/$defs/"
# LangChain's prompt values, which a language model's input offers as objects besides strings
# and messages.
_PROMPT_VALUES = frozenset(
    {"PromptValue", "StringPromptValue", "ChatPromptValue", "ChatPromptValueConcrete", "ImagePromptValue"}
)
# What LangChain's schemas say of a value of any type.
_LOOSE: tuple[dict[str, Any], ...] = ({}, {"type": "object"})


def with_message_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with LangChain's message schemas replaced by `MESSAGE_SCHEMA`, unused $defs dropped."""
    if _is_message_class(schema):
        # A runnable typed on one message (`f(q: str) -> AIMessage`): the root is the message
        # class itself, no $ref into $defs, and its title is all that names it.
        return dict(MESSAGE_SCHEMA)
    # A generated title and an explicit "any extra keys" constrain nothing, but would make the
    # router check every payload against an otherwise open schema.
    schema = {key: value for key, value in schema.items() if key != "title"}
    if schema.get("additionalProperties") is True:
        del schema["additionalProperties"]
    defs: dict[str, Any] = schema.pop("$defs", {})
    messages = {name for name, body in defs.items() if _is_message_class({"title": name, **body})}
    refs = {DEFS + name for name in messages}
    if not refs:
        if defs:
            schema["$defs"] = defs
        return schema
    out: dict[str, Any] = _replace(schema, refs)
    kept = {name: _replace(body, refs) for name, body in defs.items() if name not in messages}
    used: set[str] = set()
    pending = _refs(out)
    while pending:
        name = pending.pop().removeprefix(DEFS)
        if name in kept and name not in used:
            used.add(name)
            pending |= _refs(kept[name])
    if used:
        out["$defs"] = {name: kept[name] for name in sorted(used)}
    return out


def _is_message_class(schema: dict[str, Any]) -> bool:
    """Whether `schema` is the schema LangChain gives of a message class (`AIMessage`,
    `BaseMessage`...): that title, and the fields every message has, LangChain's own included (a
    model of one's own may well be called ``ChatMessage`` and have a content and a type)."""
    properties = schema.get("properties")
    return (
        schema.get("title") in _MESSAGE_DEFS
        and isinstance(properties, dict)
        and properties.keys() >= _MESSAGE_FIELDS
    )


_MESSAGE_FIELDS = frozenset({"content", "type", "additional_kwargs", "response_metadata"})


def message_keys(schema: dict[str, Any]) -> frozenset[str]:
    """The top-level fields of an input schema (after `with_message_schema`) that take one chat
    message (a model's ``m: AnyMessage`` field), which the converter makes a message."""
    properties = schema.get("properties", {})
    return frozenset(name for name, field in properties.items() if field == MESSAGE_SCHEMA)


def one_message(schema: dict[str, Any]) -> bool:
    """Whether an input schema (after `with_message_schema`) takes one chat message, which the
    converter makes a message (a runnable typed ``f(m: HumanMessage)`` reads its fields)."""
    return schema == MESSAGE_SCHEMA


def without_prompt_values(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """`schema` without the prompt-value options of its unions (a language model's input is a
    string, messages or a `PromptValue`), and their $defs once unused. The converter never builds
    a prompt value, so such a payload would reach the model as a dict, which it refuses: the
    caller's mistake would count as the agent's failure."""
    defs = schema.get("$defs") if schema else None
    if schema is None or not isinstance(defs, dict) or not _PROMPT_VALUES & defs.keys():
        return schema
    out: dict[str, Any] = _without_options(schema, {DEFS + name for name in _PROMPT_VALUES})
    kept: dict[str, Any] = out.pop("$defs")
    used = _refs(out).union(*(_refs(body) for name, body in kept.items() if name not in _PROMPT_VALUES))
    out["$defs"] = {
        name: body for name, body in kept.items() if name not in _PROMPT_VALUES or DEFS + name in used
    }
    return out


def _without_options(node: Any, refs: set[str]) -> Any:
    """`node` with the union options that point to `refs` left out (a union left with one option
    is that option); a union of nothing else stays as it is."""
    if isinstance(node, list):
        return [_without_options(item, refs) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _without_options(value, refs) for key, value in node.items()}
    for key in ("anyOf", "oneOf"):
        options = out.get(key)
        if not isinstance(options, list):
            continue
        kept = [option for option in options if not (isinstance(option, dict) and option.get("$ref") in refs)]
        if kept and len(kept) < len(options):
            del out[key]
            if len(kept) == 1:
                out.update(kept[0])
            else:
                out[key] = kept
    return out


def chat_input(said: dict[str, Any]) -> dict[str, Any]:
    """The input schema of a key LangGraph's `add_messages` reduces, with what `said` says of it
    (title, description): what `add_messages` reads, a list of message dicts and [role, content]
    pairs, one message dict, or a string (a user message). Each keyword applies to its own type."""
    return {
        **said,
        "type": ["array", "object", "string"],
        "items": dict(_CHAT_ITEM),
        "if": {"type": "object"},
        "then": dict(MESSAGE_SCHEMA),
    }


def message_fields(schema: dict[str, Any]) -> frozenset[str]:
    """The top-level fields of an input schema that take what `add_messages` reads
    (`chat_input`): a list, one message or a string, all of it made messages by the converter."""
    properties = schema.get("properties", {})
    return frozenset(
        name
        for name, field in properties.items()
        if isinstance(field, dict) and field.get("items") == _CHAT_ITEM
    )


def model_message_list(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The plain message list models are shown for a `chat_input` schema (the other forms add
    nothing a model needs, and strict function calling takes no type lists), else None."""
    if schema.get("items") != _CHAT_ITEM:
        return None
    said: dict[str, Any] = {key: schema[key] for key in ("title", "description") if key in schema}
    return {**said, "type": "array", "items": dict(MESSAGE_SCHEMA)}


def text_to_chat(schema: dict[str, Any]) -> Callable[[str], JsonValue] | None:
    """How a plain text task becomes the input of a chat agent with this input schema (a message
    list, or a state with ``messages``), as one user message; None when it takes no such input."""
    if schema.get("items") == MESSAGE_SCHEMA:
        return lambda text: [{"role": "user", "content": text}]
    messages = schema.get("properties", {}).get("messages")
    if schema.get("type") == "object" and isinstance(messages, dict) and lists_messages(messages):
        return lambda text: {"messages": [{"role": "user", "content": text}]}
    return None


def plain_fields(schema: dict[str, Any]) -> frozenset[str]:
    """Where an input schema (after `with_message_schema`) declares something other than chat
    messages: the names of such top-level fields, ``""`` when it so declares the input itself,
    and ``"*"`` when it so declares every key of an input object (a ``dict``, or
    ``dict[str, list[dict]]`` through ``additionalProperties``). Role/content dicts stay as they
    are there; anywhere else they become messages."""
    if schema == {}:
        return frozenset()
    found = set()
    if schema.get("type") != "object" and not _takes_messages(schema):
        found.add("")
    properties = schema.get("properties", {})
    for name, field in properties.items():
        if isinstance(field, dict) and field not in _LOOSE and not _takes_messages(field):
            found.add(name)
    extra = schema.get("additionalProperties")
    plain_extra = isinstance(extra, dict) and extra not in _LOOSE and not _takes_messages(extra)
    if found >= properties.keys() and (schema == {"type": "object"} or plain_extra):
        found.add("*")
    return frozenset(found)


def lists_messages(schema: dict[str, Any]) -> bool:
    """Whether `schema` is a list of chat messages (message dicts, or also pairs)."""
    return schema.get("items") in _MESSAGE_ITEMS


def _takes_messages(schema: dict[str, Any]) -> bool:
    if schema == MESSAGE_SCHEMA or lists_messages(schema):
        return True
    options = schema.get("anyOf") or schema.get("oneOf") or []
    return any(isinstance(option, dict) and _takes_messages(option) for option in options)


def _replace(node: Any, refs: set[str]) -> Any:
    if isinstance(node, dict):
        if node.get("$ref") in refs:
            return dict(MESSAGE_SCHEMA)
        for key in ("oneOf", "anyOf"):
            options = node.get(key)
            if (
                isinstance(options, list)
                and options
                and all(isinstance(o, dict) and o.get("$ref") in refs for o in options)
            ):
                return dict(MESSAGE_SCHEMA)
        return {key: _replace(value, refs) for key, value in node.items()}
    if isinstance(node, list):
        return [_replace(item, refs) for item in node]
    return node


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        for value in node.values():
            found |= _refs(value)
        return found
    if isinstance(node, list):
        return set().union(*(_refs(item) for item in node))
    return set()
