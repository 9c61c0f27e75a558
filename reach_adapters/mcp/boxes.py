"""The boxes MCP makes a reach router put non-object values in, and the marks that say so.

MCP tools take and give JSON objects only: a capability whose input is not an object is served
taking it as the one argument ``input``, and a non-object result travels as ``{"result": value}``.
A capability that takes any payload is served taking an object, its arguments being the payload,
as plain clients expect; a reach router sends it anything else as ``{"input": value}``, saying so
in the request's `_meta`.
`RouterMCPServer` marks each box it makes (in the tool's `_meta`, or the result's), so a reach
router calling it (`MCPServerAgent`) takes them off again: a capability one hop away takes and
gives what it does locally.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reach_adapters.router import META_PREFIX

__all__ = ["ANY_INPUT", "BOXED", "BOXED_INPUT", "BOXED_OUTPUT", "INPUT", "RESULT", "TOOL_MARKS", "marked"]

# The argument a non-object input travels in, and the field of a non-object result's box.
INPUT = "input"
RESULT = "result"
# In a tool's `_meta`: its arguments are {"input": value}, its output schema {"result": schema}.
# In a request's `_meta`, to a tool marked `ANY_INPUT`: this call's arguments are {"input": value}.
BOXED_INPUT = META_PREFIX + "boxed-input"
BOXED_OUTPUT = META_PREFIX + "boxed-output"
# In a tool's `_meta`: its capability takes any payload, not only the object its schema shows.
ANY_INPUT = META_PREFIX + "any-input"
# In a result's `_meta`: its structured content is {"result": value} (a tool with no output
# schema has no other way to say so).
BOXED = META_PREFIX + "boxed"
# The tool marks describe the tool as one router serves it: each router writes its own.
TOOL_MARKS = (BOXED_INPUT, BOXED_OUTPUT, ANY_INPUT)


def marked(meta: Mapping[str, Any] | None, mark: str) -> bool:
    """Whether a tool's or a result's `_meta` carries `mark`."""
    return meta is not None and meta.get(mark) is True
