"""`ReachToolkit`: hand the router to a LangChain agent as tools."""

from __future__ import annotations

import re
from typing import Any

from langchain_core.tools import BaseTool, BaseToolkit
from pydantic import ConfigDict, ValidationError

from reach_adapters.errors import InvalidDeclarationError, describe_validation_error
from reach_adapters.langchain.tools import GENERIC_TOOL_NAME, CapabilityTool, ReachAnyTool
from reach_adapters.router.router import Router

__all__ = ["ReachToolkit"]

# What model providers accept as a tool name (OpenAI's rule, the strictest common one).
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
        taken: set[str] = set()
        if self.include_generic:
            tools.append(
                ReachAnyTool.build(self.router, sorted(reachable), handle_tool_error=self.handle_tool_error)
            )
            taken.add(GENERIC_TOOL_NAME)
        for name, capability in sorted(reachable.items()):
            tool_name = _tool_name(name, taken)
            taken.add(tool_name)
            tools.append(
                CapabilityTool.build(
                    self.router, capability, name=tool_name, handle_tool_error=self.handle_tool_error
                )
            )
        return tools


def _tool_name(capability: str, taken: set[str]) -> str:
    """The capability name made safe for model providers, unique among the toolkit's tools."""
    base = _UNSAFE.sub("_", capability)[:_MAX_NAME]
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"_{n}"
        name = base[: _MAX_NAME - len(suffix)] + suffix
    return name
