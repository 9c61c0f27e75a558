"""What a call's ``configurable`` may hold, checked wherever a `MetaInfo` is made from input.

``configurable`` is the caller's: every surface (Python, HTTP, MCP ``_meta``, A2A metadata)
passes it on to the agent's run. Two things in it are not the caller's to give, and an agent
handed them fails as if it were at fault (two such calls quarantine a healthy agent):

- keys starting with ``__``, which frameworks keep for their own machinery (LangGraph's
  ``__pregel_checkpointer``, ``__pregel_send``...): a caller setting one replaces the running
  graph's internals;
- a ``thread_id`` that is no id: LangGraph takes a string (a UUID among them) or an integer, and
  the router makes it the principal's own thread by writing it into a string.

Both are refused as the caller's mistake (``invalid``) before anything is routed.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, JsonValue
from pydantic_core import PydanticCustomError

__all__ = ["RESERVED_PREFIX", "Configurable", "check_configurable"]

RESERVED_PREFIX = "__"


def check_configurable(value: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """`value`, once no key is reserved and its ``thread_id`` (if any) is an id."""
    for key in value:
        if key.startswith(RESERVED_PREFIX):
            raise PydanticCustomError(
                "configurable_reserved_key",
                "key {key} is reserved for the framework running the agent (keys starting with "
                "'__', such as LangGraph's '__pregel_*' internals): leave it out",
                {"key": repr(key)},
            )
    thread = value.get("thread_id")
    if thread is not None and (isinstance(thread, bool) or not isinstance(thread, str | int)):
        raise PydanticCustomError(
            "configurable_thread_id",
            "thread_id must be a string (a UUID, say) or an integer, got {kind}",
            {"kind": type(thread).__name__},
        )
    return value


# The type of `MetaInfo.configurable`: checked once, when the model is made from input.
Configurable = Annotated[dict[str, JsonValue], AfterValidator(check_configurable)]
