"""The router as LangChain tools: one per reachable capability, and one that reaches any agent.

Each tool checks its arguments against the schema before routing (LangChain does not check dict
schemas), answers with text for the model and the whole `ReachResult` as artifact, and turns any
routing failure into a `ToolException`, which an agent sees as an error it can recover from.
"""

from __future__ import annotations

import json
import logging
from abc import abstractmethod
from typing import Any, Literal

from langchain_core.tools import BaseTool, ToolException
from pydantic import Field, JsonValue, PrivateAttr

from middleware import ReachResult
from reach_adapters.errors import ReachError, SyncCallError
from reach_adapters.router.capability import Capability
from reach_adapters.router.router import Router
from reach_adapters.router.schemas import compiled_validator, first_error, schema_key, wrap_input

__all__ = ["GENERIC_TOOL_NAME", "CapabilityTool", "ReachAnyTool", "ReachTool"]

logger = logging.getLogger(__name__)

GENERIC_TOOL_NAME = "reach_agent"
_GENERIC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "target": {
            "type": "string",
            "minLength": 1,
            "description": (
                "A capability name, to reach the best agent offering it, or an agent id "
                "'namespace:type:instance', to reach that agent."
            ),
        },
        "payload": {"description": "The task for the agent, shaped as its capability's input schema."},
        "capability": {
            "type": "string",
            "minLength": 1,
            "description": (
                "With an agent id as target: which of the agent's capabilities to call. Needed when "
                "the agent declares several."
            ),
        },
    },
    "required": ["target"],
}

_GENERIC_KEY = schema_key(_GENERIC_SCHEMA)

# route or send, the capability or agent id, the payload, and for send the capability to call.
Request = tuple[Literal["route", "send"], str, JsonValue, str | None]
# How many capability names the generic tool lists in its description.
_LISTED = 50


class ReachTool(BaseTool):
    """What both kinds of reach tool share: argument checks, answers, errors."""

    router: Router = Field(exclude=True)
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"

    # The key of the compiled validator (cached by the core) for the arguments; None: unchecked.
    _schema_key: str | None = PrivateAttr(None)

    @abstractmethod
    def _request(self, arguments: dict[str, Any]) -> Request:
        """What to call: route or send, the capability or agent id, the payload, the capability
        of a directed call."""

    def _check(self, arguments: Any) -> None:
        if self._schema_key is None:
            return
        validator = compiled_validator(self._schema_key)
        if not validator.is_valid(arguments):
            msg = (
                f"invalid arguments for {self.name}: {first_error(validator, arguments)}; "
                "no agent was called, fix the arguments to match the tool's schema"
            )
            raise ToolException(msg)

    # LangChain refuses string input for dict schemas, so arguments always arrive by name. `self`
    # is positional-only so that any name, `self` included, can be an argument; and neither method
    # declares `run_manager` or a `RunnableConfig`, which LangChain would pass in place of the
    # model's arguments of those names.
    def _run(self, /, **arguments: Any) -> tuple[str, ReachResult]:
        mode, name, payload, capability = self._request(arguments)
        router = self.router
        try:
            if mode == "send":
                result = router.send_sync(name, payload, capability=capability)
            else:
                result = router.route_sync(name, payload)
        except SyncCallError:
            raise
        except ReachError as exc:
            raise self._failure(f"{type(exc).__name__}: {exc}") from exc
        return self._answer(result)

    async def _arun(self, /, **arguments: Any) -> tuple[str, ReachResult]:
        mode, name, payload, capability = self._request(arguments)
        router = self.router
        try:
            if mode == "send":
                result = await router.send(name, payload, capability=capability)
            else:
                result = await router.route(name, payload)
        except ReachError as exc:
            raise self._failure(f"{type(exc).__name__}: {exc}") from exc
        return self._answer(result)

    def _answer(self, result: ReachResult) -> tuple[str, ReachResult]:
        if not result.ok:
            raise self._failure(
                f"{result.status}: {result.error_type}: {result.error} (task {result.task_id})"
            )
        payload = result.payload
        text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
        return text, result

    def _failure(self, reason: str) -> ToolException:
        logger.info("tool %s failed: %s", self.name, reason)
        return ToolException(f"{self.name} failed: {reason}")


class CapabilityTool(ReachTool):
    """Reaches the best agent for one capability; its arguments are the capability's input.

    A capability whose input is not a JSON object (a string, say) takes it as the argument
    ``input``, since tool calls always carry an object.
    """

    capability: Capability = Field(exclude=True)
    wrapped: bool = False

    @classmethod
    def build(
        cls, router: Router, capability: Capability, *, name: str, handle_tool_error: bool
    ) -> CapabilityTool:
        schema = capability.input_schema
        wrapped = schema.get("type") != "object"
        args_schema = wrap_input(schema) if wrapped else schema
        tool = cls(
            router=router,
            capability=capability,
            wrapped=wrapped,
            name=name,
            description=capability.description or f"Reach an agent that can do '{capability.name}'.",
            args_schema=args_schema,
            handle_tool_error=handle_tool_error,
        )
        if wrapped or capability.checks_input:
            tool._schema_key = schema_key(args_schema)
        return tool

    def _request(self, arguments: dict[str, Any]) -> Request:
        self._check(arguments)
        payload: JsonValue = arguments.get("input") if self.wrapped else arguments
        return "route", self.capability.name, payload, None


class ReachAnyTool(ReachTool):
    """Reaches any agent: by capability name (best agent) or by agent id (that agent)."""

    @classmethod
    def build(cls, router: Router, capability_names: list[str], *, handle_tool_error: bool) -> ReachAnyTool:
        shown = ", ".join(capability_names[:_LISTED]) + (" ..." if len(capability_names) > _LISTED else "")
        tool = cls(
            router=router,
            name=GENERIC_TOOL_NAME,
            description=(
                "Call any reachable agent: give a capability name to reach the best agent for it, or "
                "an agent id to reach that agent (with the capability to call, if it has several), "
                "and the payload its input schema asks for. "
                f"Reachable capabilities: {shown or 'none yet'}."
            ),
            args_schema=_GENERIC_SCHEMA,
            handle_tool_error=handle_tool_error,
        )
        tool._schema_key = _GENERIC_KEY
        return tool

    def _request(self, arguments: dict[str, Any]) -> Request:
        self._check(arguments)
        target: str = arguments["target"]
        capability: str | None = arguments.get("capability")
        # Capability names cannot contain ':', agent ids always do.
        if ":" not in target:
            if capability is not None and capability != target:
                msg = (
                    f"invalid arguments for {self.name}: 'capability' goes with an agent id as target; "
                    f"to reach the best agent for {capability!r}, give it as the target"
                )
                raise ToolException(msg)
            return "route", target, arguments.get("payload"), None
        return "send", target, arguments.get("payload"), capability
