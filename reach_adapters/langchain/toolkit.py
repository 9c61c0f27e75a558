"""`ReachToolkit`: hand the router to a LangChain agent as tools."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from langchain_core.tools import BaseTool, BaseToolkit
from pydantic import ConfigDict, ValidationError

from reach_adapters.errors import InvalidDeclarationError, describe_validation_error
from reach_adapters.langchain.tools import GENERIC_TOOL_NAME, CapabilityTool, ReachAnyTool
from reach_adapters.router.router import Router

__all__ = ["ReachToolkit"]

# What every common model provider accepts as a tool name: OpenAI's characters and length, and a
# first character Gemini accepts (it refuses a leading digit, which OpenAI allows).
_SAFE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


class ReachToolkit(BaseToolkit):
    """One tool per reachable capability, plus ``reach_agent`` to call any capability or agent id.

    Tools are built from the router's catalog each time `get_tools` is called, so agents
    registered later appear then. ``handle_tool_error`` (default True) makes routing failures
    come back to the model as error tool messages it can act on; set it False to have the
    `ToolException` raised instead.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    router: Router
    handle_tool_error: bool = True
    include_generic: bool = True

    def __init__(self, router: Router, /, **data: Any) -> None:
        if not isinstance(router, Router):
            msg = f"ReachToolkit needs a Router, got {type(router).__name__}"
            raise InvalidDeclarationError(msg)
        try:
            super().__init__(router=router, **data)
        except ValidationError as exc:
            msg = f"invalid ReachToolkit options: {describe_validation_error(exc)}"
            raise InvalidDeclarationError(msg) from None

    def get_tools(self) -> list[BaseTool]:
        reachable = self.router.reachable()
        tools: list[BaseTool] = []
        if self.include_generic:
            tools.append(
                ReachAnyTool.build(self.router, sorted(reachable), handle_tool_error=self.handle_tool_error)
            )
        names = _tool_names(reachable, reserved={GENERIC_TOOL_NAME} if self.include_generic else set())
        for name, capability in sorted(reachable.items()):
            tools.append(
                CapabilityTool.build(
                    self.router, capability, name=names[name], handle_tool_error=self.handle_tool_error
                )
            )
        return tools


def _tool_names(capabilities: Collection[str], *, reserved: set[str]) -> dict[str, str]:
    """A tool name for each capability, safe for model providers and unique among the toolkit's tools.

    A capability whose name is already safe keeps it, whatever else is registered; other names are
    made safe and, where that makes them meet a name already taken, numbered among themselves. So
    registering an agent never renames the tool of a capability with a safe name.
    """
    owned = {name for name in capabilities if _SAFE.fullmatch(name) and name not in reserved}
    taken = reserved | owned
    names = {name: name for name in owned}
    for capability in sorted(set(capabilities) - owned):
        names[capability] = tool_name = _unique(_safe(capability), taken)
        taken.add(tool_name)
    return names


def _safe(capability: str) -> str:
    name = _UNSAFE.sub("_", capability)
    # Capability names may start with a digit; Gemini tool names may not.
    if not (name[0].isalpha() or name[0] == "_"):
        name = "_" + name
    return name[:_MAX_NAME]


def _unique(base: str, taken: set[str]) -> str:
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"_{n}"
        name = base[: _MAX_NAME - len(suffix)] + suffix
    return name
