"""The router as an MCP server: one tool per reachable capability, every call routed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from mcp.server import Server
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import (
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
)
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    Icon,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    ServerCapabilities,
    SetLevelRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from middleware import ReachResult, ResultStatus
from reach_adapters.errors import InvalidDeclarationError, InvalidMessageError, ReachError
from reach_adapters.mcp.boxes import ANY_INPUT, BOXED, BOXED_INPUT, BOXED_OUTPUT, INPUT, RESULT, marked
from reach_adapters.mcp.consensus_tool import (
    call_consensus,
    consensus_answer,
    consensus_tool,
    consensus_tool_name,
)
from reach_adapters.mcp.consensus_tool import schema as consensus_schema
from reach_adapters.mcp.contents import Contents
from reach_adapters.mcp.converter import ASKED_META, READS_TASK, MCPConverter, meta_from_request
from reach_adapters.mcp.instructions import Instructions
from reach_adapters.mcp.notices import Notices, on_upstream_change
from reach_adapters.mcp.relay import Relay, relaying, serving, set_level
from reach_adapters.mcp.rounds import Exchanges
from reach_adapters.mcp.tools import ANNOTATION_TITLE, OWN_META
from reach_adapters.mcp.watches import Watches
from reach_adapters.router import Capability, Router, resumes, wrap_field
from reach_adapters.version import package_version

__all__ = ["RouterMCPServer", "request_principal"]


@dataclass(frozen=True, slots=True)
class _Served:
    tool: Tool
    # MCP arguments are always an object: a non-object input travels as the "input" argument.
    wrapped: bool
    # A non-object structured result travels as {"result": value}.
    boxed: bool = False
    # The capability takes any payload: a reach router's call may box a non-object one.
    any_input: bool = False


class RouterMCPServer:
    """Builds the SDK server that offers a router's capabilities as MCP tools.

    Serve `server` over any SDK transport, or hand it to ``mcp.Client`` in process; the
    upstream MCP servers' resources and prompts are served too (`Contents`). When the catalog
    changes, or an upstream's resources or prompts, clients are told (`Notices`): 2026-07-28
    clients on their ``subscriptions/listen`` stream, earlier ones with a
    ``notifications/.../list_changed`` on the connection.
    """

    def __init__(
        self,
        router: Router,
        *,
        name: str = "agent-reach",
        instructions: str | None = None,
        consensus_tool: bool = False,
        upstream_instructions: bool = True,
    ) -> None:
        """``instructions``: the operator's, which clients get first, before those of each
        upstream MCP server (`instructions.compose`) unless ``upstream_instructions`` is False
        (theirs are text a host puts in the model's context: an operator may not want it there).
        ``consensus_tool``: offer the router's consensus as a tool too (see `consensus_tool`)."""
        if not isinstance(router, Router):
            msg = f"RouterMCPServer serves a Router, got {type(router).__name__}"
            raise InvalidDeclarationError(msg)
        self.router = router
        self.consensus_tool = consensus_tool
        self._converter = MCPConverter()
        self._notices = Notices()
        self._listen = ListenHandler(self._notices.bus)
        # The upstream MCP servers' resources and prompts, served again to whoever may reach them.
        self._contents = contents = Contents(router, _principal, self._notices.seen)
        self._watches = Watches(contents, self._notices, self._listen)
        self.server: Server[Any] = _Server(
            name,
            version=package_version(),
            instructions=instructions,
            get_tool_input_schema=self._input_schema,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._watches.listen,
            on_subscribe_resource=self._watches.subscribe,
            on_unsubscribe_resource=self._watches.unsubscribe,
            on_list_resources=contents.list_resources,
            on_list_resource_templates=contents.list_resource_templates,
            on_read_resource=contents.read_resource,
            on_list_prompts=contents.list_prompts,
            on_get_prompt=contents.get_prompt,
            on_completion=contents.complete,
        )
        # Declares the `logging` capability too (the SDK derives it from this handler): the server
        # relays its upstreams' log messages. Not `on_set_logging_level=`, which warns that the
        # method is gone in 2026-07-28; the SDK refuses it on those sessions.
        self.server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
        # The upstreams' instructions follow the operator's, for the tools each client may reach;
        # without them the SDK serves the operator's alone, and no request passes a middleware.
        self.instructions = Instructions(router, instructions, _principal) if upstream_instructions else None
        if self.instructions is not None:
            self.server.middleware.append(self.instructions)
        self._served: dict[str, _Served] | None = None
        self._exchanges = Exchanges()
        self._unsubscribe = router.on_catalog_change(self._catalog_changed)
        self._unheard = on_upstream_change(self._upstream_changed)
        # What the servers registered already offer, as those registered later (`_catalog_changed`).
        self._notices.soon(contents.learn())

    def close(self) -> None:
        """Stop following the catalog and the upstreams, and end open change streams."""
        self._unsubscribe()
        self._unheard()
        self._listen.close()
        self._exchanges.close()

    # -- handlers ----------------------------------------------------------------------------

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        """One tool's input schema, for the SDK's header checks of 2026 calls: without it the SDK
        runs the whole ``tools/list`` handler on every call to find it."""
        served = self._served_as(name)
        if served is None and name == self._consensus_name():
            return consensus_schema()
        return None if served is None else served.tool.input_schema

    def _served_as(self, name: str) -> _Served | None:
        """The tool `name` stands for: a reachable capability, or one declared by agents that are
        down for now (the router says why, or waits for one that is reconnecting)."""
        served = self._catalog().get(name)
        if served is None:
            declared = self.router.declarations().get(name)
            return None if declared is None else _serve(declared)
        return served

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        self._notices.seen(ctx)
        served = self._catalog()
        principal = _principal(ctx)
        if principal is not None and self.router.guard is not None:
            # Each principal sees the tools it may reach, and no others.
            visible = self.router.reachable(principal=principal)
            tools = [served[name].tool for name in served if name in visible]
        else:
            tools = [entry.tool for entry in served.values()]
        consensus = self._consensus_name()
        if consensus is not None:
            tools.append(consensus_tool(consensus))
        return ListToolsResult(tools=tools)

    def _consensus_name(self) -> str | None:
        """The consensus tool's name now, clear of every capability's; None when not offered."""
        if not self.consensus_tool:
            return None
        # Every declared name, usable now or not (the tools offered are among them).
        return consensus_tool_name(self.router.declarations())

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        served = self._served_as(params.name)
        if served is not None:
            dispatch = partial(self._dispatch, ctx, params, served)
        elif params.name == self._consensus_name():
            # Served as a capability's call is: the request's `_meta` goes to the voters, and what
            # their upstreams say during the call reaches the caller.
            dispatch = partial(self._consensus, ctx, params)
        else:
            msg = f"Unknown tool: {params.name!r}; list the tools to see what this router reaches"
            raise MCPError(INVALID_PARAMS, msg)
        try:
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                outcome = await self._exchanges.serve(ctx, params, dispatch)
                if isinstance(outcome, InputRequiredResult):
                    return outcome
                result = outcome
            else:
                relay = Relay(ctx)
                try:
                    with relaying(relay):
                        result = await dispatch()
                finally:
                    if relay.asking:
                        # Questions still open at the caller are withdrawn while its request's
                        # stream can carry the notice.
                        await relay.end()
        except InvalidMessageError as exc:
            return self._converter.refused(exc)
        except ReachError as exc:
            text = f"{type(exc).__name__}: {exc}"
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        answer = self._converter.result_from_middleware(result)
        # A link to a resource is read from the server that gave it (`Contents.owners`).
        self._contents.note_links(answer.content, result.agent_id)
        if served is None:
            return consensus_answer(result, answer)
        if served.boxed and result.ok:
            # Boxed whatever the value: the schema's may be an object only sometimes (a model or null).
            answer.structured_content = {RESULT: result.payload}
            answer.meta = {**(answer.meta or {}), BOXED: True}
        elif result.status is ResultStatus.INPUT_REQUIRED and served.tool.output_schema is not None:
            # A question is no output of the tool's schema, and clients check every result that is
            # not an error against it: this one goes as an error, its `_meta` saying what it is.
            answer.structured_content = None
            answer.is_error = True
            answer.meta = {**(answer.meta or {}), ASKED_META: result.payload}
        return answer

    async def _dispatch(
        self, ctx: ServerRequestContext[Any], params: CallToolRequestParams, served: _Served
    ) -> ReachResult:
        sent = cast("Mapping[str, Any] | None", ctx.meta)
        meta = meta_from_request(sent, params.name)
        meta.principal = _principal(ctx)
        message = self._converter.to_middleware(params.arguments, meta)
        if served.wrapped or (served.any_input and marked(sent, BOXED_INPUT)):
            message.raw_payload = _unboxed(message.raw_payload, params.name, resumes(message))
        serving(meta.task_id)
        return await self.router.dispatch(message)

    async def _consensus(self, ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> ReachResult:
        arguments = params.arguments or {}
        capability = arguments.get("capability")
        meta = meta_from_request(
            cast("Mapping[str, Any] | None", ctx.meta), capability if isinstance(capability, str) else None
        )
        meta.principal = _principal(ctx)
        serving(meta.task_id)
        return await call_consensus(self.router, arguments, meta)

    # -- the tool list and its changes -------------------------------------------------------

    def _catalog(self) -> dict[str, _Served]:
        served = self._served
        if served is None:
            served = self._served = {name: _serve(cap) for name, cap in self.router.reachable().items()}
        return served

    def _catalog_changed(self) -> None:
        # Called from whichever thread changed the catalog. An MCP server that came, went or
        # reconnected may have brought or taken resources and prompts too.
        self._served = None
        if self.instructions is not None:
            self.instructions.forget()
        self._notices.changed("tools", "resources", "prompts")
        self._notices.soon(self._contents.learn())

    def _upstream_changed(self, agent_id: str, event: ServerEvent) -> None:
        if self.router.agent(agent_id) is None:
            return
        if isinstance(event, ResourceUpdated):
            self._watches.updated(event.uri)
        elif isinstance(event, ResourcesListChanged):
            self._contents.changed(agent_id)
            self._notices.changed("resources")
        elif isinstance(event, PromptsListChanged):
            self._notices.changed("prompts")


class _Server(Server[Any]):
    """Advertises ``listChanged`` of tools, resources and prompts to handshake-era clients,
    whatever transport runs it, and
    to every client that it reads the task a reach router carries in `_meta` (`READS_TASK`);
    ``logging`` comes with the ``logging/setLevel`` handler (`RouterMCPServer`)."""

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> ServerCapabilities:
        experimental = {**(experimental_capabilities or {}), READS_TASK: {}}
        return super().get_capabilities(
            notification_options, experimental, extensions, protocol_version=protocol_version
        )

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options
            or NotificationOptions(tools_changed=True, prompts_changed=True, resources_changed=True),
            experimental_capabilities,
            extensions,
        )


def request_principal(scope: Mapping[str, Any] | None) -> str | None:
    """The principal authenticated for an HTTP request (its ASGI `scope`): the MCP SDK's
    authenticated user, as the gateway's security.yaml sets it; None without one."""
    user = None if scope is None else scope.get("user")
    return user.access_token.client_id if isinstance(user, AuthenticatedUser) else None


def _principal(ctx: ServerRequestContext[Any]) -> str | None:
    """Who makes this MCP request: None over stdio, or when the server runs without security."""
    return request_principal(getattr(ctx.request, "scope", None))


def _serve(capability: Capability) -> _Served:
    schema = capability.input_schema
    wrapped = bool(schema) and schema.get("type") != "object"
    if wrapped:
        # Exactly the one argument: `_unboxed` refuses any other, which the schema says too.
        schema = {**wrap_field(INPUT, schema), "additionalProperties": False}
    elif not schema:
        schema = {"type": "object"}
    output = capability.output_schema
    # MCP structured results are objects: a non-object one travels as {"result": value}, as the
    # SDK's own servers do, so its schema is kept.
    boxed = output is not None and output.get("type") != "object"
    if boxed:
        output = wrap_field(RESULT, output or {}, title=f"{capability.name}Output")
    meta, hinted = _annotation_title(capability)
    # For a reach router calling this one, which takes the boxes off again (the SDK's result box
    # is known by its shape, which a capability's own name need not fit: ``CountOutput``).
    if wrapped:
        meta = {**meta, BOXED_INPUT: True}
    any_input = not capability.checks_input and not capability.object_only
    if any_input:
        meta = {**meta, ANY_INPUT: True}
    if boxed:
        meta = {**meta, BOXED_OUTPUT: True}
    tool = Tool(
        name=capability.name,
        title=capability.title,
        description=capability.description or None,
        input_schema=schema,
        output_schema=output,
        annotations=ToolAnnotations(
            title=hinted,
            read_only_hint=capability.read_only,
            destructive_hint=_destructive_hint(capability),
            idempotent_hint=capability.idempotent,
            open_world_hint=capability.open_world,
        ),
        icons=[Icon.model_validate(icon) for icon in capability.icons] or None,
        _meta=meta or None,
    )
    return _Served(tool, wrapped, boxed, any_input)


def _unboxed(arguments: Any, tool: str, resuming: bool = False) -> Any:
    """The input a boxed call carries. Its arguments are exactly ``{"input": value}``: any other
    shape is the caller's mistake, not a missing input that a nullable one would take as null.
    An answer to an agent's question (`resuming`) is no input: it may come with none."""
    if isinstance(arguments, dict) and arguments.keys() == {INPUT}:
        return arguments[INPUT]
    if resuming and not arguments:
        return None
    got = sorted(arguments) if isinstance(arguments, dict) else type(arguments).__name__
    msg = f"tool {tool!r} takes its input as the one argument {INPUT!r}, got the arguments {got}"
    raise InvalidMessageError(msg)


def _destructive_hint(capability: Capability) -> bool | None:
    """The tool's ``destructiveHint``: left out (MCP then assumes destructive) for a capability
    that may write and never said whether it destroys; ``destructive`` defaults to false, and
    serving that default would tell clients, who may ask before a destructive call, it does not."""
    return capability.destructive if capability.says_destructive() else None


def _annotation_title(capability: Capability) -> tuple[dict[str, Any], str | None]:
    """The tool's `_meta`, and the title of its annotations: an upstream MCP tool's own (kept in
    the capability's meta), else the capability's title, for clients that read only that one."""
    # The boxes this router makes are its own to mark (`_serve`), whatever the capability's meta says.
    meta = {key: value for key, value in capability.meta.items() if key not in OWN_META}
    hinted = capability.meta.get(ANNOTATION_TITLE)
    return meta, capability.title if hinted is None else str(hinted)
