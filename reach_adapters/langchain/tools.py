"""The router as LangChain tools: one per reachable capability, and one that reaches any agent.

Each tool checks its arguments against the schema before routing (LangChain does not check dict
schemas), answers with text for the model and the whole `ReachResult` as artifact, and turns any
routing failure into a `ToolException`, which an agent sees as an error it can recover from; the
`ReachResult` of a failed call is kept as the error message's artifact too.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool, ToolException
from pydantic import Field, JsonValue, PrivateAttr

from middleware import Fault, ReachResult, ResultStatus
from middleware.errors import error_for
from reach_adapters.errors import InvalidMessageError, ReachError, SyncCallError
from reach_adapters.langchain.artifacts import as_artifact, refused_artifact
from reach_adapters.langchain.asking import asking_text, tool_text
from reach_adapters.langchain.config import thread_of
from reach_adapters.langchain.model_schemas import shown_to_models
from reach_adapters.langchain.nested_nulls import Nulls, without_nulls
from reach_adapters.router import Capability, Router, compiled_validator, first_error, schema_key, wrap_field

__all__ = [
    "GENERIC_TOOL_NAME",
    "CapabilityTool",
    "ReachAnyTool",
    "ReachTool",
    "ReachToolError",
    "RoutedCall",
    "called_thread",
]

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
        # Optional arguments take null too: strict function calling makes a model send them all.
        "capability": {
            "anyOf": [{"type": "string", "minLength": 1}, {"type": "null"}],
            "description": (
                "With an agent id as target: which of the agent's capabilities to call. Needed when "
                "the agent declares several."
            ),
        },
        "resume": {
            "description": (
                "The answer to an agent that said it needs input: send it to the same agent id "
                "(target), and it goes on where it stopped. Leave it null otherwise."
            ),
        },
    },
    "required": ["target"],
}

_GENERIC_KEY = schema_key(_GENERIC_SCHEMA)

# How many capability names the generic tool lists in its description.
_LISTED = 50

# The results of the failed calls of the tool call running now, for the error message's artifact.
_FAILED: ContextVar[list[ReachResult] | None] = ContextVar("agent_reach_failed_calls", default=None)


def called_thread(caller_thread: str, capability: str) -> str:
    """The thread a reach tool gives the agent it calls: one conversation per calling thread and
    capability called (``alice`` calling ``refund`` -> ``alice/refund``).

    Not the caller's own thread: a sub-agent sharing the caller's checkpointer would run on the
    caller's checkpoint, as LangGraph gives a subgraph a namespace of its own only when it runs
    inside the calling graph, which a routed agent does not. Stable across the caller's turns, so
    a resume through ``reach_agent`` finds the thread its question was asked on. Parallel calls
    of one turn share it too, and a checkpointed agent refuses all but the first while it runs
    (`reach_adapters.langchain.turns`), rather than give one a thread a resume would not find.
    """
    return f"{caller_thread}/{capability}"


@dataclass(frozen=True, slots=True)
class RoutedCall:
    """What one tool call asks of the router; `conversation` is the capability whose thread a
    call continues (default: the target, a capability name)."""

    mode: Literal["route", "send"]
    target: str
    payload: JsonValue
    capability: str | None = None
    resume: JsonValue = None
    resumes: bool = False
    namespace: str | None = None
    principal: str | None = None
    conversation: str | None = None

    def options(self) -> dict[str, Any]:
        """The call options: the capability of a directed call, the answer it resumes with, and
        a thread derived from the calling run's (`called_thread`), so a checkpointed agent keeps
        one conversation per calling thread and capability."""
        options: dict[str, Any] = {}
        if self.capability is not None:
            options["capability"] = self.capability
        if self.resumes:
            options["resume"] = self.resume
        if self.namespace is not None:
            options["namespace"] = self.namespace
        if self.principal is not None:
            options["principal"] = self.principal
        thread = thread_of(var_child_runnable_config.get())
        if thread is not None:
            options["configurable"] = {"thread_id": called_thread(thread, self.conversation or self.target)}
        return options


class ReachToolError(ToolException):
    """A reach tool could not make its call, or the call failed: a `ToolException`, which an
    agent's model sees as an error it can recover from, but not one a tool reports of its task
    (`policy`): the agent's mistake as a caller, or the failure of what it called."""


class ReachTool(BaseTool):
    """What both kinds of reach tool share: argument checks, answers, errors."""

    router: Router = Field(exclude=True)
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    # Whom the calls are made for, under the router's guard, and the namespace that calls by
    # capability name keep to (see ReachToolkit): `namespace`, or, for a toolkit keeping to
    # several, `home`'s choice for the capability (`_namespace_of`).
    principal: str | None = None
    namespace: str | None = None
    home: Callable[[str], str | None] | None = Field(None, exclude=True)
    # Why a target is outside what the toolkit offers (its filters), else None; the tools that can
    # reach more than one capability are held to it (`_hold`).
    refuse: Callable[[str, str | None], str | None] | None = Field(None, exclude=True)
    # The tool among the model's that answers an agent asking for input (it takes `resume`), or
    # None when the model has none: then the tool text says so rather than name a missing tool.
    resume_with: str | None = None

    # The key of the compiled validator (cached by the core) for the arguments; None: unchecked.
    _schema_key: str | None = PrivateAttr(None)

    @abstractmethod
    def _request(self, arguments: dict[str, Any]) -> RoutedCall:
        """What to call, checked."""

    def _namespace_of(self, capability: str) -> str | None:
        return self.namespace if self.home is None else self.home(capability)

    def _hold(self, target: str, capability: str | None = None) -> None:
        """Refuse a target outside the toolkit's filters, naming why."""
        refused = None if self.refuse is None else self.refuse(target, capability)
        if refused is not None:
            msg = f"{self.name} may not reach {target!r}: {refused}"
            raise _refusal(msg, ResultStatus.REJECTED, "PermissionDeniedError")

    def _check(self, arguments: Any) -> None:
        if self._schema_key is None:
            return
        validator = compiled_validator(self._schema_key)
        if not validator.is_valid(arguments):
            msg = (
                f"invalid arguments for {self.name}: {first_error(validator, arguments)}; "
                "no agent was called, fix the arguments to match the tool's schema"
            )
            raise _refusal(msg, error_type=self._refused_as(arguments))

    def _refused_as(self, arguments: Any) -> str:
        """The error type of `arguments` the schema refuses: the tool's own arguments."""
        return "InvalidMessageError"

    def invoke(
        self,
        input: str | dict[str, Any] | ToolCall,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        with _failures() as failed:
            output = super().invoke(input, config, **kwargs)
        return _with_artifact(output, failed)

    async def ainvoke(
        self,
        input: str | dict[str, Any] | ToolCall,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        with _failures() as failed:
            output = await super().ainvoke(input, config, **kwargs)
        return _with_artifact(output, failed)

    # LangChain refuses string input for dict schemas, so arguments always arrive by name. `self`
    # is positional-only so that any name, `self` included, can be an argument; and neither method
    # declares `run_manager` or a `RunnableConfig`, which LangChain would pass in place of the
    # model's arguments of those names.
    def _run(self, /, **arguments: Any) -> tuple[str, ReachResult]:
        call = self._request(arguments)
        try:
            result = self._reach_sync(call)
        except SyncCallError:
            raise
        except ReachError as exc:
            raise self._refused(exc) from exc
        return self._answer(as_artifact(result))

    async def _arun(self, /, **arguments: Any) -> tuple[str, ReachResult]:
        call = self._request(arguments)
        try:
            result = await self._reach(call)
        except ReachError as exc:
            raise self._refused(exc) from exc
        return self._answer(as_artifact(result))

    def _reach_sync(self, call: RoutedCall) -> ReachResult:
        """Make `call` from sync code: the router method a tool calls (see `_reach`)."""
        if call.mode == "send":
            return self.router.send_sync(call.target, call.payload, **call.options())
        return self.router.route_sync(call.target, call.payload, **call.options())

    async def _reach(self, call: RoutedCall) -> ReachResult:
        """Make `call`: a route or a send; a tool asking more of the router replaces both."""
        if call.mode == "send":
            return await self.router.send(call.target, call.payload, **call.options())
        return await self.router.route(call.target, call.payload, **call.options())

    def _answer(self, result: ReachResult) -> tuple[str, ReachResult]:
        if result.status is ResultStatus.INPUT_REQUIRED:
            # Not a failure: tell the model what the agent asks, and how to answer it.
            return asking_text(result, self.resume_with), result
        if not result.ok:
            _keep_failed(result)
            # Its cause carries the result: an agent that lets it through is judged as the caller
            # of a failed call (the called agent's failure is not its own).
            raise self._failure(
                f"{result.status}: {result.error_type}: {result.error} (task {result.task_id})"
            ) from error_for(result)
        return tool_text(result.payload), result

    def _failure(self, reason: str) -> ReachToolError:
        logger.info("tool %s failed: %s", self.name, reason)
        return ReachToolError(f"{self.name} failed: {reason}")

    def _refused(self, exc: ReachError) -> ReachToolError:
        """The router refused the call before making a task of it (its options, or the router
        closed): the caller's mistake when the call was invalid, else the router's."""
        if isinstance(exc, InvalidMessageError):
            refused = refused_artifact(str(exc), ResultStatus.INVALID, type(exc).__name__, Fault.CALLER)
        else:
            refused = refused_artifact(str(exc), ResultStatus.ERROR, type(exc).__name__, Fault.ROUTER)
        _keep_failed(refused)
        return self._failure(f"{type(exc).__name__}: {exc}")


@contextmanager
def _failures() -> Iterator[list[ReachResult]]:
    """Collect the results of the failed calls of one tool call (see `ReachTool._answer`)."""
    failed: list[ReachResult] = []
    token = _FAILED.set(failed)
    try:
        yield failed
    finally:
        _FAILED.reset(token)


def _keep_failed(result: ReachResult) -> None:
    """Keep a failed call's result for its error message's artifact (see `_with_artifact`)."""
    failed = _FAILED.get()
    if failed is not None:
        failed.append(result)


def _refusal(
    msg: str, status: ResultStatus = ResultStatus.INVALID, error_type: str = "InvalidMessageError"
) -> ReachToolError:
    """The tool's own refusal of a call (bad arguments, a target outside its filters), the
    caller's mistake, its result kept for the error message's artifact."""
    _keep_failed(refused_artifact(msg, status, error_type, Fault.CALLER))
    return ReachToolError(msg)


def _with_artifact(output: Any, failed: list[ReachResult]) -> Any:
    """The error message of a failed call, with the call's `ReachResult` as its artifact."""
    if failed and isinstance(output, ToolMessage) and output.status == "error" and output.artifact is None:
        output.artifact = failed[-1]
    return output


class CapabilityTool(ReachTool):
    """Reaches the best agent for one capability; its arguments are the capability's input.

    A capability whose input is not a JSON object (a string, say) takes it as the argument
    ``input``, since tool calls always carry an object.
    """

    capability: Capability = Field(exclude=True)
    wrapped: bool = False

    # Where models are shown optional properties as nullable, whose null means "not given".
    _nullable: Nulls | None = PrivateAttr(None)

    @classmethod
    def build(
        cls,
        router: Router,
        capability: Capability,
        *,
        name: str,
        handle_tool_error: bool,
        namespace: str | None = None,
        home: Callable[[str], str | None] | None = None,
        principal: str | None = None,
        resume_with: str | None = None,
    ) -> CapabilityTool:
        schema = capability.input_schema
        wrapped = schema.get("type") != "object"
        args_schema = wrap_field("input", schema) if wrapped else schema
        shown, nullable = shown_to_models(args_schema)
        tool = cls(
            router=router,
            capability=capability,
            wrapped=wrapped,
            name=name,
            description=capability.description or f"Reach an agent that can do '{capability.name}'.",
            args_schema=shown,
            handle_tool_error=handle_tool_error,
            namespace=namespace,
            home=home,
            principal=principal,
            resume_with=resume_with,
        )
        if wrapped or capability.checks_input:
            tool._schema_key = schema_key(args_schema)
        tool._nullable = nullable
        return tool

    def _refused_as(self, arguments: Any) -> str:
        """The payload's, as the router says of the same payload; but a missing ``input`` is the
        tool's own argument, which the router never sees (it may take any payload)."""
        if self.wrapped and "input" not in arguments:
            return "InvalidMessageError"
        return "PayloadValidationError"

    def _request(self, arguments: dict[str, Any]) -> RoutedCall:
        if self._nullable is not None:
            arguments = without_nulls(arguments, self._nullable)
        self._check(arguments)
        payload: JsonValue = arguments.get("input") if self.wrapped else arguments
        name = self.capability.name
        namespace = self._namespace_of(name)
        return RoutedCall("route", name, payload, namespace=namespace, principal=self.principal)


class ReachAnyTool(ReachTool):
    """Reaches any agent: by capability name (best agent) or by agent id (that agent); targets
    are held to the toolkit's filters (`refuse`)."""

    @classmethod
    def build(
        cls,
        router: Router,
        capability_names: list[str],
        *,
        handle_tool_error: bool,
        refuse: Callable[[str, str | None], str | None] | None = None,
        namespace: str | None = None,
        home: Callable[[str], str | None] | None = None,
        principal: str | None = None,
    ) -> ReachAnyTool:
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
            refuse=refuse,
            namespace=namespace,
            home=home,
            principal=principal,
            resume_with=GENERIC_TOOL_NAME,
        )
        tool._schema_key = _GENERIC_KEY
        return tool

    def _request(self, arguments: dict[str, Any]) -> RoutedCall:
        self._check(arguments)
        target: str = arguments["target"]
        capability: str | None = arguments.get("capability")
        # null is "no answer": a strict-mode model sends every argument.
        resumes = arguments.get("resume") is not None
        # Capability names cannot contain ':', agent ids always do.
        if ":" not in target:
            if capability is not None and capability != target:
                msg = (
                    f"invalid arguments for {self.name}: 'capability' goes with an agent id as target; "
                    f"to reach the best agent for {capability!r}, give it as the target"
                )
                raise _refusal(msg)
            mode: Literal["route", "send"] = "route"
            capability = None
            namespace = self._namespace_of(target)
        else:
            mode = "send"
            namespace = None
        resume = arguments.get("resume")
        call = RoutedCall(
            mode,
            target,
            arguments.get("payload"),
            capability,
            resume,
            resumes,
            namespace,
            self.principal,
            conversation=capability or (self._sole_capability(target) if mode == "send" else None),
        )
        self._hold(call.target, call.capability)
        return call

    def _sole_capability(self, agent_id: str) -> str | None:
        """The one capability `agent_id` declares, else None: a call naming only the agent (a
        resume, most often) continues the conversation a call by that capability began."""
        declared = [
            cap.name
            for info in self.router.catalog(principal=self.principal)
            if info.agent_id == agent_id
            for cap in info.capabilities
        ]
        return declared[0] if len(declared) == 1 else None
