"""The files of a configuration directory, as typed models: the routing policy and one per agent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from reach_adapters.a2a.options import A2AOptions
from reach_adapters.config.registry import RegistrySettings
from reach_adapters.errors import InvalidDeclarationError
from reach_adapters.mcp.options import MCPOptions, agent_id_problem, url_problem
from reach_adapters.router.agent import CallStyle
from reach_adapters.router.capability import Capability
from reach_adapters.router.chains import Chain, Step
from reach_adapters.router.chains.agent import CHAIN_NAMESPACE
from reach_adapters.router.identity import parse_agent_id
from reach_adapters.router.policy import RoutingPolicy

__all__ = [
    "AGENT_KINDS",
    "A2AAgentFile",
    "AgentFile",
    "AgentFileModel",
    "CapabilityDecl",
    "CapabilityPatch",
    "ChainFile",
    "FunctionAgentFile",
    "LangChainAgentFile",
    "MCPAgentFile",
    "PolicyFile",
]

EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=256)]
ImportPath = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$",
        description="'module:attribute', importable from the app directory (reach --app-dir).",
        examples=["my_agents.support:refund_graph"],
    ),
]

# Twins keep the core's fields and constraints in one place (see `twins`); type checkers see
# plain models, which is all the code below relies on.
if TYPE_CHECKING:
    CapabilityDecl = BaseModel
    CapabilityPatch = BaseModel

    class PolicyFile(BaseModel):
        registry: RegistrySettings | None
else:
    from reach_adapters.config.twins import plain_model

    CapabilityDecl = plain_model(Capability)
    CapabilityPatch = plain_model(
        Capability,
        name="CapabilityOverride",
        exclude={"name"},
        optional=True,
        doc="Fields laid over a capability's declaration; the capability keeps its name.",
    )
    # The policy file also holds `registry`, which `reach serve` reads and the router does not.
    PolicyFile = create_model(
        "RoutingPolicy",
        __base__=plain_model(RoutingPolicy),
        __doc__=RoutingPolicy.__doc__,
        registry=(
            RegistrySettings | None,
            Field(None, description="The cluster reach serve joins as a node (docs/cluster.md)."),
        ),
    )


def _one_authorization(cls: type[BaseModel], value: str | None, info: ValidationInfo) -> str | None:
    """``bearer_token_env`` and an Authorization header in ``headers`` would both set it."""
    headers = info.data.get("headers") or {}
    if value is not None and "authorization" in {name.lower() for name in headers}:
        msg = "give the Authorization header in 'headers' or 'bearer_token_env', not both"
        raise ValueError(msg)
    return value


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _DeclaredAgent(_File):
    """An agent built in this process from a Python object, declaring its own capabilities."""

    agent_id: str = Field(
        description="'namespace:type:instance'; the file is named after it.", examples=["support:refund:01"]
    )
    capabilities: list[CapabilityDecl] | None = Field(
        None, description="Full declarations; without them one is derived from the object."
    )
    overrides: dict[str, CapabilityPatch] = Field(
        default_factory=dict, description="Per capability name: fields laid over its declaration."
    )

    @field_validator("agent_id")
    @classmethod
    def _agent_id(cls, value: str) -> str:
        try:
            parse_agent_id(value)
        except InvalidDeclarationError as exc:
            raise ValueError(str(exc)) from None
        return value


class LangChainAgentFile(_DeclaredAgent):
    """A LangChain Runnable, or a zero-argument factory returning one (``LangChainAgent``)."""

    kind: Literal["langchain"]
    runnable: ImportPath


class FunctionAgentFile(_DeclaredAgent):
    """A Python callable (``FunctionAgent``)."""

    kind: Literal["function"]
    function: ImportPath
    call_style: CallStyle | None = Field(
        None, description="How the payload reaches the function; default: chosen from its signature."
    )


class MCPAgentFile(MCPOptions):
    """An MCP server (``MCPServerAgent``): each of its tools becomes a capability.

    Its agent id is ``mcp:<name>:<instance>``. Give ``command`` (stdio) or ``url`` (streamable
    HTTP). The other keys are `MCPOptions`, with its defaults.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    kind: Literal["mcp"]
    name: str = Field(description="The agent type: the agent id is 'mcp:<name>:<instance>'.")
    command: str | None = Field(
        None,
        description="Program to start (stdio); 'python' is the Python running reach, as in "
        "MCPServerAgent.connect.",
    )
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = Field(None, description="Added to the SDK's safe default environment.")
    pass_env: list[EnvName] = Field(
        default_factory=list,
        description="Variables of reach's own environment given to the server as they are (a token "
        "the server reads), their values never written here.",
    )
    cwd: str | None = Field(None, description="Working directory, relative to the config directory.")
    url: str | None = Field(None, description="Streamable HTTP endpoint of a running server.")
    headers: dict[str, str] = Field(default_factory=dict, description="Sent with every HTTP request.")
    bearer_token_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Environment variable holding a bearer token for the server (e.g. another reach "
        "serve's security.yaml token): sent as 'Authorization: Bearer ...', never written here.",
    )
    overrides: dict[str, CapabilityPatch] = Field(
        default_factory=dict, description="Per tool name (without prefix): fields laid over its capability."
    )

    _one_authorization = field_validator("bearer_token_env")(classmethod(_one_authorization))

    @model_validator(mode="after")
    def _one_target(self) -> MCPAgentFile:
        if (self.command is None) == (self.url is None):
            msg = "give exactly one of 'command' (a server to start over stdio) or 'url' (streamable HTTP)"
            raise ValueError(msg)
        if self.url is not None and (
            self.args or self.env is not None or self.pass_env or self.cwd is not None
        ):
            msg = (
                "'args', 'env', 'pass_env' and 'cwd' apply to 'command' servers; remove them or use 'command'"
            )
            raise ValueError(msg)
        if self.command is not None and (self.headers or self.bearer_token_env is not None):
            msg = "'headers' and 'bearer_token_env' apply to 'url' servers; remove them or use 'url'"
            raise ValueError(msg)
        problem = (url_problem(self.url) if self.url is not None else None) or agent_id_problem(self.agent_id)
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def agent_id(self) -> str:
        return f"mcp:{self.name}:{self.instance}"

    def http_headers(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The headers to send: `headers`, and the bearer token `bearer_token_env` names."""
        return _with_bearer(self.headers, self.bearer_token_env, environ, "server")

    def server_env(self, environ: Mapping[str, str]) -> dict[str, str] | None:
        """The environment added for a stdio server: `env`, and what `environ` holds for the
        variables `pass_env` names."""
        if not self.pass_env:
            return self.env
        missing = [name for name in self.pass_env if name not in environ]
        if missing:
            msg = f"{', '.join(missing)} not set; export it for server {self.name!r} (pass_env)"
            raise ValueError(msg)
        return {**(self.env or {}), **{name: environ[name] for name in self.pass_env}}

    def options(self) -> MCPOptions:
        """The adapter's options this file gives (timeouts, concurrency, reconnect...)."""
        return MCPOptions(**{name: getattr(self, name) for name in MCPOptions.model_fields})


class A2AAgentFile(A2AOptions):
    """A remote agent that speaks A2A (``A2AAgent``): each skill on its card becomes a capability.

    Its agent id is ``a2a:<name>:<instance>``. The other keys are `A2AOptions`, with its defaults.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    kind: Literal["a2a"]
    name: str = Field(description="The agent type: the agent id is 'a2a:<name>:<instance>'.")
    url: str = Field(description="The agent's base URL; its card is /.well-known/agent-card.json below it.")
    headers: dict[str, str] = Field(default_factory=dict, description="Sent with every HTTP request.")
    bearer_token_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Environment variable holding a bearer token for the agent: sent as "
        "'Authorization: Bearer ...', never written here.",
    )
    overrides: dict[str, CapabilityPatch] = Field(
        default_factory=dict, description="Per skill id: fields laid over its capability."
    )

    _one_authorization = field_validator("bearer_token_env")(classmethod(_one_authorization))

    @model_validator(mode="after")
    def _checked(self) -> A2AAgentFile:
        problem = url_problem(self.url) or agent_id_problem(self.agent_id)
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def agent_id(self) -> str:
        return f"a2a:{self.name}:{self.instance}"

    def http_headers(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The headers to send: `headers`, and the bearer token `bearer_token_env` names."""
        return _with_bearer(self.headers, self.bearer_token_env, environ, "agent")

    def options(self) -> A2AOptions:
        """The adapter's options this file gives (timeouts, concurrency, re-probing...)."""
        return A2AOptions(**{name: getattr(self, name) for name in A2AOptions.model_fields})


def _with_bearer(
    headers: Mapping[str, str], env: str | None, environ: Mapping[str, str], whose: str
) -> dict[str, str]:
    """`headers`, and ``Authorization: Bearer`` with the token environment variable `env` holds."""
    sent = dict(headers)
    if env is not None:
        token = environ.get(env)
        if not token:
            msg = f"{env} is not set; export the token for the {whose}'s bearer auth in it"
            raise ValueError(msg)
        sent["Authorization"] = f"Bearer {token}"
    return sent


class _ChainFileMethods(BaseModel):
    """What a ``kind: chain`` file adds to the chain's own fields."""

    @property
    def agent_id(self) -> str:
        return f"{CHAIN_NAMESPACE}:{getattr(self, 'name')}:0"  # noqa: B009 - the field comes with the twin

    def declaration(self) -> Chain:
        """The `Chain` this file declares; raises `InvalidDeclarationError` if it does not hold."""
        return Chain(**self.model_dump(exclude={"kind"}, exclude_unset=True))


# A chain declared in a file: the fields of `Chain` (a twin, for located errors) and its kind.
if TYPE_CHECKING:

    class ChainFile(_ChainFileMethods):
        kind: Literal["chain"]
        name: str
        steps: list[BaseModel]
        output: object
else:
    ChainFile = create_model(
        "ChainFile",
        __base__=(plain_model(Chain, name="ChainDeclaration", exclude={"steps"}), _ChainFileMethods),
        __doc__="A chain of steps served as one capability (``ChainAgent``), agent id ``chain:<name>:0``; "
        "see docs/chains.md.",
        kind=(Literal["chain"], ...),
        steps=(list[plain_model(Step, name="ChainStep")], Field(min_length=1)),
    )


AgentFileModel = LangChainAgentFile | MCPAgentFile | FunctionAgentFile | A2AAgentFile | ChainFile
AgentFile = Annotated[AgentFileModel, Field(discriminator="kind")]

AGENT_KINDS: dict[str, type[AgentFileModel]] = {
    "langchain": LangChainAgentFile,
    "mcp": MCPAgentFile,
    "function": FunctionAgentFile,
    "a2a": A2AAgentFile,
    "chain": ChainFile,
}
