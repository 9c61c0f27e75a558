"""The schema of the *payload* the converter makes of a runnable's output.

A chat output (a message, a message list, a state with ``messages``) becomes the text of the
run's answer, so its schema is not the output's; an output that only may be chat-shaped (a loose
container) cannot be described at all. See `LangChainConverter.result_to_middleware`.
"""

from __future__ import annotations

from typing import Any

from reach_adapters.langchain.chat_schemas import MESSAGE_SCHEMA, lists_messages, with_message_schema

__all__ = ["payload_schema"]

# Keywords that say what an untyped schema's values are.
_TYPED_BY = ("$ref", "anyOf", "oneOf", "allOf", "enum", "const")


# The payload of a chat output: the text of the run's answer, None when the run added no AI
# message (a LangGraph interrupt, say).
_CHAT_TEXT: dict[str, Any] = {"type": ["string", "null"]}


def _is_chat_state(schema: dict[str, Any]) -> bool:
    """A schema (after `with_message_schema`) of a state with chat messages."""
    messages = schema.get("properties", {}).get("messages")
    return isinstance(messages, dict) and lists_messages(messages)


def payload_schema(schema: dict[str, Any] | None, *, whole: bool = False) -> dict[str, Any] | None:
    """The schema of the *payload* the converter makes of the output, when it is known.

    A chat output (a message, a message list, a dict with ``messages``) becomes the answer's
    text, so a schema that only may describe one (a loose container: ``dict``, ``Any``,
    ``dict[str, list]``, a list of anything or of dicts) cannot describe the payload. An output
    given `whole` (a pydantic model or a dataclass, messages and all) is its JSON form, which its
    own schema describes.
    """
    if not schema:
        return None
    schema = with_message_schema(schema)
    if whole:
        return schema
    if schema == MESSAGE_SCHEMA:
        return dict(_CHAT_TEXT)
    if lists_messages(schema):
        # An empty list holds no message to take the text of: it comes as it is.
        return {"anyOf": [dict(_CHAT_TEXT), {"type": "array", "maxItems": 0}]}
    if _is_chat_state(schema):
        if "structured_response" in schema["properties"]:
            # The payload is the structured response when there is one, else text: either may come.
            return None
        if "messages" in schema.get("required", ()):
            return dict(_CHAT_TEXT)
        # A state that may come back without messages (a TypedDict graph state whose
        # `messages` has no reducer, left unwritten) is given as its JSON: either may come.
        return {**schema, "type": ["object", *_CHAT_TEXT["type"]]}
    if _may_be_message(schema) or _may_be_messages(schema) or _may_be_state(schema):
        return None
    return schema


def _may_be_message(schema: Any) -> bool:
    """Whether a value `schema` declares may be a chat message: an object it says nothing of."""
    if not isinstance(schema, dict):
        return schema is True
    if schema == MESSAGE_SCHEMA or any(_may_be_message(option) for option in _options(schema)):
        return True
    loose_keys = schema.get("additionalProperties", True) in (True, {})
    return _may_be(schema, "object") and not schema.get("properties") and loose_keys


def _may_be_messages(schema: Any) -> bool:
    """Whether a value `schema` declares may be a list of chat messages."""
    if not isinstance(schema, dict):
        return schema is True
    if any(_may_be_messages(option) for option in _options(schema)):
        return True
    return _may_be(schema, "array") and _may_be_message(schema.get("items", {}))


def _may_be_state(schema: dict[str, Any]) -> bool:
    """Whether a value `schema` declares may be an object whose ``messages`` holds chat messages."""
    if any(_may_be_state(option) for option in _options(schema)):
        return True
    if not _may_be(schema, "object"):
        return False
    properties = schema.get("properties") or {}
    if "messages" in properties:
        return _may_be_messages(properties["messages"])
    # Other keys than a typed object names: only where it lets its extra keys hold anything.
    return _may_be_messages(schema.get("additionalProperties", not properties))


def _may_be(schema: dict[str, Any], kind: str) -> bool:
    """Whether `schema` itself allows values of JSON type `kind` (no type: any, unless a reference,
    its options or fixed values say what it is)."""
    if "type" not in schema:
        return not any(key in schema for key in _TYPED_BY)
    kinds = schema["type"]
    return "$ref" not in schema and (kind == kinds or (isinstance(kinds, list) and kind in kinds))


def _options(schema: dict[str, Any]) -> list[Any]:
    return [*(schema.get("anyOf") or ()), *(schema.get("oneOf") or ())]
